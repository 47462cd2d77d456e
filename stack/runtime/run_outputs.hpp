// The --trace / --summary outputs of a run through the runtime, shared by every host program (the CLI's commands,
// the ACL host API): the trace's core tracks are attached while the chip is built, the rest is written at the end.
#pragma once

#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "hw/chip/pipe_trace.hpp"
#include "stack/runtime/runtime.hpp"
#include "traces/chrome_trace.hpp"

namespace npusim::stack::runtime {

class RunOutputs {
 public:
  // Opens the trace file now (a bad path is an error before anything is simulated); empty paths mean no output.
  RunOutputs(std::string trace, std::string summary, double core_hz);
  // For the Device: one pipe tracer per core while tracing, none otherwise.
  hw::chip::Chip::TraceFactory trace_factory();
  // Writes the trace (runtime layout, docs/runtime.md) and the op summary; records both paths in `report`.
  void finish(const Device& dev, nlohmann::json& report);
  bool tracing() const { return writer_ != nullptr; }
  const std::string& trace_path() const { return trace_; }

 private:
  std::string trace_, summary_;
  double core_hz_;
  std::unique_ptr<traces::ChromeTraceWriter> writer_;
  std::vector<std::unique_ptr<hw::chip::PipeTrace>> tracers_;
  std::map<std::uint32_t, hw::chip::PipeTrace*> cores_;
};

}  // namespace npusim::stack::runtime
