// Constant folding: a node whose inputs are all constants is evaluated on the host and its outputs become
// constants; Shape and Size fold from static shapes alone. Frameworks export the arithmetic of shapes and masks as
// nodes (Shape -> Gather -> Concat -> Reshape, ConstantOfShape -> Equal -> Where -> Expand, triangular masks), and
// none of it belongs on the device. Nodes left without a use are removed afterwards (dead-code elimination).
// Results above kMaxFoldElements stay nodes (an Expand to a [B, N, S, S] mask would only cost host memory). Each
// op's fold rule is in the op table (stack/graph/onnx_ops/).
#include <algorithm>
#include <map>

#include "stack/graph/onnx_ops/op_table.hpp"
#include "stack/graph/passes/passes.hpp"

namespace npusim::stack::graph::passes {

namespace {

using onnx_ops::HostArray;
using onnx_ops::kMaxFoldElements;
using onnx_ops::NoFold;

// The host values of the constants folding has seen or made, converted once.
class Constants {
 public:
  explicit Constants(const Graph& g) : g_(g) {}
  const HostArray& of(ValueId v) {
    if (const auto it = cache_.find(v); it != cache_.end()) return it->second;
    const Value& val = g_.value(v);
    if (!val.constant || val.constant->elements() > kMaxFoldElements) throw NoFold{};  // weights are not expanded
    return cache_[v] = onnx_ops::from_tensor(*val.constant);
  }
  void remember(ValueId v, HostArray a) { cache_[v] = std::move(a); }

 private:
  const Graph& g_;
  std::map<ValueId, HostArray> cache_;
};

// The node's outputs by its op's fold rule, or NoFold.
std::vector<HostArray> evaluate(const Graph& g, const Node& n, Constants& constants) {
  const onnx_ops::OpInfo* op = onnx_ops::find_op(n);
  if (!n.domain.empty() || !op || !op->fold) throw NoFold{};
  onnx_ops::FoldArgs args{g, n, {}};
  if (op->fold_reads_constants) {
    for (ValueId v : n.inputs) args.in.push_back(v == kNoValue ? nullptr : &constants.of(v));
    args.need(0);
  }
  return op->fold(args);
}

}  // namespace

int fold_constants(Graph& g) {
  int folded = 0;
  Constants constants(g);
  for (NodeId id : g.topo_order()) {
    const Node& n = g.node(id);
    std::vector<HostArray> out;
    try {
      out = evaluate(g, n, constants);
    } catch (const NoFold&) {
      continue;
    } catch (const std::exception&) {  // a malformed node (an axis out of range...): left for the lowering to report
      continue;
    }
    if (out.size() != n.outputs.size() ||
        std::any_of(out.begin(), out.end(), [](const HostArray& a) { return a.size() > kMaxFoldElements; }))
      continue;
    std::vector<Tensor> tensors;
    try {
      for (const HostArray& a : out) tensors.push_back(onnx_ops::to_tensor(a));
    } catch (const NoFold&) {
      continue;
    }
    const std::vector<ValueId> outs = n.outputs;
    g.remove_node(id);
    for (std::size_t k = 0; k < outs.size(); ++k) {
      Value& v = g.value(outs[k]);
      Dims dims;
      for (auto d : tensors[k].shape) dims.push_back(Dim::of(d));
      v.shape = dims;
      v.type = tensors[k].type;
      v.constant = std::move(tensors[k]);
      constants.remember(outs[k], out[k]);
    }
    ++folded;
  }
  g.forget_removed();  // folded nodes are constants now, not part of what a later node fuses
  return folded;
}

int remove_dead_nodes(Graph& g) {
  int removed = 0;
  for (bool again = true; again;) {
    again = false;
    std::vector<NodeId> order = g.topo_order();
    for (auto it = order.rbegin(); it != order.rend(); ++it) {
      const Node& n = g.node(*it);
      const bool used = std::any_of(n.outputs.begin(), n.outputs.end(), [&](ValueId v) {
        return v != kNoValue && (!g.value(v).consumers.empty() || std::find(g.outputs.begin(), g.outputs.end(), v) != g.outputs.end());
      });
      if (used) continue;
      g.remove_node(*it);
      ++removed;
      again = true;
    }
  }
  g.forget_removed();
  return removed;
}

}  // namespace npusim::stack::graph::passes

namespace npusim::stack::graph::passes {

int remove_identities(Graph& g) {
  int removed = 0;
  for (NodeId id : g.topo_order()) {
    const Node& n = g.node(id);
    if (!n.domain.empty() || n.inputs.empty() || n.outputs.size() != 1 || n.inputs[0] == kNoValue) continue;
    const ValueId in = n.inputs[0], out = n.outputs[0];
    const bool same_cast = n.op_type == "Cast" && g.value(in).type != ElemType::kUndefined && g.value(in).type == g.value(out).type;
    if (n.op_type != "Identity" && !same_cast) continue;
    if (std::find(g.outputs.begin(), g.outputs.end(), out) != g.outputs.end()) continue;
    g.remove_node(id);
    g.replace_uses(out, in);
    ++removed;
  }
  g.forget_removed();
  return removed;
}

}  // namespace npusim::stack::graph::passes
