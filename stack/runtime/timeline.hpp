// What a runtime run leaves behind: the trace layout of DESIGN.md (a Host process with the API calls, a Runtime/TS
// process with one track per stream, per core a track of the blocks it ran and the pipes from hw::chip::PipeTrace,
// flows from each launch to its first block) and the op summary CSV (one row per device task; columns in
// docs/metrics.md).
#pragma once

#include <map>
#include <string>

#include "hw/chip/pipe_trace.hpp"
#include "stack/runtime/run_outputs.hpp"
#include "stack/runtime/runtime.hpp"
#include "traces/chrome_trace.hpp"

namespace npusim::stack::runtime {

// `cores` maps core index to its pipe tracer (the ones given to the Device), whose process the core's block track
// joins. At TraceLevel::kTask there are no core tracks and each launch's flow ends on its task. `dropped_slices`
// (instruction slices past --trace-limit) is marked on the host's track when not zero.
void write_runtime_trace(traces::ChromeTraceWriter& w, const Device& dev,
                         std::map<std::uint32_t, hw::chip::PipeTrace*>& cores, TraceLevel level,
                         std::uint64_t dropped_slices);
void write_op_summary(const std::string& path, const Device& dev);

}  // namespace npusim::stack::runtime
