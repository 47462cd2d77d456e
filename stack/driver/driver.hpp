// The driver (DESIGN.md, "Runtime, driver, firmware"): the host's side of the rings in device memory. Each stream
// has a submission ring; the driver writes task descriptors into it and rings the firmware's doorbell, waiting for
// completions when a ring is full (back-pressure, never an error). Completion notices come by interrupt (the
// firmware's completion event, then driver.interrupt_latency of host time) or by polling the completion ring every
// driver.poll_interval (key driver.completion); draining the ring hands each completed task to the runtime and tells
// the firmware it may write held-back completions. Everything here runs on the host's simulated thread.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "common/config/chip_config.hpp"
#include "firmware/platform/platform.hpp"
#include "firmware/ts/task_ring.hpp"

namespace npusim::stack::driver {

class Driver {
 public:
  Driver(fw::Platform& platform, const config::DriverParams& params);

  // Called with each completed task's id as the ring is drained, and once after every drain.
  void on_completion(std::function<void(std::uint32_t task_id)> f) { on_completion_ = std::move(f); }
  void on_drained(std::function<void()> f) { on_drained_ = std::move(f); }

  // A submission ring for a new stream, registered with the firmware; returns the stream's index. InputError past
  // fw::Platform::kMaxStreams.
  std::uint16_t open_stream(int priority);
  std::size_t streams() const { return sqs_.size(); }
  // The descriptor into its stream's ring (d.stream), then the doorbell; a full ring first waits for completions.
  void submit(const fw::ts::TaskDescriptor& d);
  // Takes every completion in the completion ring.
  void drain();
  // Waits for one completion notice (interrupt or poll), then drains.
  void wait_for_completion();

 private:
  static void host_spends(double ns);

  fw::Platform& platform_;
  config::DriverParams params_;
  std::vector<fw::ts::TaskRing> sqs_;
  fw::ts::TaskRing cq_;
  std::function<void(std::uint32_t)> on_completion_;
  std::function<void()> on_drained_;
};

}  // namespace npusim::stack::driver
