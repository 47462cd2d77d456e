// Add + LayerNorm: LayerNormalization(Add(a, b)) with a and b of the same shape (a residual connection) becomes
// npusim.AddLayerNorm(a, b, gamma[, beta]): one kernel reads both, normalises their sum and, when the sum has
// other uses (the next residual of a pre-LN block) or is a graph output, writes it as a second output.
// Conditions: no broadcast in the Add, float types, the LayerNormalization's Mean/InvStdDev outputs unused.
#include "stack/graph/passes/match.hpp"
#include "stack/graph/passes/passes.hpp"
#include "stack/graph/passes/views.hpp"

namespace npusim::stack::graph::passes {

int fuse_add_layernorm(Graph& g) {
  int fused = 0;
  for (NodeId id : g.topo_order()) {
    const Node& ln = g.node(id);
    if (!ln.alive || !well_formed(ln) || ln.op_type != "LayerNormalization" || !ln.domain.empty()) continue;
    bool stats = false;
    for (std::size_t k = 1; k < ln.outputs.size(); ++k)
      if (ln.outputs[k] != kNoValue && (!g.value(ln.outputs[k]).consumers.empty() ||
                                        std::find(g.outputs.begin(), g.outputs.end(), ln.outputs[k]) != g.outputs.end()))
        stats = true;
    const ValueId sum = ln.inputs[0];
    const NodeId add = producer(g, sum, "Add");
    if (stats || add < 0) continue;
    const ValueId a = g.node(add).inputs[0], b = g.node(add).inputs[1];
    const auto sa = static_shape(g.value(a)), sb = static_shape(g.value(b)), ss = static_shape(g.value(sum));
    if (!sa || !sb || !ss || *sa != *ss || *sb != *ss || !device_dtype(g.value(sum).type)) continue;
    const bool keep_sum = !single_use(g, sum);
    Node f;
    f.name = "AddLayerNorm_" + ln.name;
    f.op_type = "AddLayerNorm";
    f.domain = "npusim";
    f.inputs = {a, b};
    f.inputs.insert(f.inputs.end(), ln.inputs.begin() + 1, ln.inputs.end());
    f.outputs = {ln.outputs[0]};
    if (keep_sum) f.outputs.push_back(sum);
    f.attrs = ln.attrs;
    g.remove_node(id);
    g.remove_node(add);
    g.add_node(std::move(f));
    ++fused;
  }
  remove_dead_nodes(g);
  return fused;
}

}  // namespace npusim::stack::graph::passes
