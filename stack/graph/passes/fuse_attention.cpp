// Attention fusion: the decomposed scaled-dot-product attention a framework exports becomes one FlashAttention node.
//   scores = MatMul(Q, Kt)          Kt = Transpose(K) swapping the last two dims (or any K^T-shaped value)
//   scaled = Div(scores, c) | Mul(scores, c)    c a scalar constant (optional)
//   masked = Add(scaled, mask)                  an additive mask (optional), or
//            Where(cond, scaled, low)           cond a constant lower-triangular [S, SK] bool, low <= -1e4: causal
//   P      = Softmax(masked, axis = last)
//   O      = MatMul(P, V)
// Conditions: every intermediate value has exactly one consumer and is not a graph output; Q, K, V are rank-3 or
// rank-4 with the same leading dims (K/V heads may divide Q heads), float; D = Q's last dim = K's last dim.
#include <algorithm>
#include <cmath>
#include <optional>

#include "stack/graph/passes/match.hpp"
#include "stack/graph/passes/passes.hpp"

namespace npusim::stack::graph::passes {

namespace {

bool static_shape(const Value& v, std::vector<std::int64_t>* out) {
  if (!v.shape) return false;
  out->clear();
  for (const Dim& d : *v.shape) {
    if (!d.known()) return false;
    out->push_back(d.value);
  }
  return true;
}

// cond[i][j] == (j <= i) over an S x SK constant (leading 1s allowed).
bool causal_triangle(const Graph& g, ValueId cond, std::int64_t s, std::int64_t sk) {
  const Value& v = g.value(cond);
  if (!v.constant || v.constant->elements() != s * sk) return false;
  const std::vector<double> c = v.constant->as_doubles();
  for (std::int64_t i = 0; i < s; ++i)
    for (std::int64_t j = 0; j < sk; ++j)
      if ((c[static_cast<std::size_t>(i * sk + j)] != 0) != (j <= i)) return false;
  return true;
}

}  // namespace

int fuse_attention(Graph& g) {
  int fused = 0;
  for (NodeId out_mm : g.topo_order()) {
    const Node& mm2 = g.node(out_mm);
    if (!mm2.alive || mm2.op_type != "MatMul" || !mm2.domain.empty()) continue;
    const NodeId sm = producer(g, mm2.inputs[0], "Softmax");
    if (sm < 0 || !single_use(g, mm2.inputs[0])) continue;
    const Node& softmax = g.node(sm);
    ValueId x = softmax.inputs[0];
    std::vector<std::int64_t> xs;
    if (!static_shape(g.value(x), &xs) || xs.size() < 3) continue;
    const std::int64_t axis = softmax.attr_int("axis", -1);
    if (axis != -1 && axis != static_cast<std::int64_t>(xs.size()) - 1) continue;
    std::vector<NodeId> removed{out_mm, sm};
    // Optional mask: Add(x, mask) or Where(triangle, x, low).
    bool causal = false;
    ValueId mask = kNoValue;
    const std::int64_t s = xs[xs.size() - 2], sk = xs.back();
    if (const NodeId add = producer(g, x, "Add"); add >= 0 && single_use(g, x)) {
      const Node& a = g.node(add);
      std::vector<std::int64_t> ms;
      if (!static_shape(g.value(a.inputs[1]), &ms)) continue;
      std::int64_t n = 1;
      for (auto d : ms) n *= d;
      if (n != s * sk || ms.back() != sk) continue;  // one S x SK mask for every head
      mask = a.inputs[1];
      x = a.inputs[0];
      removed.push_back(add);
    } else if (const NodeId wh = producer(g, x, "Where"); wh >= 0 && single_use(g, x)) {
      const Node& w = g.node(wh);
      const auto low = scalar_constant(g, w.inputs[2]);
      if (!low || *low > -1e4 || !causal_triangle(g, w.inputs[0], s, sk)) continue;
      causal = true;
      x = w.inputs[1];
      removed.push_back(wh);
    }
    // Optional scale: Div or Mul by a scalar constant.
    double scale = 1.0;
    if (const NodeId div = producer(g, x, "Div"); div >= 0 && single_use(g, x) && scalar_constant(g, g.node(div).inputs[1])) {
      scale = 1.0 / *scalar_constant(g, g.node(div).inputs[1]);
      x = g.node(div).inputs[0];
      removed.push_back(div);
    } else if (const NodeId mul = producer(g, x, "Mul"); mul >= 0 && single_use(g, x) && scalar_constant(g, g.node(mul).inputs[1])) {
      scale = *scalar_constant(g, g.node(mul).inputs[1]);
      x = g.node(mul).inputs[0];
      removed.push_back(mul);
    }
    const NodeId mm1 = producer(g, x, "MatMul");
    if (mm1 < 0 || !single_use(g, x)) continue;
    removed.push_back(mm1);
    const ValueId q = g.node(mm1).inputs[0];
    ValueId k = kNoValue;
    const ValueId kt = g.node(mm1).inputs[1];
    if (const NodeId tr = producer(g, kt, "Transpose"); tr >= 0 && single_use(g, kt)) {
      const Attribute* perm = g.node(tr).attr("perm");
      std::vector<std::int64_t> ks;
      if (!perm || !static_shape(g.value(g.node(tr).inputs[0]), &ks)) continue;
      const std::size_t r = ks.size();
      bool swap_last = perm->ints.size() == r && r >= 2;
      for (std::size_t i = 0; swap_last && i < r; ++i)
        swap_last = perm->ints[i] == static_cast<std::int64_t>(i < r - 2 ? i : (i == r - 2 ? r - 1 : r - 2));
      if (!swap_last) continue;
      k = g.node(tr).inputs[0];
      removed.push_back(tr);
    } else {
      continue;  // K^T without a Transpose would need one added back; not taken
    }
    const ValueId v = mm2.inputs[1];
    std::vector<std::int64_t> qs, ks, vs;
    if (!static_shape(g.value(q), &qs) || !static_shape(g.value(k), &ks) || !static_shape(g.value(v), &vs)) continue;
    if (qs.size() != ks.size() || qs.size() != vs.size() || (qs.size() != 3 && qs.size() != 4)) continue;
    if (qs.back() != ks.back() || ks != vs || qs[qs.size() - 2] != s || ks[ks.size() - 2] != sk) continue;
    if (qs.size() == 4 && (qs[0] != ks[0] || qs[1] % ks[1] != 0)) continue;
    if (qs.size() == 3 && qs[0] != ks[0]) continue;
    const ElemType t = g.value(q).type;
    if (t != g.value(k).type || t != g.value(v).type || (t != ElemType::kFloat32 && t != ElemType::kFloat16 && t != ElemType::kBFloat16))
      continue;
    // Rewrite: the fused node writes the second MatMul's output.
    const ValueId o = mm2.outputs[0];
    const std::string name = "FlashAttention_" + g.node(mm1).name;
    for (NodeId r : removed) g.remove_node(r);
    Node fa;
    fa.name = name;
    fa.op_type = "FlashAttention";
    fa.domain = "npusim";
    fa.inputs = {q, k, v};
    if (mask != kNoValue) fa.inputs.push_back(mask);
    fa.outputs = {o};
    Attribute a_scale;
    a_scale.kind = Attribute::Kind::kFloat;
    a_scale.f = static_cast<float>(scale);
    fa.attrs["scale"] = a_scale;
    Attribute a_causal;
    a_causal.i = causal ? 1 : 0;
    fa.attrs["causal"] = a_causal;
    g.add_node(std::move(fa));
    ++fused;
  }
  return fused;
}

}  // namespace npusim::stack::graph::passes
