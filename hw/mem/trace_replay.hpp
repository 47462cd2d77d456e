// Trace-driven mode: replays memory requests (traces/memtrace.hpp) against the memory model, through the L2 or
// straight to the HBM controllers. Requests are issued in file order, each at its cycle (core clock); each
// pseudo-channel controller takes its requests in that order as fast as its queues (hbm.queue_depth,
// hbm.bank_queue_depth) accept them, and a full queue holds up only the requests behind it in that controller;
// writes are posted into the controllers' write buffers, which drain by the end. Latency is counted from acceptance to
// the data (reads only).
#pragma once

#include <cstdint>

#include "hw/mem/memory_system.hpp"
#include "traces/memtrace.hpp"

namespace npusim::hw::mem {

struct ReplayResult {
  std::uint64_t requests = 0, reads = 0, writes = 0, bytes = 0;
  double first_issue = 0, last_done = 0;  // cycles
  double read_latency = 0;                // cycles, summed over reads
};

class TraceReplayer {
 public:
  TraceReplayer(MemorySystem& memory, bool use_l2, std::uint64_t request_bytes)
      : memory_(memory), use_l2_(use_l2), bytes_(request_bytes) {}
  void issue(const traces::MemTraceRecord& r);
  // After the last request: the writes still in the controllers' write buffers drain, and last_done covers them.
  void finish();
  const ReplayResult& result() const { return result_; }

 private:
  MemorySystem& memory_;
  bool use_l2_;
  std::uint64_t bytes_;
  ReplayResult result_;
};

}  // namespace npusim::hw::mem
