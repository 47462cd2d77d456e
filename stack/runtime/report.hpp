// The --json report of a run (DESIGN.md, "What comes out"; every key defined in docs/metrics.md), built here and
// nowhere else: the tasks, their pipes and overlaps from the task scheduler's records, the memory section from the
// chip's statistics registry. The CLI's commands, the ACL host API and the Python module all print this report.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>

#include "firmware/ts/task_scheduler.hpp"
#include "hw/isa/instr.hpp"
#include "stack/runtime/runtime.hpp"
#include "traces/stats.hpp"

namespace npusim::stack::runtime {

// The part of a device's life a report covers: the tasks from `first_task` on, the host API calls from
// `first_api_call` on, the statistics counted since `stats` (all of them when null). The default is everything: a
// command's one run. A device that runs on (the Python module, the ACL host API) reports each call by its window.
struct ReportWindow {
  std::uint32_t first_task = 0;
  std::size_t first_api_call = 0;
  const traces::StatsRegistry::Snapshot* stats = nullptr;
};
// What a window starting now would start with (`stats`: a snapshot the caller keeps while the window is used).
ReportWindow window_from_now(const Device& dev, const traces::StatsRegistry::Snapshot& stats);

// The --json report of a runtime run: cycles/time_us over the window's device tasks, tasks[] one per task.
nlohmann::json runtime_report(const Device& dev, const ReportWindow& window = {});
// The same plus the (last) kernel task's view: its pipes and cores in its task entry, `overlap`, `memory` and
// `sim` from its blocks, and `kernel` = {cycles, time_us, cores} of its blocks' span. `wall` is the host time.
nlohmann::json run_report(Device& dev, double wall_seconds, const ReportWindow& window = {});

// A task's pipe use: busy cycles per pipe summed over the cores that ran it, and their fraction of the task's core
// span times those cores (the `pipes` of a task; the op summary's *_ratio and *_cycles columns).
struct PipeUse {
  double fraction[hw::isa::kPipeCount] = {};
  std::uint64_t cycles[hw::isa::kPipeCount] = {};
  std::uint32_t cores = 0;
  std::uint64_t span = 0;
};
PipeUse pipe_use(const fw::ts::TaskRecord& t);
// The pipes in the order of the report's keys and the op summary's columns.
inline constexpr hw::isa::Pipe kReportPipes[] = {hw::isa::Pipe::kS,    hw::isa::Pipe::kMte1, hw::isa::Pipe::kMte2,
                                                 hw::isa::Pipe::kMte3, hw::isa::Pipe::kM,    hw::isa::Pipe::kV,
                                                 hw::isa::Pipe::kFix};
// "kernel", "memcpy", "event_record", "event_wait".
std::string task_type_name(fw::ts::TaskType t);

}  // namespace npusim::stack::runtime
