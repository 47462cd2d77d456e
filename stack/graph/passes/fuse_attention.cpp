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

std::optional<HeadLayout> heads_of(const View& v, bool allow_groups) {
  if (v.rank() != 3 && v.rank() != 4) return std::nullopt;
  const bool four = v.rank() == 4;
  const std::size_t dd = v.rank() - 1, sd = v.rank() - 2;
  HeadLayout h;
  h.D = v.size(dd);
  h.S = v.size(sd);
  h.B = v.size(0);
  h.N = four ? v.size(1) : 1;
  const auto d_stride = v.simple_stride(dd), s_stride = v.simple_stride(sd), b_stride = v.simple_stride(0);
  if (!d_stride || *d_stride != 1 || !s_stride || !b_stride) return std::nullopt;
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
      return std::nullopt;
    }
  }
  if (h.ss < h.D || h.ss > 65535 || h.D % 16 != 0 || h.D > 256) return std::nullopt;
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

// Softmax over the last axis feeding MatMul `out_mm` as its only use (through PyTorch's NaN guard or not).
bool match_softmax(const Graph& g, NodeId out_mm, Candidate& c) {
  const Node& mm2 = g.node(out_mm);
  std::vector<NodeId> guard;
  ValueId p = nan_guard(g, mm2.inputs[0], &guard);
  if (p == kNoValue) p = mm2.inputs[0];
  const NodeId sm = producer(g, p, "Softmax");
  if (sm < 0 || (guard.empty() && !single_use(g, p))) return false;
  const Node& softmax = g.node(sm);
  c.x = softmax.inputs[0];
  const auto xs = static_shape(g.value(c.x));
  if (!xs || xs->size() < 3) return false;
  // Before opset 13 Softmax's axis defaults to 1 and covers the flattened trailing dims: the last axis only then.
  const std::int64_t axis = softmax.attr_int("axis", g.opset && g.opset < 13 ? 1 : -1);
  if (axis != -1 && axis != static_cast<std::int64_t>(xs->size()) - 1) return false;
  c.scores = *xs;
  c.s = (*xs)[xs->size() - 2];
  c.sk = xs->back();
  c.removed = {out_mm, sm};
  c.removed.insert(c.removed.end(), guard.begin(), guard.end());
  return true;
}

