// The one table of the ops the graph engine knows: ONNX's default domain and the npusim domain the fusion passes
// write. For each op: the inputs it always takes and may take, the attributes it reads, its function in
// fused_elementwise expressions, its fold rule (evaluation on the host when its inputs are constants) and its
// lowering rule (library op calls). Output shapes are not here: ONNX's shape inference gives them at import (the
// op's schema is its shape rule), and the passes that make npusim ops set theirs. Import (unsupported ops), the passes
// (well-formed nodes, elementwise chains), constant folding and the lowering all read it; docs/graph.md's lowering
// table is printed from it (npusim-onnx-ops-doc). The rules live one file per op family beside this one.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "stack/graph/graph.hpp"
#include "stack/graph/onnx_ops/host_array.hpp"

namespace npusim::stack::graph::onnx_ops {

class Lowerer;

using FoldRule = std::function<std::vector<HostArray>(const FoldArgs&)>;
using LowerRule = std::function<void(Lowerer&, const Node&)>;

struct OpInfo {
  std::string domain;  // "" (ONNX's default domain) or "npusim"
  std::string type;
  std::size_t min_inputs = 1;  // present (not omitted) in every well-formed node
  std::size_t max_inputs = 1;
  std::vector<std::string> attributes;  // the attributes the rules read
  // Its function in fused_elementwise expressions ("add", "exp"...); "" when it has none. `activation`: written by
  // activation_expr (activations.hpp) instead.
  std::string expression;
  bool activation = false;
  FoldRule fold;                     // empty: never folded
  bool fold_reads_constants = true;  // false: folds from static shapes or attributes (Shape, Size, Constant)
  LowerRule lower;                   // empty: not run on the device (folded on the host or refused)
  // Inputs whose values the rules need at compile time (a shape, axes, sizes, starts, k): they decide the output's
  // shape or its structure, so they must fold to constants (a graph input they come from is bound from its data).
  std::vector<std::size_t> static_inputs;
  std::string lowered_to;            // what the lowering makes of it, for docs/graph.md

  std::string key() const { return domain.empty() ? type : domain + "." + type; }

  // Entries are written as OpInfo::onnx("Add", 2, 2).reads(...).folds(...).lowers(...), each field named.
  static OpInfo onnx(const std::string& type, std::size_t min_inputs, std::size_t max_inputs) {
    return of("", type, min_inputs, max_inputs);
  }
  static OpInfo npusim(const std::string& type, std::size_t min_inputs, std::size_t max_inputs) {
    return of("npusim", type, min_inputs, max_inputs);
  }
  static OpInfo of(const std::string& domain, const std::string& type, std::size_t min_inputs, std::size_t max_inputs) {
    OpInfo op;
    op.domain = domain;
    op.type = type;
    op.min_inputs = min_inputs;
    op.max_inputs = max_inputs;
    return op;
  }
  OpInfo& reads(std::vector<std::string> attrs) {
    attributes = std::move(attrs);
    return *this;
  }
  OpInfo& in_expressions_as(const std::string& fn) {
    expression = fn;
    return *this;
  }
  OpInfo& in_expressions_as_activation() {
    activation = true;
    return *this;
  }
  OpInfo& folds(FoldRule rule, bool reads_constants = true) {
    fold = std::move(rule);
    fold_reads_constants = reads_constants;
    return *this;
  }
  OpInfo& needs_values_of(std::vector<std::size_t> inputs) {
    static_inputs = std::move(inputs);
    return *this;
  }
  OpInfo& lowers(LowerRule rule, const std::string& what) {
    lower = std::move(rule);
    lowered_to = what;
    return *this;
  }
};

inline constexpr std::size_t kVariadic = std::numeric_limits<std::size_t>::max();

// A number as a fused_elementwise literal or op parameter, without losing digits (%.9g reads back to the same fp32
// value).
std::string num(double v);

// Every op, in the families' order.
const std::vector<OpInfo>& op_table();
// The op of a node (its domain, "ai.onnx" as ""), or nullptr.
const OpInfo* find_op(const std::string& domain, const std::string& type);
const OpInfo* find_op(const Node& n);
// Whether n has every input its op always takes and an output (ONNX's checks may let a malformed node through; the
// passes index inputs by position, and the lowering reports the node by name). Unknown ops: one input.
bool well_formed(const Node& n);
// The graph inputs whose values decide shapes or structure in `g`: those a live node's static input (OpInfo::
// static_inputs) is computed from, in the order of g.inputs.
std::vector<ValueId> shape_deciding_inputs(const Graph& g);
// Whether the values of n's inputs flow into its outputs' values (false for Shape and Size, which read shapes only).
bool reads_values(const Node& n);
// The keys ("Add", "npusim.FlashAttention"...) of the ops the lowering runs.
std::vector<std::string> lowered_op_types();
// docs/graph.md's table of ops, their attributes, folding and lowering.
std::string op_table_markdown();

// The families (one file each), in table order.
void add_shape_ops(std::vector<OpInfo>& table);  // shape_ops.cpp: views, Constant, Shape, Size, Cast...
void add_data_movement(
    std::vector<OpInfo>& table);                   // data_movement.cpp: Slice, Concat, Split, Gather, Expand, Transpose
void add_elementwise(std::vector<OpInfo>& table);  // elementwise.cpp: arithmetic, unary, comparisons, Where, variadic
void add_activations(std::vector<OpInfo>& table);  // activations.cpp: LeakyRelu... PRelu, Clip
void add_row_ops(std::vector<OpInfo>& table);      // row_ops.cpp: Softmax, LogSoftmax, LayerNormalization, reductions
void add_cube_ops(std::vector<OpInfo>& table);  // cube_ops.cpp: MatMul, Gemm, npusim.MatMulBias, npusim.FlashAttention
void add_fused_vector_ops(std::vector<OpInfo>& table);
void add_conv_ops(std::vector<OpInfo>& table);  // conv_ops.cpp: Conv, npusim.Conv, GlobalAveragePool  //
                                                // fused_vector_ops.cpp: the other npusim ops

}  // namespace npusim::stack::graph::onnx_ops
