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
//   P      = Softmax(masked, axis = last)
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


}  // namespace

int fuse_attention(Graph& g) {
  int fused = 0;
  for (NodeId out_mm : g.topo_order()) {
    const Node& mm2 = g.node(out_mm);
    if (!mm2.alive || !well_formed(mm2) || mm2.op_type != "MatMul" || !mm2.domain.empty()) continue;
    const NodeId sm = producer(g, mm2.inputs[0], "Softmax");
    if (sm < 0 || !single_use(g, mm2.inputs[0])) continue;
    const Node& softmax = g.node(sm);
    ValueId x = softmax.inputs[0];
    const auto xs = static_shape(g.value(x));
    if (!xs || xs->size() < 3) continue;
    // Before opset 13 Softmax's axis defaults to 1 and covers the flattened trailing dims: the last axis only then.
    const std::int64_t axis = softmax.attr_int("axis", g.opset && g.opset < 13 ? 1 : -1);
    if (axis != -1 && axis != static_cast<std::int64_t>(xs->size()) - 1) continue;
    std::vector<NodeId> removed{out_mm, sm};
    // Optional mask: Add(x, mask) or Where(cond, x, low) / Where(cond, low, x) with a constant condition.
    bool causal = false;
    ValueId mask = kNoValue;
    std::optional<Tensor> where_mask;  // an additive mask made from a Where's condition
    std::optional<std::array<std::int64_t, 3>> mask_dims;  // the mask's batch, head and row dims (1 or full)
    const std::int64_t s = (*xs)[xs->size() - 2], sk = xs->back();
    if (const NodeId add = producer(g, x, "Add"); add >= 0 && single_use(g, x)) {
      const Node& a = g.node(add);
      const bool mask_first = g.value(a.inputs[0]).constant.has_value() && !g.value(a.inputs[1]).constant.has_value();
      const ValueId m = a.inputs[mask_first ? 0 : 1];
      const auto ms = static_shape(g.value(m));
      if (!ms || !(mask_dims = mask_broadcast(*ms, *xs)) || g.value(m).type != g.value(x).type) continue;
      mask = m;
      x = a.inputs[mask_first ? 1 : 0];
      removed.push_back(add);
    } else if (const NodeId wh = producer(g, x, "Where"); wh >= 0 && single_use(g, x)) {
      const Node& w = g.node(wh);
      const Value& cond = g.value(w.inputs[0]);
      const auto low2 = scalar_constant(g, w.inputs[2]), low1 = scalar_constant(g, w.inputs[1]);
      const bool low_second = low2 && *low2 <= -1e4 && !low1;  // Where(allowed, x, low)
      const bool low_first = low1 && *low1 <= -1e4 && !low2;   // Where(masked, low, x)
      if (!cond.constant || !one_mask(cond.constant->shape, s, sk) || (!low_second && !low_first)) continue;
      const std::vector<double> c = cond.constant->as_doubles();
      const double low = low_second ? *low2 : *low1;
      if (causal_triangle(c, s, sk, low_first)) {
        causal = true;
      } else {
        Tensor t;
        t.type = g.value(x).type;
        const auto dt = device_dtype(t.type);
        if (!dt) continue;
        t.shape = {s, sk};
        t.bytes.resize(static_cast<std::size_t>(s * sk) * elem_bytes(t.type));
        for (std::size_t i = 0; i < c.size(); ++i) {
          const bool allowed = (c[i] != 0) != low_first;
          hw::isa::store_float(&t.bytes[i * elem_bytes(t.type)], *dt, allowed ? 0.0f : static_cast<float>(std::max(low, -65504.0)));
        }
        where_mask = std::move(t);
        mask_dims = std::array<std::int64_t, 3>{1, 1, s};
      }
      x = low_second ? w.inputs[1] : w.inputs[2];
      removed.push_back(wh);
    }
    // Optional scale: Div or Mul by a scalar constant.
    double scale = 1.0;
    if (const NodeId div = producer(g, x, "Div"); div >= 0 && single_use(g, x) && scalar_constant(g, g.node(div).inputs[1])) {
      scale = 1.0 / *scalar_constant(g, g.node(div).inputs[1]);
      x = g.node(div).inputs[0];
      removed.push_back(div);
    } else if (const NodeId mul = producer(g, x, "Mul"); mul >= 0 && single_use(g, x)) {
      double c = 0;
      if (const ValueId other = other_than_scalar(g, g.node(mul), &c); other != kNoValue) {
        scale = c;
        x = other;
        removed.push_back(mul);
      }
    }
    const NodeId mm1 = producer(g, x, "MatMul");
    if (mm1 < 0 || !single_use(g, x)) continue;
    removed.push_back(mm1);
    // Scalars on the operands: torch's SDPA export scales Q and K^T by sqrt(scale) each.
    ValueId q_in = g.node(mm1).inputs[0], kt_in = g.node(mm1).inputs[1];
    for (ValueId* in : {&q_in, &kt_in}) {
      if (const NodeId mul = producer(g, *in, "Mul"); mul >= 0 && single_use(g, *in)) {
        double c = 0;
        if (const ValueId other = other_than_scalar(g, g.node(mul), &c); other != kNoValue) {
          scale *= c;
          *in = other;
          removed.push_back(mul);
        }
      }
    }
    // Q, K (through K^T's view with its last two dims swapped back), V and O as strided views.
    std::vector<NodeId> in_nodes, out_nodes;
    ValueId qb = kNoValue, kb = kNoValue, vb = kNoValue, ob = kNoValue;
    auto qv = view_of(g, q_in, &qb, &in_nodes);
    auto ktv = view_of(g, kt_in, &kb, &in_nodes);
    auto vv = view_of(g, mm2.inputs[1], &vb, &in_nodes);
    auto ov = view_into(g, mm2.outputs[0], &ob, &out_nodes);
    if (!qv || !ktv || !vv || !ov || ktv->rank() < 2) continue;
    std::vector<std::int64_t> swap(ktv->rank());
    for (std::size_t d = 0; d < swap.size(); ++d) swap[d] = static_cast<std::int64_t>(d);
    std::swap(swap[swap.size() - 1], swap[swap.size() - 2]);
    if (!ktv->transpose(swap)) continue;
    const auto q = heads_of(*qv, false), k = heads_of(*ktv, true), v = heads_of(*vv, true), o = heads_of(*ov, false);
    if (!q || !k || !v || !o) continue;
    if (q->S != s || k->S != sk || v->S != sk || k->D != q->D || v->D != q->D || o->D != q->D || o->S != s) continue;
    if (k->B != q->B || v->B != q->B || o->B != q->B || k->N != q->N || v->N != q->N || o->N != q->N) continue;
    if (k->kv_heads != v->kv_heads || q->N % k->kv_heads != 0) continue;
    if (xs->front() != q->B || (xs->size() == 4 && (*xs)[1] != q->N)) continue;  // the scores' batch and head dims
    const ElemType t = g.value(qb).type;
    if (t != g.value(kb).type || t != g.value(vb).type || t != g.value(ob).type ||
        (t != ElemType::kFloat32 && t != ElemType::kFloat16 && t != ElemType::kBFloat16))
      continue;
    // Rewrite: the scores chain and O's layout nodes go (O's final tensor is written through o_layout); the fused
    // node reads the buffers Q, K and V are views of, and input-side layout nodes nothing else uses go too.
    const std::string name = "FlashAttention_" + g.node(mm1).name;
    if (where_mask) mask = g.add_constant(name + "/mask", std::move(*where_mask));
    for (NodeId r : removed) g.remove_node(r);
    for (NodeId r : out_nodes) g.remove_node(r);
    Node fa;
    fa.name = name;
    fa.op_type = "FlashAttention";
    fa.domain = "npusim";
    fa.inputs = {qb, kb, vb};
    if (mask != kNoValue) {
      fa.inputs.push_back(mask);
      fa.attrs["mask_shape"] = Attribute::of_ints({(*mask_dims)[0], (*mask_dims)[1], (*mask_dims)[2]});
    }
    fa.outputs = {ob};
    fa.attrs["scale"] = Attribute::of_float(static_cast<float>(scale));
    fa.attrs["causal"] = Attribute::of_int(causal ? 1 : 0);
    fa.attrs["shape"] = Attribute::of_ints({q->B, q->N, k->kv_heads, s, sk, q->D});
    fa.attrs["q_layout"] = Attribute::of_ints({q->bs, q->ns, q->ss, q->off});
    fa.attrs["k_layout"] = Attribute::of_ints({k->bs, k->ns, k->ss, k->off});
    fa.attrs["v_layout"] = Attribute::of_ints({v->bs, v->ns, v->ss, v->off});
    fa.attrs["o_layout"] = Attribute::of_ints({o->bs, o->ns, o->ss, o->off});
    g.add_node(std::move(fa));
    remove_dead_nodes(g);
    ++fused;
  }
  return fused;
}

}  // namespace npusim::stack::graph::passes
