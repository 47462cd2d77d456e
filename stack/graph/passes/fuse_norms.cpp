// LayerNorm, RMSNorm and GELU from their decomposed forms, as frameworks export hand-written layers and as ONNX
// expands its functions:
//   LayerNorm: dev = Sub(x, mean), mean = ReduceMean(x); Div(dev, Sqrt(Add(var, eps))) with
//              var = ReduceMean(Pow(dev, 2))                          (PyTorch's hand-written form), or
//              var = Sub(ReduceMean(Pow(x, 2)), Pow(mean, 2))           (ONNX's LayerNormalization function body);
//              squares as Pow(v, 2) or Mul(v, v); then Mul by gamma [-> Add beta] -> LayerNormalization (axis -1).
//              The mean and 1/std may have uses outside the pattern (the function body's Mean and InvStdDev
//              outputs, the latter as Reciprocal(std)): they become the fused node's Mean and InvStdDev outputs.
//   RMSNorm:   Mul(x, R) with R = Div(1, Sqrt(Add(ReduceMean(Pow(x, 2)), eps))) or Reciprocal(Sqrt(...))
//              [-> Mul(weight)] -> npusim.RMSNormalization.
//   GELU:      t = Add(Erf(x / sqrt 2), 1)  or  Add(Tanh(sqrt(2/pi) (x + 0.044715 x^3)), 1), then t x 0.5 in any
//              association (Mul(Mul(x, t), 0.5), Mul(Mul(x, 0.5), t), ...) -> npusim.Gelu (approximate none|tanh).
// Reductions must be over the last axis with keepdims; eps and exponents constants; every removed intermediate used
// only inside the pattern.
#include <cmath>

#include "stack/graph/passes/match.hpp"
#include "stack/graph/passes/passes.hpp"

