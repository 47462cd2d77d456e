// What a runtime run leaves behind: the trace layout of DESIGN.md (a Host process with the API calls, a Runtime/TS
// process with one track per stream, the cores' pipes from hw::chip::PipeTrace, flows from each launch to its
// first block) and the op summary CSV (one row per device task; columns in docs/metrics.md).
#pragma once

#include <map>
#include <string>

#include "hw/chip/pipe_trace.hpp"
#include "stack/runtime/runtime.hpp"
#include "traces/chrome_trace.hpp"

namespace npusim::stack::runtime {

// `cores` maps core index to its pipe tracer (the ones given to the Device), for the flows.
void write_runtime_trace(traces::ChromeTraceWriter& w, const Device& dev,
                         std::map<std::uint32_t, hw::chip::PipeTrace*>& cores);
void write_op_summary(const std::string& path, const Device& dev);

}  // namespace npusim::stack::runtime
