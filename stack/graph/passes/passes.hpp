// Graph passes (one per file). Each checks its conditions as a real pass does (single consumers of the values it
// removes, constant values, axes, dtypes, shapes), rewrites, and leaves the graph valid (verified by the caller).
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "stack/graph/graph.hpp"

namespace npusim::stack::graph::passes {

// MatMul(Q, Transpose(K)) -> Mul/Div by a scalar constant -> [Add(mask) | Where(causal triangle, x, -inf)] ->
// Softmax(last axis) -> MatMul(., V)  =>  one npusim.FlashAttention node (attrs: scale, causal; mask input when
// an Add mask was there). Returns the number of subgraphs fused.
int fuse_attention(Graph& g);

// Runs every pass in order; returns (pass name, times it fired) for the passes that fired.
std::vector<std::pair<std::string, int>> run_all(Graph& g);

}  // namespace npusim::stack::graph::passes
