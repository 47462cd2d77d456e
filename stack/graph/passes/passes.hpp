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

// Identity nodes and Casts to the type they already have: their uses read the input instead (not when the output is
// a graph output). Returns the number removed.
int remove_identities(Graph& g);

// What a pass made of a subgraph it looked at: the node it starts from, the fused node it became, or the first
// condition that failed (`reason`). Kept for the candidates a user would expect to fuse (attention: every
// Softmax feeding a MatMul), for `npusim run --explain-fusion` and `graph.unfused` in --json.
struct FusionNote {
  std::string pass, node;
  std::string fused_into;  // empty: not fused
  std::string reason;      // empty: fused
  bool causal = false;     // attention: fused with the causal flag (a causal mask recognised)
};

// The fusion passes, in the order run_all runs them. Each returns the number of subgraphs it rewrote.
// x*cos + rotate_half(x)*sin -> npusim.RoPE (BSND with the heads transpose moved after it) (fuse_rope.cpp).
int fuse_rope(Graph& g);
// MatMul(Q, K^T) [-> scale] [-> mask | causal Where] -> Softmax -> MatMul(., V), through layout views of Q, K, V
// and O -> npusim.FlashAttention with per-tensor strides (fuse_attention.cpp).
// Notes every candidate into `notes` when given.
int fuse_attention(Graph& g, std::vector<FusionNote>* notes = nullptr);
// Decomposed LayerNorm (both variance forms, Mean/InvStdDev outputs) -> LayerNormalization (fuse_norms.cpp).
int fuse_layernorm(Graph& g);
// Decomposed RMSNorm -> npusim.RMSNormalization (fuse_norms.cpp).
int fuse_rmsnorm(Graph& g);
// Exp(x - ReduceMax(x)) / ReduceSum(...) -> Softmax (fuse_softmax.cpp).
int fuse_softmax(Graph& g);
// (x - ReduceMax(x)) - Log(ReduceSum(Exp(x - ReduceMax(x)))) -> LogSoftmax (fuse_softmax.cpp).
int fuse_log_softmax(Graph& g);
// GELU, erf and tanh forms -> npusim.Gelu (fuse_norms.cpp).
int fuse_gelu(Graph& g);
// LayerNormalization(Add(a, b)) -> npusim.AddLayerNorm with the sum as a second output when it is used elsewhere.
int fuse_add_layernorm(Graph& g);
// MatMul(x, W[K, N]) -> Add(bias[N]) [-> npusim.Gelu | Relu] -> npusim.MatMulBias (act attribute).
int fuse_matmul_epilogue(Graph& g);
// Conv(x, W) [-> BatchNormalization, folded into W and the bias] [-> Relu] -> npusim.Conv (relu attribute)
// (fuse_conv.cpp).
int fuse_conv(Graph& g);
// Connected elementwise nodes of one shape -> npusim.FusedElementwise (expr attribute) (fuse_elementwise.cpp).
int fuse_elementwise(Graph& g);
// Or(Greater(a, b), Equal(a, b)) -> GreaterOrEqual(a, b); Less likewise (fuse_compare.cpp).
int fuse_compare(Graph& g);

struct PassResults {
  std::vector<std::pair<std::string, int>> fired;  // (pass name, times it fired) for the passes that fired
  std::vector<FusionNote> notes;
};
// Runs every pass in order.
PassResults run_all(Graph& g);

}  // namespace npusim::stack::graph::passes
