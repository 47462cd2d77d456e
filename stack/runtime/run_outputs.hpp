// The --trace / --summary outputs of a run through the runtime, shared by every host program (the CLI's commands,
// the ACL host API): the trace's core tracks are attached while the chip is built, the rest is written at the end.
#pragma once

#include <limits>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "hw/chip/pipe_trace.hpp"
#include "stack/runtime/runtime.hpp"
#include "traces/chrome_trace.hpp"

namespace npusim::stack::runtime {

// How much of a run the trace shows (docs/runtime.md, "Trace levels").
enum class TraceLevel {
  kTask,   // the host's API calls, the streams' tasks, the memory counters
  kBlock,  // and per core a slice per block it ran
  kInstr,  // and per pipe a slice per instruction (runs merged), on the cores and time window chosen
};

struct TraceOptions {
  TraceLevel level = TraceLevel::kInstr;
  // --trace-cores: "all", or core names and ranges ("aic0,aiv0-3"); empty: the chip's first core group (aic0 and
  // its vector cores, or core0).
  std::string cores;
  std::string cores_option = "--trace-cores";  // where `cores` came from, for its errors
  // --trace-window START:END, microseconds of device time; instructions overlapping it are traced.
  double window_start_us = 0;
  double window_end_us = std::numeric_limits<double>::infinity();
  std::uint64_t max_slices = 2'000'000;  // --trace-limit: instruction slices, over every core
};

// "task", "block" or "instr"; InputError naming `option` otherwise.
TraceLevel parse_trace_level(const std::string& text, const std::string& option);
// "START:END" in microseconds, either side may be empty; InputError naming `option` otherwise.
void parse_trace_window(const std::string& text, const std::string& option, TraceOptions& out);

// The files a run writes besides its report; an empty path is not written.
struct OutputPaths {
  std::string trace;    // --trace: the Chrome/Perfetto trace (gzip-compressed when the name ends in .gz)
  std::string summary;  // --summary: the op summary CSV
  std::string stats;    // --stats: every component's statistics, JSON (docs/metrics.md, "Statistics")
  TraceOptions trace_options;
};

class RunOutputs {
 public:
  // Opens the trace file now (a bad path or trace option is an error before anything is simulated). Two outputs
  // naming one file are refused (the second would overwrite the first).
  RunOutputs(OutputPaths paths, const config::ChipConfig& chip);
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
  std::set<std::string> instr_cores_;  // the cores whose pipes are traced
  hw::chip::SliceFilter filter_;
  std::unique_ptr<traces::ChromeTraceWriter> writer_;
  std::vector<std::unique_ptr<hw::chip::PipeTrace>> tracers_;
  std::map<std::uint32_t, hw::chip::PipeTrace*> cores_;
};

// {"config", "stats": the registry's values, nested; "units": each path's unit and doc}; InputError naming --stats
// when the file cannot be written.
void write_stats(const std::string& path, const Device& dev);

}  // namespace npusim::stack::runtime
