// Attention fusion: the decomposed scaled-dot-product attention a framework exports becomes one FlashAttention node.
//   scores = MatMul(Q, Kt)          Kt any layout view of K with its last two dims swapped
//   scaled = Div(scores, c) | Mul(scores, c)    c a scalar constant (optional); Q and K^T may also each be
//            Mul(., c) by a scalar constant (torch's SDPA export scales both by sqrt(scale)): the scales multiply
//   masked = Add(scaled, mask)                  an additive mask (optional) that broadcasts over the scores with
//                                               its batch, head and row dims each 1 or full: one S x SK table,
//                                               per batch or head, or a key-padding row per batch [B, 1, 1, SK]; or
//            Where(cond, scaled, low) | Where(cond, low, scaled)    cond a constant S x SK bool, low <= -1e4:
//                                               the lower triangle allowed is causal, any other pattern an
//                                               additive mask of 0 / low
//   P      = Softmax(masked, axis = last), or PyTorch's safe softmax Where(IsNaN(P), 0, P) on it (a row the mask
//            hides whole is 0, as FlashAttention gives)
//   O      = MatMul(P, V)
// Q, K and V may reach the MatMuls through layout nodes (views.hpp): the Reshape/Transpose into heads, the Split of
// a fused QKV projection, repeat_kv's Unsqueeze/Expand/Reshape for grouped-query attention. They are absorbed: the
// fused node reads the buffers those views start from with per-tensor strides, and writes O through the
// Transpose/Reshape back to [B, S, hidden] into that final tensor. The layout nodes left without a use go.
// Conditions: the scores, scaled, masked and P values each have one consumer and are not graph outputs; Q, K, V
// (and O) are rank-3 or rank-4 views whose head dim D is contiguous, D a multiple of 16 up to 256, rows at most
// 65535 elements apart, K/V heads either per query head or grouped (KV heads, repeats with stride 0); float types.
#include <algorithm>
#include <array>
#include <cmath>
#include <optional>

#include "stack/graph/passes/match.hpp"
#include "stack/graph/passes/passes.hpp"
#include "stack/graph/passes/views.hpp"

