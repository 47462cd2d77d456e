// The runtime: an ACL-like API on the simulated timeline (DESIGN.md, "Runtime, driver, firmware"). A Device owns a
// platform (the chip with its task-scheduler firmware, firmware/platform), the device-memory allocator and the
// driver (stack/driver: the rings, the doorbell, completion by interrupt or polling). The host program runs on its
// own simulated thread: every API call costs its configured host time (keys host.*), submissions go through the
// driver, and the host overlaps the device.
// Trace and op summary of a run: stack/runtime/timeline.hpp; its --json report: stack/runtime/report.hpp.
// docs/runtime.md describes the whole layer.
#pragma once

#include <systemc>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "firmware/platform/platform.hpp"
#include "firmware/ts/task_scheduler.hpp"
#include "hw/chip/chip.hpp"
#include "stack/driver/driver.hpp"
#include "stack/runtime/device_allocator.hpp"

namespace npusim::stack::runtime {

struct Stream {
  std::uint16_t id = 0;
};
// Stream priority: the scheduler takes ready tasks from higher-priority streams first.
enum class Priority : std::uint8_t { kNormal = 0, kHigh = 1 };
struct Event {
  std::uint32_t id = 0;
};

// One host API call on the timeline (for the trace's Host process).
struct ApiCall {
  std::string name;
  double start_ns = 0, end_ns = 0;
  std::int64_t task = -1;  // the task it submitted
};

class Device {
 public:
  Device(const config::ChipConfig& cfg, hw::core::Mode mode, const hw::chip::Chip::TraceFactory& trace = {});
  ~Device();

  // Runs `host` as the host program, then simulates until every task is done. One run per process (SystemC).
  void run(const std::function<void(Device&)>& host);

  // Step by step, for a host program that is not a SystemC process (the ACL host API): begin() starts the firmware
  // and a host thread; call(f) runs f on that thread and simulates until f returns (the device keeps what it was
  // doing, and goes on with it in later calls), rethrowing what f threw; end() synchronises, lets the device
  // finish and rethrows a device error. Simulated time passes only inside calls: the host program's own work
  // between them takes none. Throws std::logic_error when used out of order or after run().
  void begin();
  void call(const std::function<void(Device&)>& f);
  void end();
  bool stopped() const { return stopped_; }  // a device error ended the simulation: no more calls

  // --- The API (call from inside the host program) ----------------------------------------------------------------
  std::uint64_t malloc(std::uint64_t bytes);
  void free(std::uint64_t addr);
  Stream create_stream(Priority priority = Priority::kNormal);
  // Waits for the stream's tasks, then retires it: later submissions to it are errors.
  void destroy_stream(Stream s);
  Event create_event();
  void memcpy_async(std::uint64_t dst, const void* src, std::uint64_t bytes, Stream s);  // host -> device
  void memcpy_async(void* dst, std::uint64_t src, std::uint64_t bytes, Stream s);        // device -> host
  void memcpy_d2d_async(std::uint64_t dst, std::uint64_t src, std::uint64_t bytes, Stream s);
  void launch(const std::string& name, fw::kernel::KernelType type, std::uint32_t block_dim,
              std::function<void()> body, Stream s);
  void record(Event e, Stream s);
  void wait(Event e, Stream s);  // the stream waits (the host does not)
  void synchronize();            // the host waits until every submitted task has completed
  void synchronize(Stream s);    // ... every task submitted to `s` so far
  void synchronize(Event e);     // ... until `e` was recorded (its record task completed)
  bool query(Event e);           // recorded yet? (costs host.event_overhead)
  // Device time between two recorded events, ms (aclrtEventElapsedTime). Throws if either is not recorded.
  double elapsed_ms(Event start, Event end);
  // Synchronous copies: submitted on `s`, then the host waits for that stream.
  void memcpy(std::uint64_t dst, const void* src, std::uint64_t bytes, Stream s);
  void memcpy(void* dst, std::uint64_t src, std::uint64_t bytes, Stream s);
  void memcpy_d2d(std::uint64_t dst, std::uint64_t src, std::uint64_t bytes, Stream s);
  double now_ns() const { return sc_core::sc_time_stamp().to_seconds() * 1e9; }

  AllocatorStats memory_stats() const { return allocator_->stats(); }  // device memory in use, peak, capacity
  hw::chip::Chip& chip() { return platform_->chip(); }
  const hw::chip::Chip& chip() const { return platform_->chip(); }
  const std::vector<fw::ts::TaskRecord>& tasks() const { return platform_->scheduler().records(); }
  const std::vector<ApiCall>& api_calls() const { return api_; }
  // When the host submitted task `id` (ns).
  double submitted_ns(std::uint32_t id) const { return id < submit_ns_.size() ? submit_ns_[id] : 0.0; }
  std::uint32_t submitted() const { return next_task_; }
  // What a task was submitted for, in the reports, op summary and trace: the graph nodes ("OpType name") a kernel
  // the graph executor launched runs. Empty for a task nobody annotated.
  void annotate(std::uint32_t task, std::vector<std::string> nodes);
  const std::vector<std::string>& task_nodes(std::uint32_t task) const;
  // Called each time the host learns of completed tasks (tasks done, tasks submitted, device time in ns), e.g.
  // for a progress display; not called when unset.
  void on_progress(std::function<void(std::uint32_t, std::uint32_t, double)> f) { progress_ = std::move(f); }

 private:
  void submit(fw::ts::TaskDescriptor d, Stream s, double host_cost_ns, const std::string& api);
  std::vector<ApiCall> api_;
  std::vector<double> submit_ns_;
  std::vector<std::vector<std::string>> task_nodes_;  // by task id (annotate)
  void host_spends(double ns);
  std::vector<std::uint32_t> stream_last_task_;
  std::vector<bool> stream_destroyed_;
  std::vector<std::uint8_t> task_done_;
  std::vector<std::int64_t> event_task_;  // the record task of each event (-1: not recorded yet)

  config::ChipConfig cfg_;
  std::unique_ptr<fw::Platform> platform_;
  std::unique_ptr<DeviceAllocator> allocator_;
  std::unique_ptr<driver::Driver> driver_;
  std::uint32_t next_task_ = 0, next_event_ = 0, completed_ = 0;
  std::exception_ptr host_error_;
  void check_finished();    // after the simulation ended: the host's error, a device error, or unfinished tasks
  void drain_memory();      // after sc_start returns: the HBM write buffers drain, so statistics count every write
  // Runs f on the host thread; what it throws becomes the host's error and stops the simulation.
  void host_or_stop(const std::function<void()>& f);
  // Stepwise mode.
  enum class Phase : std::uint8_t { kIdle, kStepping, kEnded } phase_ = Phase::kIdle;
  std::function<void(Device&)> pending_;
  bool ending_ = false, stopped_ = false;
  std::exception_ptr call_error_;
  sc_core::sc_event command_;
  std::function<void(std::uint32_t, std::uint32_t, double)> progress_;
};

}  // namespace npusim::stack::runtime
