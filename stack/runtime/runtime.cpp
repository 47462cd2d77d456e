#include "stack/runtime/runtime.hpp"

#include "common/util/error.hpp"

namespace npusim::stack::runtime {

namespace {
// Driver rings live at the top of device memory, outside the allocator's range.
constexpr std::uint32_t kRingEntries = 256;
constexpr std::uint32_t kMaxStreams = 64;
constexpr std::uint64_t kRingRegion = (kMaxStreams + 1) * (fw::ts::kRingHeaderBytes + kRingEntries * fw::ts::kDescriptorBytes);
}  // namespace

Device::Device(const config::ChipConfig& cfg, hw::core::Mode mode, const hw::chip::Chip::TraceFactory& trace)
    : cfg_(cfg), chip_(std::make_unique<hw::chip::Chip>(cfg, mode, trace)) {
  const std::uint64_t ring_base = (cfg.hbm.capacity - kRingRegion) / 4096 * 4096;
  allocator_ = std::make_unique<DeviceAllocator>(0, ring_base);
  ts_ = std::make_unique<fw::ts::TaskScheduler>(*chip_, kernels_, ring_base, kRingEntries);
  cq_ = std::make_unique<fw::ts::TaskRing>(fw::ts::TaskRing::attach(chip_->memory(), ring_base));
}

Device::~Device() = default;

void Device::host_spends(double ns) {
  if (ns > 0) sc_core::wait(sc_core::sc_time(ns, sc_core::SC_NS));
}

std::uint64_t Device::malloc(std::uint64_t bytes) { return allocator_->allocate(bytes); }
void Device::free(std::uint64_t addr) { allocator_->free(addr); }

Stream Device::create_stream(Priority priority) {
  if (sqs_.size() >= kMaxStreams) throw InputError("at most " + std::to_string(kMaxStreams) + " streams");
  const std::uint64_t base = ts_->cq_base() + (sqs_.size() + 1) * fw::ts::TaskRing::footprint(kRingEntries);
  sqs_.push_back(fw::ts::TaskRing::create(chip_->memory(), base, kRingEntries));
  ts_->add_stream(base, static_cast<int>(priority));
  stream_last_task_.push_back(UINT32_MAX);
  stream_destroyed_.push_back(false);
  return Stream{static_cast<std::uint16_t>(sqs_.size() - 1)};
}

void Device::destroy_stream(Stream s) {
  if (s.id >= sqs_.size() || stream_destroyed_[s.id]) throw InputError("destroy of stream " + std::to_string(s.id) + ", which does not exist");
  synchronize(s);
  stream_destroyed_[s.id] = true;
}

Event Device::create_event() { return Event{next_event_++}; }

void Device::drain_completions() {
  bool took = false;
  for (; !cq_->empty(); took = true) {
    const fw::ts::TaskDescriptor c = cq_->pop();
    if (c.task_id < task_done_.size()) task_done_[c.task_id] = 1;
    ++completed_;
  }
  if (took) ts_->completions_taken();
  if (progress_) progress_(completed_, next_task_, now_ns());
}

void Device::wait_for_completion() {
  if (cfg_.driver.completion == "poll") {
    // Read the completion ring every poll_interval until something is there.
    while (cq_->empty()) host_spends(cfg_.driver.poll_interval);
  } else {
    sc_core::wait(ts_->completed());
    host_spends(cfg_.driver.interrupt_latency);
  }
  drain_completions();
}

void Device::submit(fw::ts::TaskDescriptor d, Stream s, double host_cost_ns, const std::string& api) {
  if (s.id >= sqs_.size()) throw InputError(api + ": stream " + std::to_string(s.id) + " does not exist");
  if (stream_destroyed_[s.id]) throw InputError(api + ": stream " + std::to_string(s.id) + " was destroyed");
  ApiCall call{api, now_ns(), 0, next_task_};
  host_spends(host_cost_ns);
  call.end_ns = now_ns();
  api_.push_back(call);
  submit_ns_.push_back(now_ns());
  d.stream = s.id;
  d.task_id = next_task_++;
  task_done_.push_back(0);
  stream_last_task_[s.id] = d.task_id;
  if (d.type == fw::ts::TaskType::kEventRecord) {
    if (event_task_.size() <= d.event) event_task_.resize(d.event + 1, -1);
    event_task_[d.event] = d.task_id;
  }
  // A full ring: the driver waits for completions to make room.
  while (sqs_[s.id].full()) wait_for_completion();
  sqs_[s.id].push(d);
  ts_->doorbell();
}

void Device::memcpy_async(std::uint64_t dst, const void* src, std::uint64_t bytes, Stream s) {
  fw::ts::TaskDescriptor d;
  d.type = fw::ts::TaskType::kMemcpy;
  d.copy = fw::ts::CopyKind::kHostToDevice;
  d.src = static_cast<std::uint64_t>(reinterpret_cast<std::uintptr_t>(src));
  d.dst = dst;
  d.bytes = bytes;
  submit(d, s, cfg_.host.memcpy_overhead, "memcpyAsync H2D");
}

void Device::memcpy_async(void* dst, std::uint64_t src, std::uint64_t bytes, Stream s) {
  fw::ts::TaskDescriptor d;
  d.type = fw::ts::TaskType::kMemcpy;
  d.copy = fw::ts::CopyKind::kDeviceToHost;
  d.src = src;
  d.dst = static_cast<std::uint64_t>(reinterpret_cast<std::uintptr_t>(dst));
  d.bytes = bytes;
  submit(d, s, cfg_.host.memcpy_overhead, "memcpyAsync D2H");
}

void Device::memcpy_d2d_async(std::uint64_t dst, std::uint64_t src, std::uint64_t bytes, Stream s) {
  fw::ts::TaskDescriptor d;
  d.type = fw::ts::TaskType::kMemcpy;
  d.copy = fw::ts::CopyKind::kDeviceToDevice;
  d.src = src;
  d.dst = dst;
  d.bytes = bytes;
  submit(d, s, cfg_.host.memcpy_overhead, "memcpyAsync D2D");
}

void Device::launch(const std::string& name, fw::kernel::KernelType type, std::uint32_t block_dim,
                    std::function<void()> body, Stream s) {
  kernels_.push_back(fw::ts::KernelEntry{name, type, std::move(body)});
  fw::ts::TaskDescriptor d;
  d.type = fw::ts::TaskType::kKernel;
  d.kernel = static_cast<std::uint32_t>(kernels_.size() - 1);
  d.block_dim = block_dim;
  submit(d, s, cfg_.host.launch_overhead, "launch " + name);
}

void Device::record(Event e, Stream s) {
  fw::ts::TaskDescriptor d;
  d.type = fw::ts::TaskType::kEventRecord;
  d.event = e.id;
  submit(d, s, cfg_.host.event_overhead, "eventRecord");
}

void Device::wait(Event e, Stream s) {
  fw::ts::TaskDescriptor d;
  d.type = fw::ts::TaskType::kEventWait;
  d.event = e.id;
  submit(d, s, cfg_.host.event_overhead, "streamWaitEvent");
}

void Device::synchronize() {
  const double start = now_ns();
  host_spends(cfg_.host.sync_overhead);
  drain_completions();
  while (completed_ < next_task_) wait_for_completion();
  api_.push_back(ApiCall{"synchronizeDevice", start, now_ns(), -1});
}

void Device::synchronize(Stream s) {
  host_spends(cfg_.host.sync_overhead);
  drain_completions();
  const std::uint32_t last = s.id < stream_last_task_.size() ? stream_last_task_[s.id] : UINT32_MAX;
  if (last == UINT32_MAX) return;
  while (!task_done_[last]) wait_for_completion();
}

void Device::synchronize(Event e) {
  host_spends(cfg_.host.sync_overhead);
  drain_completions();
  if (e.id >= event_task_.size() || event_task_[e.id] < 0)
    throw InputError("synchronize on event " + std::to_string(e.id) + ", which was never recorded");
  while (!task_done_[static_cast<std::size_t>(event_task_[e.id])]) wait_for_completion();
}

bool Device::query(Event e) {
  host_spends(cfg_.host.event_overhead);
  drain_completions();
  return e.id < event_task_.size() && event_task_[e.id] >= 0 && task_done_[static_cast<std::size_t>(event_task_[e.id])];
}

double Device::elapsed_ms(Event start, Event end) {
  drain_completions();
  auto recorded_at = [&](Event e) {
    if (e.id >= event_task_.size() || event_task_[e.id] < 0 || !task_done_[static_cast<std::size_t>(event_task_[e.id])])
      throw InputError("elapsed time: event " + std::to_string(e.id) + " has not completed");
    for (const auto& r : ts_->records())
      if (r.task_id == static_cast<std::uint32_t>(event_task_[e.id])) return r.end_ns;
    return 0.0;
  };
  return (recorded_at(end) - recorded_at(start)) / 1e6;
}

void Device::memcpy(std::uint64_t dst, const void* src, std::uint64_t bytes, Stream s) {
  memcpy_async(dst, src, bytes, s);
  synchronize(s);
}

void Device::memcpy(void* dst, std::uint64_t src, std::uint64_t bytes, Stream s) {
  memcpy_async(dst, src, bytes, s);
  synchronize(s);
}

void Device::memcpy_d2d(std::uint64_t dst, std::uint64_t src, std::uint64_t bytes, Stream s) {
  memcpy_d2d_async(dst, src, bytes, s);
  synchronize(s);
}

void Device::run(const std::function<void(Device&)>& host) {
  start_firmware();
  sc_core::sc_spawn([this, &host] {
    host_or_stop([&] {
      host(*this);
      synchronize();
    });
  });
  sc_core::sc_start();
  check_finished();
}

void Device::start_firmware() {
  chip_->control_cpu().start([this](hw::chip::ControlCpu&) { ts_->run(); });
  sc_core::sc_report_handler::set_actions(sc_core::SC_INFO, sc_core::SC_DO_NOTHING);
  // After a failure several processes may stop the simulation; SystemC's warning about the second stop would land
  // on stdout (which carries the --json report), and the first stop's error says what happened.
  sc_core::sc_report_handler::set_actions("sc_stop has already been called", sc_core::SC_DO_NOTHING);
}

void Device::check_finished() {
  if (host_error_) std::rethrow_exception(host_error_);
  check_device_errors();
  if (completed_ < next_task_) {
    const std::string why = ts_->describe_stuck();
    throw hw::core::KernelError("the device stopped with " + std::to_string(next_task_ - completed_) +
                                " task(s) unfinished" + (why.empty() ? std::string() : ": " + why));
  }
}

void Device::check_device_errors() {
  if (chip_->control_cpu().error()) std::rethrow_exception(chip_->control_cpu().error());
  for (std::size_t c = 0; c < chip_->core_count(); ++c)
    if (chip_->core(c).error()) std::rethrow_exception(chip_->core(c).error());
}

void Device::begin() {
  if (phase_ != Phase::kIdle) throw std::logic_error("Device::begin: the device has already run");
  phase_ = Phase::kStepping;
  start_firmware();
  sc_core::sc_spawn([this] {
    for (;;) {
      while (!pending_ && !ending_) sc_core::wait(command_);
      if (!pending_) break;
      const std::function<void(Device&)> f = std::move(pending_);
      pending_ = nullptr;
      try {
        f(*this);
      } catch (const sc_core::sc_unwind_exception&) {
        throw;
      } catch (...) {
        call_error_ = std::current_exception();
      }
      sc_core::sc_pause();
    }
    host_or_stop([this] { synchronize(); });
  });
}

void Device::host_or_stop(const std::function<void()>& f) {
  try {
    f();
  } catch (const sc_core::sc_unwind_exception&) {
    throw;  // SystemC unwinding the host thread
  } catch (...) {
    host_error_ = std::current_exception();
    sc_core::sc_stop();
  }
}

void Device::call(const std::function<void(Device&)>& f) {
  if (phase_ != Phase::kStepping) throw std::logic_error("Device::call outside begin() .. end()");
  if (stopped_) throw hw::core::KernelError("the device stopped after an earlier error");
  pending_ = f;
  call_error_ = nullptr;
  command_.notify(sc_core::SC_ZERO_TIME);
  sc_core::sc_start();
  if (sc_core::sc_get_status() != sc_core::SC_PAUSED) stopped_ = true;
  try {
    check_device_errors();
  } catch (...) {
    stopped_ = true;
    throw;
  }
  if (call_error_) std::rethrow_exception(call_error_);
  if (stopped_) {
    const std::string why = ts_->describe_stuck();
    throw hw::core::KernelError("the device stopped during the call" + (why.empty() ? std::string() : ": " + why));
  }
}

void Device::end() {
  if (phase_ != Phase::kStepping) throw std::logic_error("Device::end without begin()");
  phase_ = Phase::kEnded;
  if (stopped_) return;
  ending_ = true;
  command_.notify(sc_core::SC_ZERO_TIME);
  sc_core::sc_start();
  stopped_ = true;
  check_finished();
}

}  // namespace npusim::stack::runtime
