// Softmax from its decomposed form (ONNX's Softmax function body, hand-written softmax):
//   e = Exp(Sub(x, ReduceMax(x, axis)))  or  e = Exp(x);   Div(e, ReduceSum(e, axis))   (keepdims)
// becomes Softmax(x, axis). Conditions: one axis, the same for both reductions, keepdims, e used by the ReduceSum
// and the Div only, the max and the sum single-use.
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
    if (axis < 0) continue;
    // Before opset 13 a Softmax covers the flattened dims from its axis on: the same only on the last axis.
    const auto rank = static_cast<std::int64_t>(g.value(e).shape ? g.value(e).shape->size() : 0);
    if (g.opset && g.opset < 13 && axis != rank - 1) continue;
    std::vector<NodeId> nodes{id, exp, rs};
    ValueId x = g.node(exp).inputs[0];
    if (const NodeId sub = producer(g, x, "Sub"); sub >= 0 && single_use(g, x)) {
      const ValueId mx = g.node(sub).inputs[1];
      const NodeId rm = producer(g, mx, "ReduceMax");
      if (rm < 0 || !single_use(g, mx) || g.node(rm).inputs[0] != g.node(sub).inputs[0] || one_axis(g, g.node(rm)) != axis) continue;
      nodes.insert(nodes.end(), {sub, rm});
      x = g.node(sub).inputs[0];
    }
    if (!device_dtype(g.value(x).type)) continue;
    const ValueId out = div.outputs[0];
    for (NodeId n : nodes) g.remove_node(n);
    Node sm;
    sm.name = "Softmax_" + std::to_string(fused) + "_" + g.value(out).name;
    sm.op_type = "Softmax";
    sm.inputs = {x};
    sm.outputs = {out};
    sm.attrs["axis"] = Attribute::of_int(axis);
    g.add_node(std::move(sm));
    ++fused;
  }
  return fused;
}

}  // namespace npusim::stack::graph::passes
