#include "stack/graph/passes/passes.hpp"

#include <functional>

namespace npusim::stack::graph::passes {

PassResults run_all(Graph& g) {
  // RoPE before attention (its heads transpose moves next to the attention, which absorbs it); the norms and GELU
  // before the epilogue and Add+LayerNorm passes that take their results; elementwise chains last, over what is left.
  PassResults r;
  const auto attention = [&r](Graph& graph) { return fuse_attention(graph, &r.notes); };
  const std::pair<const char*, std::function<int(Graph&)>> passes[] = {{"remove_identities", remove_identities},
                                                                       {"fuse_rope", fuse_rope},
                                                                       {"fuse_attention", attention},
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
  for (const auto& [name, pass] : passes)
    if (const int n = pass(g)) r.fired.push_back({name, n});
  g.compact();
  g.verify();
  return r;
}

}  // namespace npusim::stack::graph::passes
