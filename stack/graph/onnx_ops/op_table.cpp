#include "stack/graph/onnx_ops/op_table.hpp"

#include <cstdio>
#include <map>
#include <sstream>

namespace npusim::stack::graph::onnx_ops {

namespace {

std::vector<OpInfo> build_table() {
  std::vector<OpInfo> t;
  add_shape_ops(t);
  add_data_movement(t);
  add_elementwise(t);
  add_activations(t);
  add_row_ops(t);
  add_cube_ops(t);
  add_conv_ops(t);
  add_fused_vector_ops(t);
  return t;
}

const std::map<std::string, const OpInfo*>& index() {
  static const std::map<std::string, const OpInfo*> by_key = [] {
    std::map<std::string, const OpInfo*> m;
    for (const OpInfo& op : op_table()) m.emplace(op.key(), &op);
    return m;
  }();
  return by_key;
}

std::string inputs_text(const OpInfo& op) {
  if (op.min_inputs == op.max_inputs) return std::to_string(op.min_inputs);
  if (op.max_inputs == kVariadic) return std::to_string(op.min_inputs) + "+";
  return std::to_string(op.min_inputs) + "-" + std::to_string(op.max_inputs);
}

std::string attributes_text(const OpInfo& op) {
  std::string s;
  for (const auto& a : op.attributes) s += (s.empty() ? "`" : ", `") + a + "`";
  return s;
}

}  // namespace

std::string num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.9g", v);
  return buf;
}

const std::vector<OpInfo>& op_table() {
  static const std::vector<OpInfo> table = build_table();
  return table;
}

const OpInfo* find_op(const std::string& domain, const std::string& type) {
  const std::string d = domain == "ai.onnx" ? "" : domain;
  const auto it = index().find(d.empty() ? type : d + "." + type);
  return it == index().end() ? nullptr : it->second;
}

const OpInfo* find_op(const Node& n) {
  return find_op(n.domain, n.op_type);
}

bool well_formed(const Node& n) {
  const OpInfo* op = find_op(n);
  const std::size_t k = op ? op->min_inputs : 1;
  if (n.inputs.size() < k || n.outputs.empty() || n.outputs[0] == kNoValue) return false;
  for (std::size_t i = 0; i < k; ++i)
    if (n.inputs[i] == kNoValue) return false;
  return true;
}

bool reads_values(const Node& n) {
  const OpInfo* op = find_op(n);
  return !op || !op->fold || op->fold_reads_constants;
}

std::vector<ValueId> shape_deciding_inputs(const Graph& g) {
  std::vector<bool> deciding(g.value_count(), false);
  for (std::size_t id = 0; id < g.node_count(); ++id) {
    const Node& n = g.node(static_cast<NodeId>(id));
    const OpInfo* op = n.alive ? find_op(n) : nullptr;
    if (!op) continue;
    for (const std::size_t i : op->static_inputs) {
      if (i >= n.inputs.size() || n.inputs[i] == kNoValue) continue;
      for (const ValueId in : g.inputs_reaching(n.inputs[i], reads_values))
        deciding[static_cast<std::size_t>(in)] = true;
    }
  }
  std::vector<ValueId> out;
  for (const ValueId in : g.inputs)
    if (deciding[static_cast<std::size_t>(in)]) out.push_back(in);
  return out;
}

std::vector<std::string> lowered_op_types() {
  std::vector<std::string> keys;
  for (const OpInfo& op : op_table())
    if (op.lower) keys.push_back(op.key());
  return keys;
}

std::string op_table_markdown() {
  std::ostringstream md;
  md << "| op | inputs | attributes read | folded | lowered to |\n|---|---|---|---|---|\n";
  const std::vector<OpInfo>& t = op_table();
  for (std::size_t i = 0; i < t.size();) {
    // Consecutive ops that agree on every other column share a row.
    std::size_t j = i + 1;
    auto same = [&](const OpInfo& a, const OpInfo& b) {
      return inputs_text(a) == inputs_text(b) && a.attributes == b.attributes &&
             static_cast<bool>(a.fold) == static_cast<bool>(b.fold) && a.lowered_to == b.lowered_to &&
             a.domain == b.domain;
    };
    while (j < t.size() && same(t[i], t[j])) ++j;
    std::string names;
    for (std::size_t k = i; k < j; ++k) names += (k > i ? ", " : "") + t[k].key();
    const OpInfo& op = t[i];
    md << "| " << names << " | " << inputs_text(op) << " | " << attributes_text(op) << " | " << (op.fold ? "yes" : "")
       << " | " << (op.lower ? op.lowered_to : "not run on the device: folded on the host when it can be, else refused")
       << " |\n";
    i = j;
  }
  return md.str();
}

}  // namespace npusim::stack::graph::onnx_ops
