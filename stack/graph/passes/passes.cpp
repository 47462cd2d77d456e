#include "stack/graph/passes/passes.hpp"

namespace npusim::stack::graph::passes {

std::vector<std::pair<std::string, int>> run_all(Graph& g) {
  // RoPE before attention (its heads transpose moves next to the attention, which absorbs it); the norms and GELU
  // before the epilogue and Add+LayerNorm passes that take their results; elementwise chains last, over what is left.
  static const std::pair<const char*, int (*)(Graph&)> passes[] = {{"remove_identities", remove_identities},
                                                                   {"fuse_rope", fuse_rope},
                                                                   {"fuse_attention", fuse_attention},
                                                                   {"fuse_layernorm", fuse_layernorm},
                                                                   {"fuse_rmsnorm", fuse_rmsnorm},
                                                                   {"fuse_softmax", fuse_softmax},
                                                                   {"fuse_log_softmax", fuse_log_softmax},
                                                                   {"fuse_gelu", fuse_gelu},
                                                                   {"fuse_add_layernorm", fuse_add_layernorm},
                                                                   {"fuse_matmul_epilogue", fuse_matmul_epilogue},
                                                                   {"fuse_conv", fuse_conv},
                                                                   {"fuse_elementwise", fuse_elementwise},
                                                                   {"fuse_compare", fuse_compare}};
  std::vector<std::pair<std::string, int>> fired;
  for (const auto& [name, pass] : passes)
    if (const int n = pass(g)) fired.push_back({name, n});
  g.compact();
  g.verify();
  return fired;
}

}  // namespace npusim::stack::graph::passes
