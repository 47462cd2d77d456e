// ONNX activations with attributes that have no kernel of their own, written as fused_elementwise expressions
// (stack/ops/fused_elementwise.cpp) over an argument: the lowering runs a lone node as one such kernel, and
// fuse_elementwise inlines them into longer chains (the op table marks them `activation`).
#pragma once

#include <optional>
#include <string>

#include "stack/graph/graph.hpp"

namespace npusim::stack::graph::onnx_ops {

// The expression of activation node `n` applied to the expression `x`, or nothing when n is not one of
// LeakyRelu, Elu, Selu, HardSigmoid, Softplus, Softsign.
std::optional<std::string> activation_expr(const Node& n, const std::string& x);

}  // namespace npusim::stack::graph::onnx_ops
