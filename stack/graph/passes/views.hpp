// Strided views: where the elements of a value produced by layout-only nodes (Transpose, Reshape, Squeeze,
// Unsqueeze, Flatten, Identity, Expand, Split, Slice, a Gather of one constant index) sit in the buffer of the value
// those nodes start from. A fused kernel that takes strides (FlashAttention) then reads or writes that buffer directly
// and the layout nodes disappear: the Transposes and Reshapes around attention, the Split of a fused QKV projection,
// the repeat_kv Expand of grouped-query attention.
//
// A view dim is a list of atoms (size, stride), outermost first: one atom is an ordinary strided dim; two atoms
// come from a Reshape that merged dims which are not contiguous in the buffer (heads of grouped-query attention:
// (KV heads, D) then (repeats, 0)); an Expand gives an atom of stride 0; a dim of size 1 has no atoms.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "stack/graph/graph.hpp"

namespace npusim::stack::graph::passes {

struct Atom {
  std::int64_t size = 1, stride = 0;  // strides in elements
};

class View {
 public:
  // The contiguous row-major layout of a tensor of `shape`.
  static View contiguous(const std::vector<std::int64_t>& shape);

  std::size_t rank() const { return dims_.size(); }
  std::int64_t size(std::size_t d) const;
  const std::vector<Atom>& atoms(std::size_t d) const { return dims_[d]; }
  std::int64_t offset() const { return offset_; }
  std::vector<std::int64_t> shape() const;

  // Each returns false (leaving the view unusable) when the result is not a strided view of the same buffer.
  bool transpose(const std::vector<std::int64_t>& perm);
  bool reshape(const std::vector<std::int64_t>& shape);
  bool expand(const std::vector<std::int64_t>& shape);                   // numpy broadcast to `shape`
  bool slice(std::size_t dim, std::int64_t start, std::int64_t len, std::int64_t step);

  // A dim that is one strided atom (or of size 1): its stride (0 for size 1).
  std::optional<std::int64_t> simple_stride(std::size_t d) const;

 private:
  std::vector<std::vector<Atom>> dims_;
  std::int64_t offset_ = 0;
};

// The view of `v` in the buffer of the value the layout nodes producing it start from (`base`, itself when none);
// when one of them is not a strided view of its input, the walk starts again from its output. The nodes walked are
// appended to `nodes`. Returns nullopt when a shape on the way is not static.
std::optional<View> view_of(const Graph& g, ValueId v, ValueId* base, std::vector<NodeId>* nodes);

// The other way: `v` flows through single-consumer, element-preserving layout nodes (Transpose, Reshape, Squeeze,
// Unsqueeze, Flatten, Identity) into `final`; returns where v's elements sit in final's buffer. `final` is v and the
// view contiguous when v feeds no such node.
std::optional<View> view_into(const Graph& g, ValueId v, ValueId* final, std::vector<NodeId>* nodes);

// The static shape of a value, if it has one.
std::optional<std::vector<std::int64_t>> static_shape(const Value& v);

}  // namespace npusim::stack::graph::passes
