// MatMul epilogues: MatMul(x, W) -> Add(bias) with a 1-D bias of N values becomes npusim.MatMulBias (the bias
// seeds the Cube's accumulator through the bias table); an npusim.Gelu or Relu consuming only that result folds
// into it as the activation (a vector epilogue on split chips, the FixPipe's ReLU for Relu). W must be 2-D
// (the weights of a linear layer).
#include "stack/graph/passes/match.hpp"
#include "stack/graph/passes/passes.hpp"

namespace npusim::stack::graph::passes {

int fuse_matmul_epilogue(Graph& g) {
  int fused = 0;
  for (NodeId id : g.topo_order()) {
    const Node& mm = g.node(id);
    if (!mm.alive || !well_formed(mm) || mm.op_type != "MatMul" || !mm.domain.empty()) continue;
    const Value& w = g.value(mm.inputs[1]);
    if (!w.shape || w.shape->size() != 2 || !(*w.shape)[1].known()) continue;
    const std::int64_t n = (*w.shape)[1].value;
    const ValueId y = mm.outputs[0];
    if (!single_use(g, y)) continue;
    const NodeId add = g.value(y).consumers[0];
    const Node& a = g.node(add);
    if (a.op_type != "Add" || !a.domain.empty() || !well_formed(a)) continue;
    const ValueId bias = a.inputs[0] == y ? a.inputs[1] : a.inputs[0];
    const Value& b = g.value(bias);
    if (!b.shape || b.shape->size() != 1 || !(*b.shape)[0].known() || (*b.shape)[0].value != n) continue;
    std::vector<NodeId> removed{id, add};
    ValueId out = a.outputs[0];
    std::string act = "none";
    if (single_use(g, out)) {
      const Node& next = g.node(g.value(out).consumers[0]);
      const bool gelu = next.op_type == "Gelu" && next.domain == "npusim";
      const bool relu = next.op_type == "Relu" && next.domain.empty();
      if (gelu || relu) {
        const Attribute* approx = next.attr("approximate");
        act = !gelu ? "relu" : approx && approx->s == "tanh" ? "gelu_tanh" : "gelu";
        removed.push_back(g.value(out).consumers[0]);
        out = next.outputs[0];
      }
    }
    const ValueId x = mm.inputs[0], wt = mm.inputs[1];
    const std::string name = "MatMulBias_" + mm.name;
    for (NodeId r : removed) g.remove_node(r);
    Node f;
    f.name = name;
    f.op_type = "MatMulBias";
    f.domain = "npusim";
    f.inputs = {x, wt, bias};
    f.outputs = {out};
    f.attrs["act"] = Attribute::of_string(act);
    g.add_node(std::move(f));
    ++fused;
  }
  return fused;
}

}  // namespace npusim::stack::graph::passes