namespace npusim::stack::graph::passes {

namespace {

// Where each (b, n, s, d) element of a rank-3/4 view sits: strides and offset, and the grouping of its heads.
struct HeadLayout {
  std::int64_t B = 1, N = 1, S = 1, D = 1;
  std::int64_t kv_heads = 1;  // distinct heads (< N: grouped, each repeated N / kv_heads times)
  std::int64_t bs = 0, ns = 0, ss = 0, off = 0;
};

// `v` as heads [B, (N,) S, D], or why it cannot be read as FlashAttention reads its operands (in *why).
std::optional<HeadLayout> heads_of(const View& v, bool allow_groups, std::string* why) {
  auto fail = [&](std::string text) -> std::optional<HeadLayout> {
    *why = std::move(text);
    return std::nullopt;
  };
  if (v.rank() != 3 && v.rank() != 4) return fail("is rank " + std::to_string(v.rank()) + ", not 3 or 4");
  const bool four = v.rank() == 4;
  const std::size_t dd = v.rank() - 1, sd = v.rank() - 2;
  HeadLayout h;
  h.D = v.size(dd);
  h.S = v.size(sd);
  h.B = v.size(0);
  h.N = four ? v.size(1) : 1;
  const auto d_stride = v.simple_stride(dd), s_stride = v.simple_stride(sd), b_stride = v.simple_stride(0);
  if (!d_stride || *d_stride != 1) return fail("has its head dim D not contiguous in its buffer");
  if (!s_stride) return fail("has rows that are not evenly spaced in its buffer");
  if (!b_stride) return fail("has batches that are not evenly spaced in its buffer");
  h.ss = h.S > 1 ? *s_stride : h.D;
  h.bs = *b_stride;
  h.off = v.offset();
  h.kv_heads = h.N;
  if (four) {
    const auto& atoms = v.atoms(1);
    if (const auto ns = v.simple_stride(1); ns && (*ns != 0 || h.N == 1)) {
      h.ns = *ns;
    } else if (allow_groups && atoms.size() == 1 && atoms[0].stride == 0) {  // one head shared by all
      h.kv_heads = 1;
    } else if (allow_groups && atoms.size() == 2 && atoms[1].stride == 0 && atoms[0].stride != 0) {
      h.kv_heads = atoms[0].size;  // (KV heads, stride), (repeats, 0): head n reads KV head n / repeats
      h.ns = atoms[0].stride;
    } else {
      return fail("has heads that are neither evenly spaced nor grouped key/value heads");
    }
  }
  if (h.D % 16 != 0 || h.D > 256)
    return fail("has head dim D=" + std::to_string(h.D) + " (the kernel takes multiples of 16 up to 256)");
  if (h.ss < h.D || h.ss > 65535)
    return fail("has rows " + std::to_string(h.ss) + " elements apart (D to 65535 allowed)");
  return h;
}

// How an additive mask broadcasts over the scores [B, N, S, SK] (or [B, S, SK]): its dims right-aligned, each of
// the batch, head and row dims 1 or full, the key dim full. Returns {MB, MN, MS} (per batch, per head, per row).
std::optional<std::array<std::int64_t, 3>> mask_broadcast(const std::vector<std::int64_t>& mask,
                                                          const std::vector<std::int64_t>& scores) {
  const std::size_t r = scores.size();
  if (mask.empty() || mask.size() > r || mask.back() != scores.back()) return std::nullopt;
  std::vector<std::int64_t> m(r - mask.size(), 1);
  m.insert(m.end(), mask.begin(), mask.end());
  for (std::size_t d = 0; d + 1 < r; ++d)
    if (m[d] != 1 && m[d] != scores[d]) return std::nullopt;
  if (r == 3) return std::array<std::int64_t, 3>{m[0], 1, m[1]};
  if (r == 4) return std::array<std::int64_t, 3>{m[0], m[1], m[2]};
  return std::nullopt;
}

// A shape that is S x SK with leading 1s only: one mask for every batch and head.
bool one_mask(const std::vector<std::int64_t>& shape, std::int64_t s, std::int64_t sk) {
  if (shape.empty() || shape.back() != sk || (shape.size() == 1 ? s != 1 : shape[shape.size() - 2] != s)) return false;
  return std::all_of(shape.begin(), shape.end() - std::min<std::ptrdiff_t>(2, static_cast<std::ptrdiff_t>(shape.size())),
                     [](std::int64_t d) { return d == 1; });
}

// cond[i][j] == (j <= i) over an S x SK constant (leading 1s allowed), with `negate` reading !cond.
bool causal_triangle(const std::vector<double>& c, std::int64_t s, std::int64_t sk, bool negate) {
  for (std::int64_t i = 0; i < s; ++i)
    for (std::int64_t j = 0; j < sk; ++j)
      if (((c[static_cast<std::size_t>(i * sk + j)] != 0) != negate) != (j <= i)) return false;
  return true;
}

// An additive S x SK constant that is 0 on and below the diagonal and at most -1e4 (-inf included) above it:
// PyTorch's generate_square_subsequent_mask, torch.triu(torch.full((S, S), -inf), 1).
bool causal_additive(const std::vector<double>& m, std::int64_t s, std::int64_t sk) {
  for (std::int64_t i = 0; i < s; ++i) {
    for (std::int64_t j = 0; j < sk; ++j) {
      const double x = m[static_cast<std::size_t>(i * sk + j)];
      if (j <= i ? x != 0.0 : !(x <= -1e4)) return false;
    }
  }
  return true;
}

std::string shape_text(const std::vector<std::int64_t>& shape) {
  std::string t = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) t += (i ? ", " : "") + std::to_string(shape[i]);
  return t + "]";
}

// One candidate, stage by stage: from the output MatMul back through Softmax, the mask, the scale and the scores
// MatMul to the operands' views.
struct Candidate {
  std::vector<NodeId> removed;       // the scores chain's nodes
  ValueId x = kNoValue;              // the value walked back to (the scores before the next stage)
  std::vector<std::int64_t> scores;  // the scores' shape [B, (N,) S, SK]
  std::int64_t s = 0, sk = 0;
  bool causal = false;
  ValueId mask = kNoValue;
  std::optional<Tensor> where_mask;                      // an additive mask made from a Where's condition
  std::optional<std::array<std::int64_t, 3>> mask_dims;  // the mask's batch, head and row dims (1 or full)
  double scale = 1.0;
  NodeId scores_mm = -1;
  ValueId q_in = kNoValue, kt_in = kNoValue;  // the scores MatMul's operands (past their scalar factors)
};

// The operands' layouts: the buffers Q, K, V and O are views of, and where each element sits in them.
struct Layouts {
  ValueId qb = kNoValue, kb = kNoValue, vb = kNoValue, ob = kNoValue;
  HeadLayout q, k, v, o;
  std::vector<NodeId> out_nodes;  // O's layout nodes (removed: O is written through o_layout)
  std::int64_t split = 1;         // rank-3 operands read as [B, N, S, D] with this N (split_batch_heads)
  std::vector<NodeId> in_nodes;   // Q, K and V's layout nodes (those nothing else uses go with the chain)
};

// PyTorch's safe softmax guard on P: Where(IsNaN(P), 0, P), which makes a row the mask hides whole 0 instead of
// NaN (FlashAttention gives 0 there). Returns the Where's P and its two nodes, or kNoValue.
ValueId nan_guard(const Graph& g, ValueId v, std::vector<NodeId>* nodes) {
  const NodeId wh = producer(g, v, "Where");
  if (wh < 0 || !single_use(g, v)) return kNoValue;
  const Node& w = g.node(wh);
  const NodeId nan = producer(g, w.inputs[0], "IsNaN");
  const auto zero = scalar_constant(g, w.inputs[1]);
  if (nan < 0 || !single_use(g, w.inputs[0]) || !zero || *zero != 0.0) return kNoValue;
  const ValueId p = w.inputs[2];
  const bool output = std::find(g.outputs.begin(), g.outputs.end(), p) != g.outputs.end();
  if (g.node(nan).inputs[0] != p || g.value(p).consumers.size() != 2 || output) return kNoValue;  // the guard's alone
  *nodes = {wh, nan};
  return p;
}

// The Softmax whose probabilities reach `v` directly, through a Where (PyTorch's NaN guard) or a Cast, or -1: the
// attention candidates are the MatMuls whose first operand has one.
NodeId softmax_behind(const Graph& g, ValueId v) {
  for (const char* step : {"Where", "Cast"}) {
    if (const NodeId n = producer(g, v, step); n >= 0) {
      const Node& node = g.node(n);
      v = node.inputs[node.op_type == "Where" ? 2 : 0];
    }
  }
  return producer(g, v, "Softmax");
}

// Softmax over the last axis feeding MatMul `out_mm` as its only use (through PyTorch's NaN guard or not). The
// returned text says why not; "" when it matched. Below, the same: "" is a match.
std::string match_softmax(const Graph& g, NodeId out_mm, Candidate& c) {
  const Node& mm2 = g.node(out_mm);
  const std::string weights_used =
      "' are used elsewhere too (returned as attention weights, or read by another node): FlashAttention never "
      "writes them";
  if (const NodeId cast = producer(g, mm2.inputs[0], "Cast"); cast >= 0)
    return "the Cast '" + g.node(cast).name +
           "' between the Softmax and the P V MatMul (a softmax in another precision) is not absorbed";
  std::vector<NodeId> guard;
  ValueId p = nan_guard(g, mm2.inputs[0], &guard);
  if (p == kNoValue) {
    if (const NodeId wh = producer(g, mm2.inputs[0], "Where"); wh >= 0)
      return "the Where '" + g.node(wh).name + "' on the probabilities is not PyTorch's NaN guard alone (its values" +
             weights_used + ")";
    p = mm2.inputs[0];
  }
  const NodeId sm = producer(g, p, "Softmax");
  if (sm < 0) return "the probabilities reach the P V MatMul through nodes other than PyTorch's NaN guard";
  if (guard.empty() && !single_use(g, p)) return "the probabilities '" + g.value(p).name + weights_used;
  const Node& softmax = g.node(sm);
  c.x = softmax.inputs[0];
  const auto xs = static_shape(g.value(c.x));
  if (!xs) return "the scores '" + g.value(c.x).name + "' have no static shape (bind the model's dims with --dim)";
  if (xs->size() < 3)
    return "the scores " + shape_text(*xs) + " have no batch dim (rank " + std::to_string(xs->size()) + ")";
  // Before opset 13 Softmax's axis defaults to 1 and covers the flattened trailing dims: the last axis only then.
  const std::int64_t axis = softmax.attr_int("axis", g.opset && g.opset < 13 ? 1 : -1);
  if (axis != -1 && axis != static_cast<std::int64_t>(xs->size()) - 1)
    return "the Softmax '" + softmax.name + "' is over axis " + std::to_string(axis) + ", not the keys (the last)";
  c.scores = *xs;
  c.s = (*xs)[xs->size() - 2];
  c.sk = xs->back();
  c.removed = {out_mm, sm};
  c.removed.insert(c.removed.end(), guard.begin(), guard.end());
  return "";
}

// Where(cond, x, low) / Where(cond, low, x) with a constant S x SK condition: causal when it allows exactly the
// lower triangle, else an additive 0 / low mask (low clamped to what fp16 holds).
std::string match_where_mask(const Graph& g, NodeId wh, Candidate& c) {
  const Node& w = g.node(wh);
  const Value& cond = g.value(w.inputs[0]);
  const auto low2 = scalar_constant(g, w.inputs[2]), low1 = scalar_constant(g, w.inputs[1]);
  const bool low_second = low2 && *low2 <= -1e4 && !low1;  // Where(allowed, x, low)
  const bool low_first = low1 && *low1 <= -1e4 && !low2;   // Where(masked, low, x)
  if (!low_second && !low_first)
    return "the Where '" + w.name + "' on the scores does not fill with one constant <= -1e4 (-inf)";
  if (!cond.constant)
    return "the Where '" + w.name + "' on the scores has a condition computed at run time ('" + cond.name +
           "'); a mask as an additive input (Add) fuses";
  if (!one_mask(cond.constant->shape, c.s, c.sk))
    return "the Where '" + w.name + "' has a condition of shape " + shape_text(cond.constant->shape) + ", not one " +
           std::to_string(c.s) + " x " + std::to_string(c.sk) + " table";
  const std::vector<double> cv = cond.constant->as_doubles();
  const double low = low_second ? *low2 : *low1;
  if (causal_triangle(cv, c.s, c.sk, low_first)) {
    c.causal = true;
  } else {
    Tensor t;
    t.type = g.value(c.x).type;
    const auto dt = device_dtype(t.type);
    if (!dt) return "the scores are " + std::string(elem_name(t.type)) + ", which the device has no form for";
    t.shape = {c.s, c.sk};
    t.bytes.resize(static_cast<std::size_t>(c.s * c.sk) * elem_bytes(t.type));
    for (std::size_t i = 0; i < cv.size(); ++i) {
      const bool allowed = (cv[i] != 0) != low_first;
      hw::isa::store_float(&t.bytes[i * elem_bytes(t.type)], *dt,
                           allowed ? 0.0f : static_cast<float>(std::max(low, -65504.0)));
    }
    c.where_mask = std::move(t);
    c.mask_dims = std::array<std::int64_t, 3>{1, 1, c.s};
  }
  c.x = low_second ? w.inputs[1] : w.inputs[2];
  c.removed.push_back(wh);
  return "";
}

// The optional mask: Add(x, mask) with a mask that broadcasts over the scores (a constant causal one becomes the
// kernel's causal flag), or a Where.
std::string match_mask(const Graph& g, Candidate& c) {
  if (const NodeId add = producer(g, c.x, "Add"); add >= 0 && single_use(g, c.x)) {
    const Node& a = g.node(add);
    // The mask is the constant side, else the side that is not the scores' MatMul or scale.
    auto scores_like = [&](ValueId v) {
      return producer(g, v, "MatMul") >= 0 || producer(g, v, "Div") >= 0 || producer(g, v, "Mul") >= 0;
    };
    const bool const0 = g.value(a.inputs[0]).constant.has_value(), const1 = g.value(a.inputs[1]).constant.has_value();
    const bool mask_first = const0 != const1 ? const0 : scores_like(a.inputs[1]) && !scores_like(a.inputs[0]);
    const ValueId m = a.inputs[mask_first ? 0 : 1];
    const Value& mv = g.value(m);
    c.x = a.inputs[mask_first ? 1 : 0];
    c.removed.push_back(add);
    if (mv.constant && one_mask(mv.constant->shape, c.s, c.sk) &&
        causal_additive(mv.constant->as_doubles(), c.s, c.sk)) {
      c.causal = true;  // the block skipping of the causal kernel, not an S x SK table
      return "";
    }
    const auto ms = static_shape(mv);
    if (!ms) return "the mask '" + mv.name + "' has no static shape";
    if (!(c.mask_dims = mask_broadcast(*ms, c.scores)))
      return "the mask '" + mv.name + "' of shape " + shape_text(*ms) + " does not broadcast over the scores " +
             shape_text(c.scores) + " (its batch, head and row dims must each be 1 or full, its last dim the keys)";
    if (mv.type != g.value(c.x).type)
      return "the mask '" + mv.name + "' is " + std::string(elem_name(mv.type)) + ", the scores " +
             std::string(elem_name(g.value(c.x).type));
    c.mask = m;
  } else if (const NodeId wh = producer(g, c.x, "Where"); wh >= 0 && single_use(g, c.x)) {
    return match_where_mask(g, wh, c);
  }
  return "";
}

// A scalar factor c on `v` (Mul by a scalar constant, a single use): v becomes the other operand.
void absorb_scalar(const Graph& g, ValueId* v, Candidate& c) {
  if (const NodeId mul = producer(g, *v, "Mul"); mul >= 0 && single_use(g, *v)) {
    double k = 0;
    if (const ValueId other = other_than_scalar(g, g.node(mul), &k); other != kNoValue) {
      c.scale *= k;
      *v = other;
      c.removed.push_back(mul);
    }
  }
}

// The optional scale (Div or Mul by a scalar constant), then the scores MatMul, whose operands may each carry a
// scalar factor (torch's SDPA export scales Q and K^T by sqrt(scale) each).
std::string match_scores(const Graph& g, Candidate& c) {
  if (const NodeId div = producer(g, c.x, "Div");
      div >= 0 && single_use(g, c.x) && scalar_constant(g, g.node(div).inputs[1])) {
    c.scale = 1.0 / *scalar_constant(g, g.node(div).inputs[1]);
    c.x = g.node(div).inputs[0];
    c.removed.push_back(div);
  } else {
    absorb_scalar(g, &c.x, c);
  }
  const Value& x = g.value(c.x);
  const NodeId mm1 = producer(g, c.x, "MatMul");
  if (mm1 < 0) {
    const NodeId p = x.producer;
    if (p < 0) return "the scores '" + x.name + "' come from outside the graph, not from a MatMul";
    const Node& n = g.node(p);
    const bool stage = n.op_type == "Add" || n.op_type == "Where" || n.op_type == "Div" || n.op_type == "Mul";
    if (stage && !single_use(g, c.x))
      return "'" + x.name + "' (from " + n.op_type + " '" + n.name +
             "', on the way to the scores MatMul) is used elsewhere too: the chain cannot become one kernel";
    if (n.op_type == "Div" || n.op_type == "Mul")
      return "the scores are scaled by " + n.op_type + " '" + n.name + "' with a value that is not one constant";
    return "the scores '" + x.name +
           "' do not come from a MatMul (through an optional mask and scalar scale) but from " + n.op_type + " '" +
           n.name + "'";
  }
  if (!single_use(g, c.x)) return "the scores '" + x.name + "' are used elsewhere too";
  c.removed.push_back(mm1);
  c.scores_mm = mm1;
  c.q_in = g.node(mm1).inputs[0];
  c.kt_in = g.node(mm1).inputs[1];
  absorb_scalar(g, &c.q_in, c);
  absorb_scalar(g, &c.kt_in, c);
  return "";
}

// Rank-3 operands [B*N, S, D] (what nn.MultiheadAttention's batched matmuls see): when all four are rank 3 and one
// shows its batch dim as (B, stride) x (N, stride), every operand is read as [B, N, S, D], with the first such N
// that all of them split by. Returns N (1: left as they are; 0: no N splits them all).
std::int64_t split_batch_heads(std::array<View*, 4> views) {
  std::vector<std::int64_t> ns;
  for (const View* v : views) {
    if (v->rank() != 3) return 1;
    if (v->atoms(0).size() == 2) ns.push_back(v->atoms(0)[1].size);
  }
  for (const std::int64_t n : ns) {
    std::array<View, 4> split{*views[0], *views[1], *views[2], *views[3]};
    bool ok = true;
    for (View& v : split) {
      const std::int64_t bn = v.size(0);
      ok = ok && bn % n == 0 && v.reshape({bn / n, n, v.size(1), v.size(2)});
    }
    if (!ok) continue;
    for (std::size_t i = 0; i < 4; ++i) *views[i] = split[i];
    return n;
  }
  return ns.empty() ? 1 : 0;
}

// Q, K (through K^T's view with its last two dims swapped back), V and O as strided views of one shape and type.
std::string match_layouts(const Graph& g, const Node& mm2, const Candidate& c, Layouts* l) {
  auto qv = view_of(g, c.q_in, &l->qb, &l->in_nodes);
  auto ktv = view_of(g, c.kt_in, &l->kb, &l->in_nodes);
  auto vv = view_of(g, mm2.inputs[1], &l->vb, &l->in_nodes);
  auto ov = view_into(g, mm2.outputs[0], &l->ob, &l->out_nodes);
  const std::pair<const char*, ValueId> named[] = {
      {"Q", c.q_in}, {"K^T", c.kt_in}, {"V", mm2.inputs[1]}, {"O", mm2.outputs[0]}};
  const bool ok[] = {qv.has_value(), ktv.has_value(), vv.has_value(), ov.has_value()};
  for (int i = 0; i < 4; ++i)
    if (!ok[i])
      return std::string(named[i].first) + " '" + g.value(named[i].second).name +
             "' is not a strided view of one buffer with static shapes";
  if (ktv->rank() < 2) return "K^T is rank " + std::to_string(ktv->rank());
  std::vector<std::int64_t> swap(ktv->rank());
  for (std::size_t d = 0; d < swap.size(); ++d) swap[d] = static_cast<std::int64_t>(d);
  std::swap(swap[swap.size() - 1], swap[swap.size() - 2]);
  if (!ktv->transpose(swap)) return "K^T's last two dims cannot be swapped back into K";
  l->split = split_batch_heads({&*qv, &*ktv, &*vv, &*ov});
  if (!l->split) return "Q, K, V and O do not split their batch dim into the same heads";
  std::string why;
  const char* names[] = {"Q", "K", "V", "O"};
  const View* views[] = {&*qv, &*ktv, &*vv, &*ov};
  HeadLayout* outs[] = {&l->q, &l->k, &l->v, &l->o};
  for (int i = 0; i < 4; ++i) {
    const auto h = heads_of(*views[i], i == 1 || i == 2, &why);
    if (!h) return std::string(names[i]) + " " + why;
    *outs[i] = *h;
  }
  const HeadLayout &q = l->q, &k = l->k, &v = l->v, &o = l->o;
  if (q.S != c.s || k.S != c.sk || v.S != c.sk || o.S != c.s || k.D != q.D || v.D != q.D || o.D != q.D)
    return "the rows or head dims of Q, K, V and O do not agree with the scores " + shape_text(c.scores);
  if (k.B != q.B || v.B != q.B || o.B != q.B || k.N != q.N || v.N != q.N || o.N != q.N)
    return "Q, K, V and O differ in batches or heads";
  if (k.kv_heads != v.kv_heads || q.N % k.kv_heads != 0)
    return "K and V group their heads differently, or the query heads do not divide into them";
  const auto& xs = c.scores;
  const std::int64_t batches = xs.size() == 3 && l->split > 1 ? q.B * q.N : q.B;
  if (xs.front() != batches || (xs.size() == 4 && xs[1] != q.N))
    return "the scores " + shape_text(xs) + " do not have Q's batch and head dims";
  const ElemType t = g.value(l->qb).type;
  if (t != g.value(l->kb).type || t != g.value(l->vb).type || t != g.value(l->ob).type)
    return "Q, K, V and O are not all of one type";
  if (t != ElemType::kFloat32 && t != ElemType::kFloat16 && t != ElemType::kBFloat16)
    return "Q is " + std::string(elem_name(t)) + " (float32, float16 and bfloat16 fuse)";
  return "";
}

// The scores chain and O's layout nodes go (O's final tensor is written through o_layout); the fused node reads the
// buffers Q, K and V are views of, and input-side layout nodes nothing else uses go too.
// Returns the fused node.
NodeId rewrite(Graph& g, Candidate& c, const Layouts& l) {
  std::string name = "FlashAttention_" + g.node(c.scores_mm).name;
  if (c.where_mask) c.mask = g.add_constant(name + "/mask", std::move(*c.where_mask));
  if (l.split > 1 && c.mask_dims && c.scores.size() == 3 && (*c.mask_dims)[0] != 1)
    *c.mask_dims = {l.q.B, l.q.N, (*c.mask_dims)[2]};  // a mask per [B*N] batch is one per batch and head
  for (NodeId r : c.removed) g.remove_node(r);
  for (NodeId r : l.out_nodes) g.remove_node(r);
  Node fa;
  fa.name = name;
  fa.op_type = "FlashAttention";
  fa.domain = "npusim";
  fa.inputs = {l.qb, l.kb, l.vb};
  if (c.mask != kNoValue) {
    fa.inputs.push_back(c.mask);
    fa.attrs["mask_shape"] = Attribute::of_ints({(*c.mask_dims)[0], (*c.mask_dims)[1], (*c.mask_dims)[2]});
  }
  fa.outputs = {l.ob};
  fa.attrs["scale"] = Attribute::of_float(static_cast<float>(c.scale));
  fa.attrs["causal"] = Attribute::of_int(c.causal ? 1 : 0);
  fa.attrs["shape"] = Attribute::of_ints({l.q.B, l.q.N, l.k.kv_heads, c.s, c.sk, l.q.D});
  fa.attrs["q_layout"] = Attribute::of_ints({l.q.bs, l.q.ns, l.q.ss, l.q.off});
  fa.attrs["k_layout"] = Attribute::of_ints({l.k.bs, l.k.ns, l.k.ss, l.k.off});
  fa.attrs["v_layout"] = Attribute::of_ints({l.v.bs, l.v.ns, l.v.ss, l.v.off});
  fa.attrs["o_layout"] = Attribute::of_ints({l.o.bs, l.o.ns, l.o.ss, l.o.off});
  return g.add_node(std::move(fa));
}

}  // namespace

