// Softmax and LogSoftmax from their decomposed forms (ONNX's function bodies, hand-written ones):
//   e = Exp(Sub(x, ReduceMax(x, axis)))  or  e = Exp(x);   Div(e, ReduceSum(e, axis))   (keepdims)
// becomes Softmax(x, axis), and
//   s = Sub(x, ReduceMax(x, axis))  or  s = x;   Sub(s, Log(ReduceSum(Exp(s), axis)))
// becomes LogSoftmax(x, axis). Conditions: one axis, the same for both reductions, keepdims, the intermediate
// values used only inside the pattern (e by the ReduceSum and the Div; s by the Exp and the final Sub), float types.
#include "stack/graph/passes/match.hpp"
#include "stack/graph/passes/passes.hpp"

namespace npusim::stack::graph::passes {

namespace {

// The one reduction axis of a ReduceMax/ReduceSum with keepdims (axes as attribute, or as a constant input for
// ReduceSum from opset 13), normalised to [0, rank); -1 when it is not one constant axis.
std::int64_t one_axis(const Graph& g, const Node& n) {
  if (n.attr_int("keepdims", 1) != 1) return -1;
  std::vector<std::int64_t> axes;
  if (const Attribute* a = n.attr("axes")) axes = a->ints;
  else if (n.inputs.size() > 1 && n.inputs[1] != kNoValue && g.value(n.inputs[1]).constant) axes = g.value(n.inputs[1]).constant->as_ints();
  const Value& x = g.value(n.inputs[0]);
  if (axes.size() != 1 || !x.shape) return -1;
  const auto rank = static_cast<std::int64_t>(x.shape->size());
  const std::int64_t a = axes[0] < 0 ? axes[0] + rank : axes[0];
  return a >= 0 && a < rank ? a : -1;
}

// v = Sub(x, ReduceMax(x, axis)) with v used `uses` times (inside the pattern): x, with the two nodes added to
// `nodes`; else kNoValue (the pattern then starts at v).
ValueId minus_max(const Graph& g, ValueId v, std::int64_t axis, std::size_t uses, std::vector<NodeId>* nodes) {
  const NodeId sub = producer(g, v, "Sub");
  if (sub < 0 || g.value(v).consumers.size() != uses || std::find(g.outputs.begin(), g.outputs.end(), v) != g.outputs.end())
    return kNoValue;
  const ValueId mx = g.node(sub).inputs[1];
  const NodeId rm = producer(g, mx, "ReduceMax");
  if (rm < 0 || !single_use(g, mx) || g.node(rm).inputs[0] != g.node(sub).inputs[0] || one_axis(g, g.node(rm)) != axis) return kNoValue;
  nodes->insert(nodes->end(), {sub, rm});
  return g.node(sub).inputs[0];
}

// A node replacing the pattern: op_type(x) over `axis`, writing `out`.
void replace_with(Graph& g, const std::vector<NodeId>& nodes, const char* op_type, ValueId x, ValueId out, std::int64_t axis, int k) {
  for (NodeId n : nodes) g.remove_node(n);
  Node sm;
  sm.name = std::string(op_type) + "_" + std::to_string(k) + "_" + g.value(out).name;
  sm.op_type = op_type;
  sm.inputs = {x};
  sm.outputs = {out};
  sm.attrs["axis"] = Attribute::of_int(axis);
  g.add_node(std::move(sm));
}

// Before opset 13 a (Log)Softmax covers the flattened dims from its axis on: the same only on the last axis.
bool axis_means_the_same(const Graph& g, ValueId v, std::int64_t axis) {
  const auto rank = static_cast<std::int64_t>(g.value(v).shape ? g.value(v).shape->size() : 0);
  return !(g.opset && g.opset < 13 && axis != rank - 1);
}

}  // namespace

int fuse_softmax(Graph& g) {
  int fused = 0;
  for (NodeId id : g.topo_order()) {
    const Node& div = g.node(id);
    if (!div.alive || !well_formed(div) || div.op_type != "Div" || !div.domain.empty()) continue;
    const ValueId e = div.inputs[0], sum = div.inputs[1];
    const NodeId exp = producer(g, e, "Exp"), rs = producer(g, sum, "ReduceSum");
    if (exp < 0 || rs < 0 || g.node(rs).inputs[0] != e || !single_use(g, sum) || g.value(e).consumers.size() != 2) continue;
    if (std::find(g.outputs.begin(), g.outputs.end(), e) != g.outputs.end()) continue;
    const std::int64_t axis = one_axis(g, g.node(rs));
    if (axis < 0 || !axis_means_the_same(g, e, axis)) continue;
    std::vector<NodeId> nodes{id, exp, rs};
    ValueId x = g.node(exp).inputs[0];
    if (const ValueId base = minus_max(g, x, axis, 1, &nodes); base != kNoValue) x = base;
    if (!device_dtype(g.value(x).type)) continue;
    replace_with(g, nodes, "Softmax", x, div.outputs[0], axis, fused++);
  }
  return fused;
}

int fuse_log_softmax(Graph& g) {
  int fused = 0;
  for (NodeId id : g.topo_order()) {
    const Node& sub = g.node(id);
    if (!sub.alive || !well_formed(sub) || sub.op_type != "Sub" || !sub.domain.empty()) continue;
    const ValueId s = sub.inputs[0], lg = sub.inputs[1];
    const NodeId log = producer(g, lg, "Log");
    if (log < 0 || !single_use(g, lg)) continue;
    const ValueId sum = g.node(log).inputs[0];
    const NodeId rs = producer(g, sum, "ReduceSum");
    if (rs < 0 || !single_use(g, sum)) continue;
    const ValueId e = g.node(rs).inputs[0];
    const NodeId exp = producer(g, e, "Exp");
    if (exp < 0 || !single_use(g, e) || g.node(exp).inputs[0] != s) continue;
    const std::int64_t axis = one_axis(g, g.node(rs));
    if (axis < 0 || !axis_means_the_same(g, s, axis)) continue;
    std::vector<NodeId> nodes{id, log, rs, exp};
    ValueId x = s;
    if (const ValueId base = minus_max(g, s, axis, 2, &nodes); base != kNoValue) x = base;
    if (!device_dtype(g.value(x).type)) continue;
    replace_with(g, nodes, "LogSoftmax", x, sub.outputs[0], axis, fused++);
  }
  return fused;
}

}  // namespace npusim::stack::graph::passes
