// LayerNorm and RMSNorm from their decomposed forms, as frameworks export hand-written norms:
//   LayerNorm: d = Sub(x, ReduceMean(x)); Div(d, Sqrt(Add(ReduceMean(Pow(d, 2)), eps))) [-> Mul(gamma) -> Add(beta)]
//              becomes a LayerNormalization node (axis -1, epsilon);
//   RMSNorm:   Mul(x, R) with R = Div(1, Sqrt(Add(ReduceMean(Pow(x, 2)), eps))) or Reciprocal(Sqrt(...))
//              [-> Mul(weight)] becomes an npusim.RMSNormalization node.
// Reductions must be over the last axis with keepdims; eps and the exponent 2 constants; every removed intermediate
// used only inside the pattern (d twice: by Pow and Div; x by its own uses outside).
#include "stack/graph/passes/match.hpp"
#include "stack/graph/passes/passes.hpp"

namespace npusim::stack::graph::passes {

namespace {

// Sqrt(Add(ReduceMean(Pow(base, 2)), eps)): the base and eps, collecting the nodes.
bool rms_of(const Graph& g, ValueId sqrt_out, ValueId* base, double* eps, std::vector<NodeId>* nodes) {
  const NodeId sq = producer(g, sqrt_out, "Sqrt");
  if (sq < 0) return false;
  const ValueId sum = g.node(sq).inputs[0];
  const NodeId add = producer(g, sum, "Add");
  if (add < 0 || !single_use(g, sum)) return false;
  const ValueId mean = other_than_scalar(g, g.node(add), eps);
  const NodeId rm = producer(g, mean, "ReduceMean");
  if (rm < 0 || !single_use(g, mean) || !mean_over_last(g, g.node(rm))) return false;
  const ValueId pw = g.node(rm).inputs[0];
  const NodeId pow = producer(g, pw, "Pow");
  if (pow < 0 || !single_use(g, pw) || !near(scalar_constant(g, g.node(pow).inputs[1]), 2.0)) return false;
  *base = g.node(pow).inputs[0];
  nodes->insert(nodes->end(), {sq, add, rm, pow});
  return true;
}

// The affine tail: Mul by a 1-D constant-or-value `gamma` (either side), then optionally Add `beta`.
ValueId affine(const Graph& g, ValueId v, ValueId* gamma, ValueId* beta, std::vector<NodeId>* nodes, bool with_beta) {
  if (!single_use(g, v)) return v;
  const NodeId mul = g.value(v).consumers[0];
  const Node& m = g.node(mul);
  if (m.op_type != "Mul" || !m.domain.empty()) return v;
  const ValueId other = m.inputs[0] == v ? m.inputs[1] : m.inputs[0];
  const Value& ov = g.value(other);
  if (!ov.shape || ov.shape->size() != 1) return v;
  *gamma = other;
  nodes->push_back(mul);
  ValueId out = m.outputs[0];
  if (!with_beta || !single_use(g, out)) return out;
  const NodeId add = g.value(out).consumers[0];
  const Node& a = g.node(add);
  if (a.op_type != "Add" || !a.domain.empty()) return out;
  const ValueId b = a.inputs[0] == out ? a.inputs[1] : a.inputs[0];
  if (!g.value(b).shape || g.value(b).shape->size() != 1) return out;
  *beta = b;
  nodes->push_back(add);
  return a.outputs[0];
}

Attribute float_attr(float f) {
  Attribute a;
  a.kind = Attribute::Kind::kFloat;
  a.f = f;
  return a;
}

}  // namespace

int fuse_layernorm(Graph& g) {
  int fused = 0;
  for (NodeId id : g.topo_order()) {
    const Node& div = g.node(id);
    if (!div.alive || div.op_type != "Div" || !div.domain.empty()) continue;
    const ValueId d = div.inputs[0];
    ValueId base = kNoValue;
    double eps = 0;
    std::vector<NodeId> nodes{id};
    if (!rms_of(g, div.inputs[1], &base, &eps, &nodes) || base != d || !single_use(g, div.inputs[1])) continue;
    const NodeId sub = producer(g, d, "Sub");
    if (sub < 0 || g.value(d).consumers.size() != 2) continue;  // Pow and Div
    const ValueId x = g.node(sub).inputs[0], mean = g.node(sub).inputs[1];
    const NodeId rm = producer(g, mean, "ReduceMean");
    if (rm < 0 || !single_use(g, mean) || !mean_over_last(g, g.node(rm)) || g.node(rm).inputs[0] != x) continue;
    nodes.insert(nodes.end(), {sub, rm});
    ValueId gamma = kNoValue, beta = kNoValue;
    const ValueId out = affine(g, div.outputs[0], &gamma, &beta, &nodes, true);
    if (gamma == kNoValue) continue;  // LayerNormalization needs a scale; a bare normalisation stays as it is
    for (NodeId n : nodes) g.remove_node(n);
    Node ln;
    ln.name = "LayerNorm_" + std::to_string(fused) + "_" + g.value(out).name;
    ln.op_type = "LayerNormalization";
    ln.inputs = {x, gamma};
    if (beta != kNoValue) ln.inputs.push_back(beta);
    ln.outputs = {out};
    ln.attrs["epsilon"] = float_attr(static_cast<float>(eps));
    Attribute axis;
    axis.i = -1;
    ln.attrs["axis"] = axis;
    g.add_node(std::move(ln));
    ++fused;
  }
  return fused;
}

int fuse_rmsnorm(Graph& g) {
  int fused = 0;
  for (NodeId id : g.topo_order()) {
    const Node& mul = g.node(id);
    if (!mul.alive || mul.op_type != "Mul" || !mul.domain.empty()) continue;
    for (int side = 0; side < 2; ++side) {
      const ValueId x = mul.inputs[static_cast<std::size_t>(side)], r = mul.inputs[static_cast<std::size_t>(1 - side)];
      if (!single_use(g, r)) continue;
      std::vector<NodeId> nodes{id};
      ValueId sqrt_out = kNoValue;
      if (const NodeId rec = producer(g, r, "Reciprocal"); rec >= 0) {
        sqrt_out = g.node(rec).inputs[0];
        nodes.push_back(rec);
      } else if (const NodeId dv = producer(g, r, "Div"); dv >= 0 && near(scalar_constant(g, g.node(dv).inputs[0]), 1.0)) {
        sqrt_out = g.node(dv).inputs[1];
        nodes.push_back(dv);
      } else {
        continue;
      }
      ValueId base = kNoValue;
      double eps = 0;
      if (!single_use(g, sqrt_out) || !rms_of(g, sqrt_out, &base, &eps, &nodes) || base != x) continue;
      ValueId weight = kNoValue, unused = kNoValue;
      const ValueId out = affine(g, mul.outputs[0], &weight, &unused, &nodes, false);
      if (weight == kNoValue) continue;
      for (NodeId n : nodes) g.remove_node(n);
      Node rn;
      rn.name = "RMSNorm_" + std::to_string(fused) + "_" + g.value(out).name;
      rn.op_type = "RMSNormalization";
      rn.domain = "npusim";
      rn.inputs = {x, weight};
      rn.outputs = {out};
      rn.attrs["epsilon"] = float_attr(static_cast<float>(eps));
      g.add_node(std::move(rn));
      ++fused;
      break;
    }
  }
  return fused;
}

// GELU, erf form: Mul(Mul(x, Add(Erf(Div(x, sqrt 2) | Mul(x, 1/sqrt 2)), 1)), 0.5) (the 0.5 on either Mul).
int fuse_gelu(Graph& g) {
  int fused = 0;
  for (NodeId id : g.topo_order()) {
    const Node& erf = g.node(id);
    if (!erf.alive || erf.op_type != "Erf" || !erf.domain.empty()) continue;
    const ValueId arg = erf.inputs[0];
    ValueId x = kNoValue;
    std::vector<NodeId> nodes{id};
    double c = 0;
    if (const NodeId dv = producer(g, arg, "Div"); dv >= 0 && near(scalar_constant(g, g.node(dv).inputs[1]), std::sqrt(2.0))) {
      x = g.node(dv).inputs[0];
      nodes.push_back(dv);
    } else if (const NodeId m = producer(g, arg, "Mul"); m >= 0) {
      x = other_than_scalar(g, g.node(m), &c);
      if (!near(c, 1.0 / std::sqrt(2.0))) continue;
      nodes.push_back(m);
    } else {
      continue;
    }
    if (!single_use(g, arg) || !single_use(g, erf.outputs[0])) continue;
    const NodeId add = g.value(erf.outputs[0]).consumers[0];
    if (g.node(add).op_type != "Add" || !near(scalar_constant(g, g.node(add).inputs[1]), 1.0)) continue;
    nodes.push_back(add);
    ValueId cur = g.node(add).outputs[0];
    bool half = false, times_x = false;
    for (int step = 0; step < 2 && single_use(g, cur); ++step) {  // Mul by x and Mul by 0.5, in either order
      const NodeId next = g.value(cur).consumers[0];
      const Node& n = g.node(next);
      if (n.op_type != "Mul" || !n.domain.empty()) break;
      const ValueId other = n.inputs[0] == cur ? n.inputs[1] : n.inputs[0];
      if (!times_x && other == x) times_x = true;
      else if (!half && near(scalar_constant(g, other), 0.5)) half = true;
      else break;
      nodes.push_back(next);
      cur = n.outputs[0];
    }
    if (!half || !times_x) continue;
    for (NodeId n : nodes) g.remove_node(n);
    Node ge;
    ge.name = "Gelu_" + std::to_string(fused) + "_" + g.value(cur).name;
    ge.op_type = "Gelu";
    ge.domain = "npusim";
    ge.inputs = {x};
    ge.outputs = {cur};
    g.add_node(std::move(ge));
    ++fused;
  }
  return fused;
}

}  // namespace npusim::stack::graph::passes
