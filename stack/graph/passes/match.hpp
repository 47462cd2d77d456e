// Pattern-matching helpers shared by the passes.
#pragma once

#include <algorithm>
#include <cmath>
#include <optional>
#include <string>

#include "stack/graph/graph.hpp"
#include "stack/graph/onnx_ops/op_table.hpp"

namespace npusim::stack::graph::passes {

// Whether a node has the inputs its op always takes (the op table's arity; ONNX's checks may let a malformed node
// through, and the passes index inputs by position).
using onnx_ops::well_formed;

// One consumer, and not a graph output: a value a pass may remove.
inline bool single_use(const Graph& g, ValueId v) {
  if (std::find(g.outputs.begin(), g.outputs.end(), v) != g.outputs.end()) return false;
  return g.value(v).consumers.size() == 1;
}

// The live default-domain node producing v with op type `op`, or -1.
inline NodeId producer(const Graph& g, ValueId v, const char* op) {
  if (v == kNoValue) return -1;
  const NodeId p = g.value(v).producer;
  if (p < 0 || !g.node(p).alive || g.node(p).op_type != op || !g.node(p).domain.empty() || !well_formed(g.node(p))) return -1;
  return p;
}

// The value of a constant with one element.
inline std::optional<double> scalar_constant(const Graph& g, ValueId v) {
  if (v == kNoValue) return std::nullopt;
  const Value& val = g.value(v);
  if (!val.constant || val.constant->elements() != 1) return std::nullopt;
  return val.constant->as_doubles()[0];
}

inline bool near(std::optional<double> v, double want, double tol = 1e-3) { return v && std::abs(*v - want) <= tol * std::abs(want); }

// For a binary node with a constant scalar on one side: the other input (and the constant through `c`).
inline ValueId other_than_scalar(const Graph& g, const Node& n, double* c) {
  for (int side = 0; side < 2; ++side) {
    if (const auto v = scalar_constant(g, n.inputs[static_cast<std::size_t>(side)])) {
      *c = *v;
      return n.inputs[static_cast<std::size_t>(1 - side)];
    }
  }
  return kNoValue;
}

// A ReduceMean over the last axis with keepdims (axes as attribute, opsets <= 17).
inline bool mean_over_last(const Graph& g, const Node& n) {
  if (n.attr_int("keepdims", 1) != 1) return false;
  const Attribute* axes = n.attr("axes");
  if (!axes || axes->ints.size() != 1) return false;
  const Value& x = g.value(n.inputs[0]);
  if (!x.shape) return false;
  const auto rank = static_cast<std::int64_t>(x.shape->size());
  return axes->ints[0] == -1 || axes->ints[0] == rank - 1;
}

}  // namespace npusim::stack::graph::passes
