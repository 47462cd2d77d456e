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

// The files a run writes besides its report; an empty path is not written.
struct OutputPaths {
  std::string trace;    // --trace: the Chrome/Perfetto trace
  std::string summary;  // --summary: the op summary CSV
  std::string stats;    // --stats: every component's statistics, JSON (docs/metrics.md, "Statistics")
};

class RunOutputs {
 public:
  // Opens the trace file now (a bad path is an error before anything is simulated). Two outputs naming one file
  // are refused (the second would overwrite the first).
  RunOutputs(OutputPaths paths, double core_hz);
  // For the Device: one pipe tracer per core while tracing, none otherwise.
  hw::chip::Chip::TraceFactory trace_factory();
  // Writes the trace (runtime layout, docs/runtime.md), the op summary and the statistics; records their paths in
  // `report`.
  void finish(const Device& dev, nlohmann::json& report);
  bool tracing() const { return writer_ != nullptr; }
  const std::string& trace_path() const { return paths_.trace; }

 private:
  OutputPaths paths_;
  double core_hz_;
  std::unique_ptr<traces::ChromeTraceWriter> writer_;
  std::vector<std::unique_ptr<hw::chip::PipeTrace>> tracers_;
  std::map<std::uint32_t, hw::chip::PipeTrace*> cores_;
};

// {"config", "stats": the registry's values, nested; "units": each path's unit and doc}; InputError naming --stats
// when the file cannot be written.
void write_stats(const std::string& path, const Device& dev);

}  // namespace npusim::stack::runtime
