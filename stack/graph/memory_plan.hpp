// Memory planning (a graph-engine pass over the lowered program): each device buffer lives from the step that
// writes it (inputs and constants: from the start) to the last step that reads it or a view of it (graph outputs:
// to the end); buffers whose lifetimes do not overlap share device memory. Offsets in one arena are assigned
// greedily, largest first, at the lowest offset free over the buffer's lifetime (as TFLite's arena planner).
#pragma once

#include <cstdint>
#include <vector>

#include "stack/graph/lower.hpp"

namespace npusim::stack::graph {

struct MemoryPlan {
  static constexpr std::uint64_t kAlign = 512;
  std::vector<std::uint64_t> offset;            // per program tensor (views: their base's offset)
  std::vector<std::uint64_t> workspace_offset;  // per step (0 bytes: unused)
  std::uint64_t arena_bytes = 0;                // the peak: one allocation holds everything
  std::uint64_t naive_bytes = 0;                // without reuse: the sum of all buffers
};

// `workspaces[s]`: the workspace bytes step s needs (from its op's plan).
MemoryPlan plan_memory(const Program& p, const std::vector<std::uint64_t>& workspaces);

}  // namespace npusim::stack::graph
