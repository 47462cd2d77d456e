#include "stack/graph/lower.hpp"

#include <algorithm>

#include "stack/graph/layouts.hpp"
#include "stack/graph/onnx_ops/lowerer.hpp"
#include "stack/graph/onnx_ops/op_table.hpp"

namespace npusim::stack::graph {

const std::vector<std::string>& supported_op_types() {
  static const std::vector<std::string> types = onnx_ops::lowered_op_types();
  return types;
}

namespace {

// Steps none of whose outputs is read (by a later step, through a view, or as a graph output) are dropped: the
// widening casts of Cube results that only went back to the Cube.
void drop_unread_steps(Program& p) {
  auto base = [&](int x) {
    return p.tensors[static_cast<std::size_t>(x)].alias >= 0 ? p.tensors[static_cast<std::size_t>(x)].alias : x;
  };
  for (bool again = true; again;) {
    again = false;
    std::vector<bool> read(p.tensors.size(), false);
    for (int o : p.outputs) read[static_cast<std::size_t>(base(o))] = true;
    for (const Step& st : p.steps)
      for (int i : st.inputs) read[static_cast<std::size_t>(base(i))] = true;
    for (std::size_t k = p.steps.size(); k-- > 0;) {
      const Step& st = p.steps[k];
      if (std::any_of(st.outputs.begin(), st.outputs.end(),
                      [&](int o) { return read[static_cast<std::size_t>(base(o))]; }))
        continue;
      p.steps.erase(p.steps.begin() + static_cast<std::ptrdiff_t>(k));
      again = true;
    }
  }
}

// The node's op from the table, its inputs and output checked against the op's arity, then its lowering rule.
void lower_node(onnx_ops::Lowerer& l, const Node& n) {
  const onnx_ops::OpInfo* op = onnx_ops::find_op(n);
  if (!op || !op->lower) {
    if (!n.domain.empty() && n.domain != "npusim" && n.domain != "ai.onnx")
      l.fail(n, "domain '" + n.domain + "' is not supported");
    l.fail(n, "not supported");
  }
  for (std::size_t i = 0; i < op->min_inputs; ++i)
    if (i >= n.inputs.size() || n.inputs[i] == kNoValue) l.fail(n, "input " + std::to_string(i) + " is missing");
  if (n.inputs.size() > op->max_inputs)
    l.fail(n, std::to_string(n.inputs.size()) + " inputs, but " + op->key() + " takes at most " +
                  std::to_string(op->max_inputs));
  if (n.outputs.empty() || n.outputs[0] == kNoValue) l.fail(n, "has no output");
  // Empty tensors (a dim of 0): a node whose outputs are all empty computes nothing, and no kernel takes one.
  const Graph& g = l.graph();
  auto empty = [&](ValueId v) {
    const Value& val = g.value(v);
    return val.shape && std::any_of(val.shape->begin(), val.shape->end(), [](const Dim& d) { return d.value == 0; });
  };
  if (std::all_of(n.outputs.begin(), n.outputs.end(), [&](ValueId o) { return o == kNoValue || empty(o); })) {
    for (ValueId o : n.outputs)
      if (o != kNoValue) l.tensor(o, "node '" + n.name + "'");
    return;
  }
  for (ValueId in : n.inputs)  // data, not constants (an empty axes list, Resize's empty roi)
    if (in != kNoValue && empty(in) && !g.value(in).constant)
      l.fail(n, "input '" + g.value(in).name + "' is empty (a dim of 0) and the output is not");
  op->lower(l, n);
}

}  // namespace

Program lower(const Graph& g) {
  onnx_ops::Lowerer l(g);
  Program& p = l.program();
  for (ValueId in : g.inputs) p.inputs.push_back(l.tensor(in, "graph input"));
  for (NodeId id : g.topo_order()) lower_node(l, g.node(id));
  for (ValueId out : g.outputs) p.outputs.push_back(l.tensor(out, "graph output"));
  propagate_nc1hwc0(p);
  drop_unread_steps(p);
  return std::move(p);
}

}  // namespace npusim::stack::graph
