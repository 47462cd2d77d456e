// Memory planning (a graph-engine pass over the lowered program): constants (weights) get a region of their own,
// as a deployed model keeps them; every other device buffer lives from the step that writes it (graph inputs: from
// the start, as they are copied in first) to the last step that reads it or a view of it (graph outputs: to the
// end). Two buffers may share memory only when every use of one happens before the other is written, in the order
// the stream plan gives (one stream: program order; several: data, stream order and events). Offsets in one arena
// are assigned greedily, largest first, at the lowest offset clear of every buffer that may be alive at the same
// time (as TFLite's arena planner does, generalised from intervals to a happens-before relation).
#pragma once

#include <cstdint>
#include <vector>

#include "stack/graph/lower.hpp"
#include "stack/graph/streams.hpp"

namespace npusim::stack::graph {

struct MemoryPlan {
  static constexpr std::uint64_t kAlign = 512;
  std::vector<std::uint64_t> offset;            // per program tensor, in its region (views: their base's offset)
  std::vector<bool> constant;                   // per program tensor: in the constant region (else the arena)
  std::vector<std::uint64_t> workspace_offset;  // per step, in the arena (0 bytes: unused)
  std::uint64_t constant_bytes = 0;             // weights and other constants
  std::uint64_t arena_bytes = 0;                // the activation arena's peak: inputs, intermediates, workspaces
  std::uint64_t naive_bytes = 0;                // constants + every other buffer on its own (no reuse)
  std::uint64_t peak_bytes() const { return constant_bytes + arena_bytes; }
};

// `workspaces[s]`: the workspace bytes step s needs (from its op's plan).
MemoryPlan plan_memory(const Program& p, const std::vector<std::uint64_t>& workspaces, const StreamPlan& streams);

}  // namespace npusim::stack::graph
