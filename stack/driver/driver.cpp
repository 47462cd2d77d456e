#include "stack/driver/driver.hpp"

#include <systemc>

namespace npusim::stack::driver {

Driver::Driver(fw::Platform& platform, const config::DriverParams& params)
    : platform_(platform),
      params_(params),
      cq_(fw::ts::TaskRing::attach(platform.chip().memory(), platform.ring_base())) {}

void Driver::host_spends(double ns) {
  if (ns > 0) sc_core::wait(sc_core::sc_time(ns, sc_core::SC_NS));
}

std::uint16_t Driver::open_stream(int priority) {
  const std::uint64_t base = platform_.submission_ring(sqs_.size());
  sqs_.push_back(fw::ts::TaskRing::create(platform_.chip().memory(), base, fw::Platform::kRingEntries));
  platform_.scheduler().add_stream(base, priority);
  return static_cast<std::uint16_t>(sqs_.size() - 1);
}

void Driver::submit(const fw::ts::TaskDescriptor& d) {
  while (sqs_[d.stream].full()) wait_for_completion();
  sqs_[d.stream].push(d);
  platform_.scheduler().doorbell();
}

void Driver::drain() {
  bool took = false;
  for (; !cq_.empty(); took = true) {
    const fw::ts::TaskDescriptor c = cq_.pop();
    if (on_completion_) on_completion_(c.task_id);
  }
  if (took) platform_.scheduler().completions_taken();
  if (on_drained_) on_drained_();
}

void Driver::wait_for_completion() {
  if (params_.completion == "poll") {
    // Read the completion ring every poll_interval until something is there.
    while (cq_.empty()) host_spends(params_.poll_interval);
  } else {
    sc_core::wait(platform_.scheduler().completed());
    host_spends(params_.interrupt_latency);
  }
  drain();
}

}  // namespace npusim::stack::driver