// Where(cond, x, low) / Where(cond, low, x) with a constant S x SK condition: causal when it allows exactly the
// lower triangle, else an additive 0 / low mask (low clamped to what fp16 holds).
bool match_where_mask(const Graph& g, NodeId wh, Candidate& c) {
  const Node& w = g.node(wh);
  const Value& cond = g.value(w.inputs[0]);
  const auto low2 = scalar_constant(g, w.inputs[2]), low1 = scalar_constant(g, w.inputs[1]);
  const bool low_second = low2 && *low2 <= -1e4 && !low1;  // Where(allowed, x, low)
  const bool low_first = low1 && *low1 <= -1e4 && !low2;   // Where(masked, low, x)
  if (!cond.constant || !one_mask(cond.constant->shape, c.s, c.sk) || (!low_second && !low_first)) return false;
  const std::vector<double> cv = cond.constant->as_doubles();
  const double low = low_second ? *low2 : *low1;
  if (causal_triangle(cv, c.s, c.sk, low_first)) {
    c.causal = true;
  } else {
    Tensor t;
    t.type = g.value(c.x).type;
    const auto dt = device_dtype(t.type);
    if (!dt) return false;
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
  return true;
}

// The optional mask: Add(x, mask) with a mask that broadcasts over the scores, or a Where. False: a mask is there
// but cannot be fused.
bool match_mask(const Graph& g, Candidate& c) {
  if (const NodeId add = producer(g, c.x, "Add"); add >= 0 && single_use(g, c.x)) {
    const Node& a = g.node(add);
    const bool mask_first = g.value(a.inputs[0]).constant.has_value() && !g.value(a.inputs[1]).constant.has_value();
    const ValueId m = a.inputs[mask_first ? 0 : 1];
    const auto ms = static_shape(g.value(m));
    if (!ms || !(c.mask_dims = mask_broadcast(*ms, c.scores)) || g.value(m).type != g.value(c.x).type) return false;
    c.mask = m;
    c.x = a.inputs[mask_first ? 1 : 0];
    c.removed.push_back(add);
  } else if (const NodeId wh = producer(g, c.x, "Where"); wh >= 0 && single_use(g, c.x)) {
    return match_where_mask(g, wh, c);
  }
  return true;
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
bool match_scores(const Graph& g, Candidate& c) {
  if (const NodeId div = producer(g, c.x, "Div");
      div >= 0 && single_use(g, c.x) && scalar_constant(g, g.node(div).inputs[1])) {
    c.scale = 1.0 / *scalar_constant(g, g.node(div).inputs[1]);
    c.x = g.node(div).inputs[0];
    c.removed.push_back(div);
  } else {
    absorb_scalar(g, &c.x, c);
  }
  const NodeId mm1 = producer(g, c.x, "MatMul");
  if (mm1 < 0 || !single_use(g, c.x)) return false;
  c.removed.push_back(mm1);
  c.scores_mm = mm1;
  c.q_in = g.node(mm1).inputs[0];
  c.kt_in = g.node(mm1).inputs[1];
  absorb_scalar(g, &c.q_in, c);
  absorb_scalar(g, &c.kt_in, c);
  return true;
}

// Q, K (through K^T's view with its last two dims swapped back), V and O as strided views of one shape and type.
std::optional<Layouts> match_layouts(const Graph& g, const Node& mm2, const Candidate& c) {
  Layouts l;
  std::vector<NodeId> in_nodes;
  auto qv = view_of(g, c.q_in, &l.qb, &in_nodes);
  auto ktv = view_of(g, c.kt_in, &l.kb, &in_nodes);
  auto vv = view_of(g, mm2.inputs[1], &l.vb, &in_nodes);
  auto ov = view_into(g, mm2.outputs[0], &l.ob, &l.out_nodes);
  if (!qv || !ktv || !vv || !ov || ktv->rank() < 2) return std::nullopt;
  std::vector<std::int64_t> swap(ktv->rank());
  for (std::size_t d = 0; d < swap.size(); ++d) swap[d] = static_cast<std::int64_t>(d);
  std::swap(swap[swap.size() - 1], swap[swap.size() - 2]);
  if (!ktv->transpose(swap)) return std::nullopt;
  const auto q = heads_of(*qv, false), k = heads_of(*ktv, true), v = heads_of(*vv, true), o = heads_of(*ov, false);
  if (!q || !k || !v || !o) return std::nullopt;
  if (q->S != c.s || k->S != c.sk || v->S != c.sk || k->D != q->D || v->D != q->D || o->D != q->D || o->S != c.s)
    return std::nullopt;
  if (k->B != q->B || v->B != q->B || o->B != q->B || k->N != q->N || v->N != q->N || o->N != q->N) return std::nullopt;
  if (k->kv_heads != v->kv_heads || q->N % k->kv_heads != 0) return std::nullopt;
  const auto& xs = c.scores;
  if (xs.front() != q->B || (xs.size() == 4 && xs[1] != q->N)) return std::nullopt;  // the scores' batch and head dims
  const ElemType t = g.value(l.qb).type;
  if (t != g.value(l.kb).type || t != g.value(l.vb).type || t != g.value(l.ob).type ||
      (t != ElemType::kFloat32 && t != ElemType::kFloat16 && t != ElemType::kBFloat16))
    return std::nullopt;
  l.q = *q;
  l.k = *k;
  l.v = *v;
  l.o = *o;
  return l;
}

// The scores chain and O's layout nodes go (O's final tensor is written through o_layout); the fused node reads the
// buffers Q, K and V are views of, and input-side layout nodes nothing else uses go too.
void rewrite(Graph& g, Candidate& c, const Layouts& l) {
  const std::string name = "FlashAttention_" + g.node(c.scores_mm).name;
  if (c.where_mask) c.mask = g.add_constant(name + "/mask", std::move(*c.where_mask));
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
  g.add_node(std::move(fa));
}

}  // namespace

int fuse_attention(Graph& g) {
  int fused = 0;
  for (NodeId out_mm : g.topo_order()) {
    const Node& mm2 = g.node(out_mm);
    if (!mm2.alive || !well_formed(mm2) || mm2.op_type != "MatMul" || !mm2.domain.empty()) continue;
    Candidate c;
    if (!match_softmax(g, out_mm, c) || !match_mask(g, c) || !match_scores(g, c)) continue;
    const auto layouts = match_layouts(g, mm2, c);
    if (!layouts) continue;
    rewrite(g, c, *layouts);
    remove_dead_nodes(g);
    ++fused;
  }
  return fused;
}

}  // namespace npusim::stack::graph::passes
