// Host arrays for constant folding (passes/fold_constants.cpp): a constant tensor as integers (exact, int64) or
// doubles, and the small array algebra the op table's fold rules are written in (broadcasts, gathers, axes).
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "stack/graph/graph.hpp"

namespace npusim::stack::graph::onnx_ops {

// Results above this many elements stay nodes (an Expand to a [B, N, S, S] mask would only cost host memory).
inline constexpr std::int64_t kMaxFoldElements = 1 << 24;

// The failure of one fold: the node stays as it is.
struct NoFold {};

bool integral(ElemType t);

// A host array: integers (and bools) exactly in `i`, floats in `f`.
struct HostArray {
  ElemType type = ElemType::kUndefined;
  std::vector<std::int64_t> shape;
  std::vector<std::int64_t> i;
  std::vector<double> f;
  bool is_int() const { return integral(type); }
  std::int64_t size() const { return static_cast<std::int64_t>(is_int() ? i.size() : f.size()); }
  double num(std::int64_t k) const {
    return is_int() ? static_cast<double>(i[static_cast<std::size_t>(k)]) : f[static_cast<std::size_t>(k)];
  }
};

HostArray from_tensor(const Tensor& t);
// Throws NoFold for a type without a byte size.
Tensor to_tensor(const HostArray& a);
HostArray int_array(std::vector<std::int64_t> shape, std::vector<std::int64_t> v);
HostArray float_array(std::vector<std::int64_t> shape, std::vector<double> v);

// A double as an int64 (an integral result), or NoFold when no int64 holds it.
std::int64_t to_int(double v);
std::int64_t count(const std::vector<std::int64_t>& shape);
// An array of `type` and `shape` with element k = getf(k) or geti(k) by the type; NoFold past kMaxFoldElements.
HostArray make(ElemType type, std::vector<std::int64_t> shape, const std::function<double(std::int64_t)>& getf,
               const std::function<std::int64_t(std::int64_t)>& geti);
// A copy of `a` with its elements picked: element k of the result is element src(k) of a.
HostArray gather_elems(const HostArray& a, std::vector<std::int64_t> shape,
                       const std::function<std::int64_t(std::int64_t)>& src);
// numpy's broadcast of the shapes; NoFold when they do not broadcast.
std::vector<std::int64_t> broadcast_shape(const std::vector<std::vector<std::int64_t>>& shapes);
// The flat index into an array of shape `s` for the flat index k of the broadcast shape `out`.
std::int64_t bcast_index(const std::vector<std::int64_t>& s, const std::vector<std::int64_t>& out, std::int64_t k);
// An axis in [-rank, rank) as a non-negative one; NoFold outside.
std::int64_t norm_axis(std::int64_t axis, std::int64_t rank);
std::vector<std::int64_t> strides_of(const std::vector<std::int64_t>& shape);

// What a fold rule sees: the node, the graph (for static shapes and output types) and, when its rule needs them,
// its inputs' constant values (nullptr for an omitted optional input).
struct FoldArgs {
  const Graph& graph;
  const Node& node;
  std::vector<const HostArray*> in;
  // Input k's value; NoFold when it is omitted.
  const HostArray& need(std::size_t k) const {
    if (k >= in.size() || !in[k]) throw NoFold{};
    return *in[k];
  }
  const HostArray* optional(std::size_t k) const { return k < in.size() ? in[k] : nullptr; }
};

}  // namespace npusim::stack::graph::onnx_ops