namespace npusim::stack::graph::passes {

namespace {

// v * v as Pow(v, 2) or Mul(v, v): v and the node.
bool square_of(const Graph& g, ValueId sq, ValueId* v, NodeId* node) {
  if (const NodeId p = producer(g, sq, "Pow"); p >= 0 && near(scalar_constant(g, g.node(p).inputs[1]), 2.0)) {
    *v = g.node(p).inputs[0];
    *node = p;
    return true;
  }
  if (const NodeId m = producer(g, sq, "Mul"); m >= 0 && g.node(m).inputs[0] == g.node(m).inputs[1]) {
    *v = g.node(m).inputs[0];
    *node = m;
    return true;
  }
  return false;
}

// ReduceMean(Pow(base, 2)) over the last axis: the base, collecting the nodes.
bool mean_square(const Graph& g, ValueId mean, ValueId* base, std::vector<NodeId>* nodes) {
  const NodeId rm = producer(g, mean, "ReduceMean");
  if (rm < 0 || !single_use(g, mean) || !mean_over_last(g, g.node(rm))) return false;
  const ValueId sq = g.node(rm).inputs[0];
  NodeId sn = -1;
  if (!single_use(g, sq) || !square_of(g, sq, base, &sn)) return false;
  nodes->insert(nodes->end(), {rm, sn});
  return true;
}

// Sqrt(Add(var, eps)): var and eps.
bool sqrt_plus_eps(const Graph& g, ValueId sqrt_out, ValueId* var, double* eps, std::vector<NodeId>* nodes) {
  const NodeId sq = producer(g, sqrt_out, "Sqrt");
  if (sq < 0) return false;
  const ValueId sum = g.node(sq).inputs[0];
  const NodeId add = producer(g, sum, "Add");
  if (add < 0 || !single_use(g, sum)) return false;
  *var = other_than_scalar(g, g.node(add), eps);
  if (*var == kNoValue) return false;
  nodes->insert(nodes->end(), {sq, add});
  return true;
}

// A per-channel parameter of a row of n values: shape [n] or [1, ..., 1, n].
bool row_param(const Graph& g, ValueId v, std::int64_t n) {
  const Value& p = g.value(v);
  if (!p.shape || p.shape->empty() || !p.shape->back().known() || p.shape->back().value != n) return false;
  for (std::size_t k = 0; k + 1 < p.shape->size(); ++k)
    if (!(*p.shape)[k].known() || (*p.shape)[k].value != 1) return false;
  return true;
}

// The affine tail: Mul by a row parameter `gamma` (either side), then optionally Add `beta`.
ValueId affine(const Graph& g, ValueId v, std::int64_t n, ValueId* gamma, ValueId* beta, std::vector<NodeId>* nodes, bool with_beta) {
  if (!single_use(g, v)) return v;
  const NodeId mul = g.value(v).consumers[0];
  const Node& m = g.node(mul);
  if (m.op_type != "Mul" || !m.domain.empty() || !well_formed(m)) return v;
  const ValueId other = m.inputs[0] == v ? m.inputs[1] : m.inputs[0];
  if (!row_param(g, other, n)) return v;
  *gamma = other;
  nodes->push_back(mul);
  ValueId out = m.outputs[0];
  if (!with_beta || !single_use(g, out)) return out;
  const NodeId add = g.value(out).consumers[0];
  const Node& a = g.node(add);
  if (a.op_type != "Add" || !a.domain.empty() || !well_formed(a)) return out;
  const ValueId b = a.inputs[0] == out ? a.inputs[1] : a.inputs[0];
  if (!row_param(g, b, n)) return out;
  *beta = b;
  nodes->push_back(add);
  return a.outputs[0];
}

std::int64_t last_dim(const Graph& g, ValueId v) {
  const Value& x = g.value(v);
  if (!x.shape || x.shape->empty() || !x.shape->back().known()) return -1;
  return x.shape->back().value;
}

// Uses of v by nodes outside `nodes` (one entry per use).
std::vector<NodeId> outside_uses(const Graph& g, ValueId v, const std::vector<NodeId>& nodes) {
  std::vector<NodeId> out;
  for (NodeId c : g.value(v).consumers)
    if (std::find(nodes.begin(), nodes.end(), c) == nodes.end()) out.push_back(c);
  return out;
}

bool graph_output(const Graph& g, ValueId v) { return std::find(g.outputs.begin(), g.outputs.end(), v) != g.outputs.end(); }

// After t = Add(core, 1): the product t * x * 0.5 in any association, or kNoValue.
ValueId times_half_x(const Graph& g, ValueId t, ValueId x, std::vector<NodeId>* nodes) {
  bool half = false, has_x = false;
  ValueId cur = t;
  while (!(half && has_x)) {
    if (!single_use(g, cur)) return kNoValue;
    const NodeId m = g.value(cur).consumers[0];
    const Node& n = g.node(m);
    if (n.op_type != "Mul" || !n.domain.empty() || !well_formed(n)) return kNoValue;
    const ValueId other = n.inputs[0] == cur ? n.inputs[1] : n.inputs[0];
    double c = 0;
    if (!has_x && other == x) {
      has_x = true;
    } else if (!half && near(scalar_constant(g, other), 0.5)) {
      half = true;
    } else if (const NodeId hm = producer(g, other, "Mul");
               !half && !has_x && hm >= 0 && single_use(g, other) && other_than_scalar(g, g.node(hm), &c) == x && near(c, 0.5)) {
      nodes->push_back(hm);  // x * 0.5 computed on its own
      half = has_x = true;
    } else {
      return kNoValue;
    }
    nodes->push_back(m);
    cur = n.outputs[0];
  }
  return cur;
}

// x^3 as Pow(x, 3) or Mul(Mul(x, x), x) (either side): x.
ValueId cube_of(const Graph& g, ValueId v, std::vector<NodeId>* nodes) {
  if (const NodeId p = producer(g, v, "Pow"); p >= 0 && single_use(g, v) && near(scalar_constant(g, g.node(p).inputs[1]), 3.0)) {
    nodes->push_back(p);
    return g.node(p).inputs[0];
  }
  const NodeId m = producer(g, v, "Mul");
  if (m < 0 || !single_use(g, v)) return kNoValue;
  for (int side = 0; side < 2; ++side) {
    const ValueId sq = g.node(m).inputs[static_cast<std::size_t>(side)], x = g.node(m).inputs[static_cast<std::size_t>(1 - side)];
    const NodeId s = producer(g, sq, "Mul");
    if (s >= 0 && single_use(g, sq) && g.node(s).inputs[0] == x && g.node(s).inputs[1] == x) {
      nodes->insert(nodes->end(), {m, s});
      return x;
    }
  }
  return kNoValue;
}

}  // namespace

int fuse_layernorm(Graph& g) {
  int fused = 0;
  for (NodeId id : g.topo_order()) {
    const Node& div = g.node(id);
    if (!div.alive || !well_formed(div) || div.op_type != "Div" || !div.domain.empty()) continue;
    const ValueId dev = div.inputs[0], std_v = div.inputs[1];
    std::vector<NodeId> nodes{id};
    ValueId var = kNoValue;
    double eps = 0;
    if (!sqrt_plus_eps(g, std_v, &var, &eps, &nodes)) continue;
    const NodeId sub = producer(g, dev, "Sub");
    if (sub < 0) continue;
    const ValueId x = g.node(sub).inputs[0], mean = g.node(sub).inputs[1];
    const NodeId rm = producer(g, mean, "ReduceMean");
    if (rm < 0 || !mean_over_last(g, g.node(rm)) || g.node(rm).inputs[0] != x) continue;
    nodes.insert(nodes.end(), {sub, rm});
    // The variance: E[(x - mean)^2], or E[x^2] - mean^2.
    ValueId base = kNoValue;
    if (mean_square(g, var, &base, &nodes) && base == dev) {
      if (!outside_uses(g, dev, nodes).empty()) continue;  // the square and the Div only
    } else if (const NodeId vs = producer(g, var, "Sub"); vs >= 0 && single_use(g, var)) {
      ValueId m2 = kNoValue;
      NodeId sq = -1;
      const ValueId msq = g.node(vs).inputs[0], sqm = g.node(vs).inputs[1];
      if (!mean_square(g, msq, &base, &nodes) || base != x || !single_use(g, sqm) || !square_of(g, sqm, &m2, &sq) || m2 != mean) continue;
      nodes.insert(nodes.end(), {vs, sq});
      if (!single_use(g, dev)) continue;
    } else {
      continue;
    }
    const std::int64_t n = last_dim(g, x);
    ValueId gamma = kNoValue, beta = kNoValue;
    const ValueId out = affine(g, div.outputs[0], n, &gamma, &beta, &nodes, true);
    if (gamma == kNoValue || n <= 0) continue;  // LayerNormalization needs a scale; a bare normalisation stays
    // The mean and 1/std outside the pattern: the Mean output, and InvStdDev through a Reciprocal of std.
    const std::vector<NodeId> mean_out = outside_uses(g, mean, nodes);
    ValueId rstd = kNoValue;
    bool ok = true;
    for (NodeId c : outside_uses(g, std_v, nodes)) {
      const Node& r = g.node(c);
      if (r.op_type != "Reciprocal" || !r.domain.empty() || rstd != kNoValue) ok = false;
      else {
        rstd = r.outputs[0];
        nodes.push_back(c);
      }
    }
    if (!ok || graph_output(g, std_v) || graph_output(g, dev) || graph_output(g, var)) continue;
    const bool mean_used = !mean_out.empty() || graph_output(g, mean);
    if ((mean_used || rstd != kNoValue) && g.value(x).type != ElemType::kFloat32) continue;  // stats are fp32 here
    for (NodeId r : nodes) g.remove_node(r);  // with the mean's ReduceMean: a used mean is the fused node's output
    Node ln;
    ln.name = "LayerNorm_" + std::to_string(fused) + "_" + g.value(out).name;
    ln.op_type = "LayerNormalization";
    ln.inputs = {x, gamma};
    if (beta != kNoValue) ln.inputs.push_back(beta);
    ln.outputs = {out};
    if (mean_used) ln.outputs.push_back(mean);
    if (rstd != kNoValue) {  // InvStdDev is the third output: an unused Mean still takes the second place
      if (!mean_used) ln.outputs.push_back(g.add_value(g.value(out).name + "/mean", ElemType::kFloat32, g.value(mean).shape));
      ln.outputs.push_back(rstd);
    }
    ln.attrs["epsilon"] = Attribute::of_float(static_cast<float>(eps));
    ln.attrs["axis"] = Attribute::of_int(-1);
    g.add_node(std::move(ln));
    remove_dead_nodes(g);
    ++fused;
  }
  return fused;
}

int fuse_rmsnorm(Graph& g) {
  int fused = 0;
  for (NodeId id : g.topo_order()) {
    const Node& mul = g.node(id);
    if (!mul.alive || !well_formed(mul) || mul.op_type != "Mul" || !mul.domain.empty()) continue;
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
      ValueId var = kNoValue, base = kNoValue;
      double eps = 0;
      if (!single_use(g, sqrt_out) || !sqrt_plus_eps(g, sqrt_out, &var, &eps, &nodes) || !mean_square(g, var, &base, &nodes) || base != x)
        continue;
      ValueId weight = kNoValue, unused = kNoValue;
      const ValueId out = affine(g, mul.outputs[0], last_dim(g, x), &weight, &unused, &nodes, false);
      if (weight == kNoValue) continue;
      for (NodeId n : nodes) g.remove_node(n);
      Node rn;
      rn.name = "RMSNorm_" + std::to_string(fused) + "_" + g.value(out).name;
      rn.op_type = "RMSNormalization";
      rn.domain = "npusim";
      rn.inputs = {x, weight};
      rn.outputs = {out};
      rn.attrs["epsilon"] = Attribute::of_float(static_cast<float>(eps));
      g.add_node(std::move(rn));
      ++fused;
      break;
    }
  }
  return fused;
}

