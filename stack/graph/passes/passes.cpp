#include "stack/graph/passes/passes.hpp"

namespace npusim::stack::graph::passes {

std::vector<std::pair<std::string, int>> run_all(Graph& g) {
  std::vector<std::pair<std::string, int>> fired;
  if (const int n = fuse_attention(g)) fired.push_back({"fuse_attention", n});
  if (const int n = fuse_layernorm(g)) fired.push_back({"fuse_layernorm", n});
  if (const int n = fuse_rmsnorm(g)) fired.push_back({"fuse_rmsnorm", n});
  if (const int n = fuse_gelu(g)) fired.push_back({"fuse_gelu", n});
  if (const int n = fuse_matmul_epilogue(g)) fired.push_back({"fuse_matmul_epilogue", n});
  g.compact();
  g.verify();
  return fired;
}

}  // namespace npusim::stack::graph::passes
