// A chip with its firmware, assembled in one place: the SystemC chip, the kernel table kernels are registered in,
// the task-scheduler firmware on the control CPU, and where in device memory its rings live (the completion ring,
// then one submission ring per stream, at the top of memory, outside what the runtime allocates). The runtime
// builds its device on a platform and talks to it through the driver (stack/driver); firmware tests and benchmarks
// run kernels on one through the same task scheduler (run_kernel), so there is one dispatcher.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "firmware/kernel/launch_spec.hpp"
#include "firmware/ts/task_scheduler.hpp"
#include "hw/chip/chip.hpp"

namespace npusim::fw {

class Platform {
 public:
  static constexpr std::uint32_t kRingEntries = 256;  // descriptors per ring
  static constexpr std::uint32_t kMaxStreams = 64;

  Platform(const config::ChipConfig& cfg, hw::core::Mode mode, const hw::chip::Chip::TraceFactory& trace = {});
  Platform(const Platform&) = delete;
  Platform& operator=(const Platform&) = delete;
  ~Platform();

  hw::chip::Chip& chip() { return *chip_; }
  const hw::chip::Chip& chip() const { return *chip_; }
  ts::TaskScheduler& scheduler() { return *ts_; }
  const ts::TaskScheduler& scheduler() const { return *ts_; }
  // The first byte of the ring region: device memory below it is the runtime's to allocate.
  std::uint64_t ring_base() const { return ring_base_; }
  // Where stream s's submission ring goes (s < kMaxStreams; the completion ring is at ring_base()).
  std::uint64_t submission_ring(std::size_t s) const;
  // Registers a kernel; descriptors name it by the index returned.
  std::uint32_t add_kernel(ts::KernelEntry entry);

  // Starts the task scheduler on the control CPU (before the simulation runs; SystemC's info reports quietened).
  void start();
  // Rethrows the error a core or the control CPU stopped with, if any.
  void check_errors() const;
  // Cores still busy when the simulation ran out of events, with what each waits for ("" when none is).
  std::string describe_blocked_cores() const;

  // Runs one kernel through the task scheduler, as a host does (a descriptor in a submission ring, the doorbell,
  // the completion awaited), and simulates until it is done: one run per process (SystemC). Throws InputError for
  // a launch the chip cannot run and hw::core::KernelError for a kernel's misuse or a deadlock between cores.
  kernel::LaunchResult run_kernel(const kernel::LaunchSpec& spec);

 private:
  config::ChipConfig cfg_;
  std::unique_ptr<hw::chip::Chip> chip_;
  std::vector<ts::KernelEntry> kernels_;
  std::uint64_t ring_base_ = 0;
  std::unique_ptr<ts::TaskScheduler> ts_;
};

}  // namespace npusim::fw
