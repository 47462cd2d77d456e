// Writes one core's pipe activity into a Chrome trace: a process per core, a track per pipe, a slice per
// instruction. Back-to-back identical instructions (same name, each starting where the last ended) merge into one
// slice with a `count` argument, so long loops stay readable and the file stays small.
#pragma once

#include <array>
#include <cstdint>
#include <string>

#include "hw/core/core_engine.hpp"
#include "traces/chrome_trace.hpp"

namespace npusim::hw::chip {

class PipeTrace final : public core::TraceSink {
 public:
  PipeTrace(traces::ChromeTraceWriter& writer, const core::CoreIdentity& id, double core_hz, int sort_index);
  ~PipeTrace() override;
  void on_instr(isa::Pipe pipe, const isa::Instr& in, std::uint64_t start, std::uint64_t end) override;
  void flush();
  // The process and a pipe's track (registers the process if the core has not run yet).
  int pid() {
    if (pid_ < 0) open();
    return pid_;
  }
  int tid(isa::Pipe p) {
    if (pid_ < 0) open();
    return tid_[static_cast<int>(p)];
  }

 private:
  struct Pending {
    std::string name;
    std::uint64_t start = 0, end = 0, count = 0;
  };
  void emit(int p);
  void open();
  traces::ChromeTraceWriter& w_;
  double ns_per_cycle_;
  std::string name_;
  int sort_index_;
  int pid_ = -1;
  std::array<int, isa::kPipeCount> tid_{};
  std::array<Pending, isa::kPipeCount> pending_;
};

}  // namespace npusim::hw::chip
