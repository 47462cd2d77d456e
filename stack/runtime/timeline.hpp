// What a runtime run leaves behind: the trace layout of DESIGN.md (a Host process with the API calls, a Runtime/TS
// process with one track per stream, the cores' pipes from hw::chip::PipeTrace, flows from each launch to its
// first block) and the op summary CSV (one row per device task; columns in docs/metrics.md).
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "firmware/kernel/report.hpp"
#include "hw/chip/pipe_trace.hpp"
#include "stack/runtime/runtime.hpp"
#include "traces/chrome_trace.hpp"

namespace npusim::stack::runtime {

// `cores` maps core index to its pipe tracer (the ones given to the Device), for the flows.
void write_runtime_trace(traces::ChromeTraceWriter& w, const Device& dev,
                         std::map<std::uint32_t, hw::chip::PipeTrace*>& cores);
void write_op_summary(const std::string& path, const Device& dev);
// The part of a device's life a report covers: the tasks from `first_task` on, the host API calls from
// `first_api_call` on, the memory counters since `memory` (all of them when null). The default is everything: a
// command's one run. A device that runs on (the Python module, the ACL host API) reports each call by its window.
struct ReportWindow {
  std::uint32_t first_task = 0;
  std::size_t first_api_call = 0;
  const fw::kernel::MemorySnapshot* memory = nullptr;
};
// What a window starting now would start with.
ReportWindow window_from_now(const Device& dev, const fw::kernel::MemorySnapshot& memory);

// The --json report of a runtime run: cycles/time_us over the window's device tasks, tasks[] one per task.
nlohmann::json runtime_report(const Device& dev, const ReportWindow& window = {});
// The same plus the (last) kernel task's view: its pipes and cores in its task entry, `overlap`, `memory` and
// `sim` from its blocks, and `kernel` = {cycles, time_us, cores} of its blocks' span. `wall` is the host time.
nlohmann::json run_report(Device& dev, double wall_seconds, const ReportWindow& window = {});

}  // namespace npusim::stack::runtime