int fuse_gelu(Graph& g) {
  int fused = 0;
  for (NodeId id : g.topo_order()) {
    const Node& core = g.node(id);
    if (!core.alive || !well_formed(core) || !core.domain.empty() || (core.op_type != "Erf" && core.op_type != "Tanh")) continue;
    const bool tanh = core.op_type == "Tanh";
    const ValueId arg = core.inputs[0];
    if (!single_use(g, arg) || !single_use(g, core.outputs[0])) continue;
    ValueId x = kNoValue;
    std::vector<NodeId> nodes{id};
    double c = 0;
    if (!tanh) {  // erf(x / sqrt 2) or erf(x * (1 / sqrt 2))
      if (const NodeId dv = producer(g, arg, "Div"); dv >= 0 && near(scalar_constant(g, g.node(dv).inputs[1]), std::sqrt(2.0))) {
        x = g.node(dv).inputs[0];
        nodes.push_back(dv);
      } else if (const NodeId m = producer(g, arg, "Mul"); m >= 0 && (x = other_than_scalar(g, g.node(m), &c)) != kNoValue &&
                                                             near(c, 1.0 / std::sqrt(2.0))) {
        nodes.push_back(m);
      } else {
        continue;
      }
    } else {  // tanh(sqrt(2/pi) * (x + 0.044715 x^3))
      const NodeId m = producer(g, arg, "Mul");
      if (m < 0) continue;
      const ValueId inner = other_than_scalar(g, g.node(m), &c);
      const NodeId add = producer(g, inner, "Add");
      if (inner == kNoValue || !near(c, std::sqrt(2.0 / M_PI)) || add < 0 || !single_use(g, inner)) continue;
      nodes.insert(nodes.end(), {m, add});
      bool matched = false;
      for (int side = 0; side < 2 && !matched; ++side) {
        const ValueId xv = g.node(add).inputs[static_cast<std::size_t>(side)], cubic = g.node(add).inputs[static_cast<std::size_t>(1 - side)];
        const NodeId cm = producer(g, cubic, "Mul");
        if (cm < 0 || !single_use(g, cubic)) continue;
        double k = 0;
        const ValueId cube = other_than_scalar(g, g.node(cm), &k);
        std::vector<NodeId> more{cm};
        if (cube == kNoValue || !near(k, 0.044715) || cube_of(g, cube, &more) != xv) continue;
        nodes.insert(nodes.end(), more.begin(), more.end());
        x = xv;
        matched = true;
      }
      if (!matched) continue;
    }
    const NodeId add1 = g.value(core.outputs[0]).consumers[0];
    if (g.node(add1).op_type != "Add" || !g.node(add1).domain.empty() || !well_formed(g.node(add1)) ||
        other_than_scalar(g, g.node(add1), &c) != core.outputs[0] || !near(c, 1.0))
      continue;
    nodes.push_back(add1);
    const ValueId out = times_half_x(g, g.node(add1).outputs[0], x, &nodes);
    if (out == kNoValue) continue;
    for (NodeId n : nodes) g.remove_node(n);
    Node ge;
    ge.name = "Gelu_" + std::to_string(fused) + "_" + g.value(out).name;
    ge.op_type = "Gelu";
    ge.domain = "npusim";
    ge.inputs = {x};
    ge.outputs = {out};
    ge.attrs["approximate"] = Attribute::of_string(tanh ? "tanh" : "none");
    g.add_node(std::move(ge));
    ++fused;
  }
  return fused;
}

}  // namespace npusim::stack::graph::passes
