// Graph passes (one per file). Each checks its conditions as a real pass does (single consumers of the values it
// removes, constant values, axes, dtypes, shapes), rewrites, and leaves the graph valid (verified by the caller).
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "stack/graph/graph.hpp"

namespace npusim::stack::graph::passes {

// Evaluates on the host every node whose inputs are constants (Shape and Size: whose input shape is static) and
// makes its outputs constants. Returns the number of nodes folded.
int fold_constants(Graph& g);
// Removes nodes none of whose outputs is used (by a node or as a graph output). Returns the number removed.
int remove_dead_nodes(Graph& g);

// MatMul(Q, Transpose(K)) -> Mul/Div by a scalar constant -> [Add(mask) | Where(causal triangle, x, -inf)] ->
// Softmax(last axis) -> MatMul(., V)  =>  one npusim.FlashAttention node (attrs: scale, causal; mask input when
// an Add mask was there). Returns the number of subgraphs fused.
int fuse_attention(Graph& g);

// Decomposed LayerNorm (ReduceMean/Sub/Pow/ReduceMean/Add/Sqrt/Div/Mul/Add) -> LayerNormalization (fuse_norms.cpp).
int fuse_layernorm(Graph& g);
// Decomposed RMSNorm (Pow/ReduceMean/Add/Sqrt/Reciprocal or Div(1, .)/Mul/Mul) -> npusim.RMSNormalization.
int fuse_rmsnorm(Graph& g);
// GELU's erf form (Div or Mul by sqrt 2 / Erf / Add 1 / Mul x / Mul 0.5) -> npusim.Gelu.
int fuse_gelu(Graph& g);
// MatMul(x, W[K, N]) -> Add(bias[N]) [-> npusim.Gelu | Relu] -> npusim.MatMulBias (act attribute).
int fuse_matmul_epilogue(Graph& g);

// Runs every pass in order; returns (pass name, times it fired) for the passes that fired.
std::vector<std::pair<std::string, int>> run_all(Graph& g);

}  // namespace npusim::stack::graph::passes
