#include "hw/mem/trace_replay.hpp"

#include <algorithm>

namespace npusim::hw::mem {

void TraceReplayer::issue(const traces::MemTraceRecord& r) {
  // Each controller takes requests in trace order as fast as its queue accepts them; a full queue does not hold
  // up requests to other controllers.
  const double at = static_cast<double>(r.cycle);
  const MemorySystem::Timing t = memory_.access_direct(r.addr, bytes_, r.write, at, use_l2_);
  if (result_.requests == 0) result_.first_issue = at;
  ++result_.requests;
  result_.bytes += bytes_;
  if (r.write) {
    ++result_.writes;
  } else {
    ++result_.reads;
    result_.read_latency += t.done - t.accepted;
  }
  result_.last_done = std::max(result_.last_done, t.done);
}

void TraceReplayer::finish() {
  result_.last_done = std::max(result_.last_done, memory_.drain_writes());
}

}  // namespace npusim::hw::mem
