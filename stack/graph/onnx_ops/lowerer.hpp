// What a lowering rule of the op table writes with: the program being built (graph::lower drives it node by node in
// graph order) and the helpers the rules share: program tensors for graph values, temporaries, steps, views,
// constant inputs, axes, broadcasts by expansion, fused expressions, and the fp16 copies the Cube reads.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "stack/graph/lower.hpp"
#include "stack/graph/onnx_ops/op_table.hpp"

namespace npusim::stack::graph::onnx_ops {

class Lowerer {
 public:
  explicit Lowerer(const Graph& g);

  const Graph& graph() const { return g_; }
  Program& program() { return p_; }

  [[noreturn]] void fail(const Node& n, const std::string& what) const;

  // The program tensor of a graph value (created on first use; constants carry their bytes in the tensor's dtype).
  int tensor(ValueId id, const std::string& where);
  // Input / output i of n as a program tensor.
  int in(const Node& n, std::size_t i);
  int out(const Node& n, std::size_t i);
  // A temporary the lowering adds.
  int temp(const std::string& name, ops::TensorDesc d);
  // Program tensor x seen under another shape of as many elements (a temporary sharing its buffer).
  int reshaped(int x, const ops::Shape& shape, const std::string& name);
  const ProgramTensor& t(int i) const { return p_.tensors[static_cast<std::size_t>(i)]; }
  ProgramTensor& t(int i) { return p_.tensors[static_cast<std::size_t>(i)]; }
  // The static shape of a value; InputError naming `where` for unknown, unbound, empty or too large shapes.
  ops::Shape shape_of(const Value& v, const std::string& where) const;
  // A constant's bytes in the device dtype `to`.
  static std::vector<std::uint8_t> convert(const Tensor& c, hw::isa::DType to);

  void step(const Node& n, const std::string& op, ops::Call call, std::vector<int> in, std::vector<int> out);
  // Output `out` of n as a view of program tensor `base` (the same bytes under the output's shape).
  void view(const Node& n, ValueId out, int base);
  // The integers of constant input `input` ({} when omitted); fails naming `what` when it is not a constant.
  std::vector<std::int64_t> ints_of(const Node& n, std::size_t input, const std::string& what) const;
  // For an error about value `v` that must be a constant: the graph inputs it comes from, and how to bind them (""
  // when there are none).
  std::string from_inputs(ValueId v) const;
  // An axis of a rank-`rank` tensor as a non-negative one; fails when out of range.
  std::int64_t axis_in(const Node& n, std::int64_t axis, std::size_t rank) const;
  // The optional bias input `input` of a norm (LayerNorm's beta), or a constant row of h zeros in `dtype`.
  int bias_or_zeros(const Node& n, std::size_t input, std::uint64_t h, hw::isa::DType dtype);
  // `x` broadcast to `shape` by an expand step (itself when it already has that shape).
  int expanded(const Node& n, int x, const ops::Shape& to);
  // `x` as an operand of a fused_elementwise expression of output shape `shape`: itself when it repeats over the
  // output's trailing dims, else expanded to `shape` first (a one-element tensor included: the kernel would cut its
  // tiles to one element).
  int broadcast_operand(const Node& n, int x, const ops::Shape& shape);
  // A node computed as one fused_elementwise expression over `operands`, in the output's element type: a scalar
  // constant becomes a literal, any other operand an input xK of its own type (bool and integer operands included:
  // the kernel converts each to fp32), expanded to the output shape first when it does not repeat over the
  // output's trailing dims (a one-element tensor included: the kernel would cut its tiles to one element). `build`
  // writes the expression from the operands' texts.
  void expression(const Node& n, const std::string& kernel, const std::vector<ValueId>& operands,
                  const std::function<std::string(const std::vector<std::string>&)>& build);
  // A float32 tensor as fp16 for the Cube: a compile-time conversion for constants, a device cast otherwise (one per
  // tensor, e.g. one QKV tensor for Q, K and V; the Cube result itself when x is its exact widening).
  int to_half(const Node& n, int x, hw::isa::DType cube, const std::string& what);
  // A Cube result in fp16 `result` cast to the graph's fp32 `o` (nothing when they are the same tensor).
  void widen(const Node& n, int result, int o);

 private:
  hw::isa::DType dtype_of(const Value& v, const std::string& where) const;
  int make_half(const Node& n, int x, hw::isa::DType cube, const std::string& what);

  const Graph& g_;
  std::vector<int> map_;
  std::map<int, int> halves_;   // tensor -> its fp16 copy for the Cube
  std::map<int, int> widened_;  // fp32 tensor -> the fp16 Cube result it was cast from (exact)
  Program p_;
};

}  // namespace npusim::stack::graph::onnx_ops
