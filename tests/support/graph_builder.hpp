// A small graph builder for tests of the graph engine: inputs, constants and nodes with the output shapes given (as
// ONNX's shape inference would give them).
#pragma once

#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "stack/graph/graph.hpp"

namespace npusim::stack::graph::test {

using Shape = std::vector<std::int64_t>;

inline Dims dims(const Shape& s) {
  Dims d;
  for (auto v : s) d.push_back(Dim::of(v));
  return d;
}

struct Builder {
  Graph g;
  int next = 0;
  ValueId input(const std::string& name, const Shape& s, ElemType t = ElemType::kFloat32) {
    const ValueId v = g.add_value(name, t, dims(s));
    g.inputs.push_back(v);
    return v;
  }
  ValueId floats(const std::vector<float>& v, const Shape& s = {}) {
    Tensor t{ElemType::kFloat32, s, std::vector<std::uint8_t>(v.size() * 4)};
    std::memcpy(t.bytes.data(), v.data(), v.size() * 4);
    return g.add_constant("c" + std::to_string(next++), t);
  }
  ValueId ints(const std::vector<std::int64_t>& v) {
    Tensor t{ElemType::kInt64, {static_cast<std::int64_t>(v.size())}, std::vector<std::uint8_t>(v.size() * 8)};
    std::memcpy(t.bytes.data(), v.data(), v.size() * 8);
    return g.add_constant("i" + std::to_string(next++), t);
  }
  ValueId scalar_int(std::int64_t v) {  // a rank-0 int64 constant
    Tensor t{ElemType::kInt64, {}, std::vector<std::uint8_t>(8)};
    std::memcpy(t.bytes.data(), &v, 8);
    return g.add_constant("i" + std::to_string(next++), t);
  }
  ValueId bools(const std::vector<bool>& v, const Shape& s) {
    Tensor t{ElemType::kBool, s, std::vector<std::uint8_t>(v.size())};
    for (std::size_t i = 0; i < v.size(); ++i) t.bytes[i] = v[i];
    return g.add_constant("b" + std::to_string(next++), t);
  }
  ValueId op(const std::string& type, std::vector<ValueId> in, const Shape& out,
             std::map<std::string, Attribute> attrs = {}, ElemType t = ElemType::kFloat32) {
    const ValueId o = g.add_value(type + "_" + std::to_string(next) + "_out", t, dims(out));
    Node n;
    n.name = type + "_" + std::to_string(next++);
    n.op_type = type;
    n.inputs = std::move(in);
    n.outputs = {o};
    n.attrs = std::move(attrs);
    g.add_node(std::move(n));
    return o;
  }
  NodeId node_of(ValueId v) const { return g.value(v).producer; }
};

}  // namespace npusim::stack::graph::test
