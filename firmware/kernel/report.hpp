// The --json report of a launch (DESIGN.md, "What comes out"; definitions in docs/metrics.md).
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "firmware/kernel/launch_spec.hpp"

namespace npusim::fw::kernel {

// The memory system's counters at one moment, so a report can count only what came after (a device that runs on:
// the Python module's sessions, one report per call).
struct MemorySnapshot {
  hw::mem::HbmStats hbm;
  std::vector<hw::mem::SliceStats> l2;
  hw::mem::MemoryTotals totals;
  std::uint64_t gm_read_bytes = 0, gm_write_bytes = 0;  // the simple memory model's counters
};
MemorySnapshot memory_snapshot(const hw::chip::Chip& chip);

// cycles, time_us, tasks (one: the launch), overlap, memory, sim. `memory` counts what happened since `since`
// (everything when null).
nlohmann::json launch_report(const LaunchResult& r, const hw::chip::Chip& chip, const std::string& op,
                             const MemorySnapshot* since = nullptr);

}  // namespace npusim::fw::kernel