int fuse_attention(Graph& g, std::vector<FusionNote>* notes) {
  int fused = 0;
  for (NodeId out_mm : g.topo_order()) {
    const Node& mm2 = g.node(out_mm);
    if (!mm2.alive || !well_formed(mm2) || mm2.op_type != "MatMul" || !mm2.domain.empty()) continue;
    if (softmax_behind(g, mm2.inputs[0]) < 0) continue;
    Candidate c;
    Layouts l;
    std::string why = match_softmax(g, out_mm, c);
    if (why.empty()) why = match_mask(g, c);
    if (why.empty()) why = match_scores(g, c);
    if (why.empty()) why = match_layouts(g, mm2, c, &l);
    FusionNote note{"fuse_attention", mm2.name, "", why, false};
    if (why.empty()) {
      note.causal = c.causal;
      const NodeId fa = rewrite(g, c, l);
      remove_dead_nodes(g);
      // Q, K and V's layout nodes that went with it are part of what it stands for.
      std::vector<NodeId> went;
      for (NodeId r : l.in_nodes)
        if (!g.node(r).alive && std::find(went.begin(), went.end(), r) == went.end()) went.push_back(r);
      for (NodeId r : went)
        for (std::string& s : g.node(r).sources()) g.node(fa).origin.push_back(std::move(s));
      note.fused_into = g.node(fa).name;
      ++fused;
    }
    if (notes) notes->push_back(std::move(note));
  }
  return fused;
}

}  // namespace npusim::stack::graph::passes
