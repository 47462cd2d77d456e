// Or(Greater(a, b), Equal(a, b)) -> GreaterOrEqual(a, b), and Less / LessOrEqual likewise: the form opset 12's
// GreaterOrEqual and LessOrEqual are defined by (their ONNX function bodies), one comparison kernel instead of three.
#include "stack/graph/passes/match.hpp"
#include "stack/graph/passes/passes.hpp"

namespace npusim::stack::graph::passes {

int fuse_compare(Graph& g) {
  int fused = 0;
  for (NodeId id : g.topo_order()) {
    const Node& o = g.node(id);
    if (!o.alive || o.op_type != "Or" || !o.domain.empty() || !well_formed(o)) continue;
    for (const char* strict : {"Greater", "Less"}) {
      NodeId cmp = producer(g, o.inputs[0], strict), eq = producer(g, o.inputs[1], "Equal");
      if (cmp < 0 || eq < 0) {  // the operands either way round
        cmp = producer(g, o.inputs[1], strict);
        eq = producer(g, o.inputs[0], "Equal");
      }
      if (cmp < 0 || eq < 0) continue;
      const Node &c = g.node(cmp), &e = g.node(eq);
      if (!single_use(g, c.outputs[0]) || !single_use(g, e.outputs[0])) continue;
      const bool same = e.inputs == c.inputs || (e.inputs[0] == c.inputs[1] && e.inputs[1] == c.inputs[0]);
      if (!same) continue;
      Node n;
      n.name = o.name;
      n.op_type = std::string(strict) + "OrEqual";
      n.inputs = c.inputs;
      n.outputs = o.outputs;
      g.remove_node(id);
      g.remove_node(cmp);
      g.remove_node(eq);
      g.add_node(std::move(n));
      ++fused;
      break;
    }
  }
  return fused;
}

}  // namespace npusim::stack::graph::passes
