// Writes one core's pipe activity into a Chrome trace: a process per core, a track per pipe, a slice per
// instruction. Back-to-back identical instructions (same name, each starting where the last ended) merge into one
// slice with a `count` argument, so long loops stay readable and the file stays small. A SliceFilter shared by the
// cores' tracers keeps only the instructions of a time window and stops at a number of slices.
#pragma once

#include <array>
#include <cstdint>
#include <limits>
#include <string>

#include "hw/core/core_engine.hpp"
#include "traces/chrome_trace.hpp"

namespace npusim::hw::chip {

struct SliceFilter {
  // Instructions overlapping [start_cycle, end_cycle) are traced.
  std::uint64_t start_cycle = 0;
  std::uint64_t end_cycle = std::numeric_limits<std::uint64_t>::max();
  std::uint64_t limit = std::numeric_limits<std::uint64_t>::max();  // slices written, over every core
  std::uint64_t written = 0;
  std::uint64_t dropped = 0;  // slices past the limit, left out
};

class PipeTrace final : public core::TraceSink {
 public:
  // `filter` (may be null: everything) outlives the tracer.
  PipeTrace(traces::ChromeTraceWriter& writer, const core::CoreIdentity& id, double core_hz, int sort_index,
            SliceFilter* filter = nullptr);
  ~PipeTrace() override;
  void on_instr(isa::Pipe pipe, const isa::Instr& in, std::uint64_t start, std::uint64_t end) override;
  // Flags as instant events: `set_flag` on the setting pipe's track when it fires; `wait_flag` on the waiting
  // pipe's track when the wait ends, for waits that stalled (with the cycles waited). Both name the flag
  // ("MTE2->V #0") and the set's number on the core, which pairs them.
  std::uint64_t on_flag_set(isa::Pipe src, isa::Pipe dst, std::uint32_t id, std::uint64_t at) override;
  void on_flag_wait(isa::Pipe src, isa::Pipe dst, std::uint32_t id, std::uint64_t from, std::uint64_t to,
                    std::uint64_t seq) override;
  void flush();
  // Whether the core's process is registered (an instruction of it was traced).
  bool opened() const { return pid_ >= 0; }
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
  // Whether an event over [from, to] passes the window and the limit (counting it when it does).
  bool admit(std::uint64_t from, std::uint64_t to);
  traces::ChromeTraceWriter& w_;
  double ns_per_cycle_;
  std::string name_;
  int sort_index_;
  int pid_ = -1;
  std::array<int, isa::kPipeCount> tid_{};
  std::array<Pending, isa::kPipeCount> pending_;
  std::uint64_t flag_sets_ = 0;  // the core's flag sets so far, over its blocks and kernels
  SliceFilter* filter_;
};

}  // namespace npusim::hw::chip
