#include "stack/runtime/runtime.hpp"

#include "common/util/error.hpp"

namespace npusim::stack::runtime {

Device::Device(const config::ChipConfig& cfg, hw::core::Mode mode, const hw::chip::Chip::TraceFactory& trace)
    : cfg_(cfg), platform_(std::make_unique<fw::Platform>(cfg, mode, trace)) {
  allocator_ = std::make_unique<DeviceAllocator>(0, platform_->ring_base());
  driver_ = std::make_unique<driver::Driver>(*platform_, cfg.driver);
  driver_->on_completion([this](std::uint32_t task) {
    if (task < task_done_.size()) task_done_[task] = 1;
    ++completed_;
  });
  driver_->on_drained([this] {
    if (progress_) progress_(completed_, next_task_, now_ns());
  });
}

Device::~Device() = default;

void Device::host_spends(double ns) {
  if (ns > 0) sc_core::wait(sc_core::sc_time(ns, sc_core::SC_NS));
}

std::uint64_t Device::malloc(std::uint64_t bytes) { return allocator_->allocate(bytes); }
void Device::free(std::uint64_t addr) { allocator_->free(addr); }

Stream Device::create_stream(Priority priority) {
  const std::uint16_t id = driver_->open_stream(static_cast<int>(priority));
  stream_last_task_.push_back(UINT32_MAX);
  stream_destroyed_.push_back(false);
  return Stream{id};
}

void Device::destroy_stream(Stream s) {
  if (s.id >= driver_->streams() || stream_destroyed_[s.id])
    throw InputError("destroy of stream " + std::to_string(s.id) + ", which does not exist");
  synchronize(s);
  stream_destroyed_[s.id] = true;
}

Event Device::create_event() { return Event{next_event_++}; }

void Device::submit(fw::ts::TaskDescriptor d, Stream s, double host_cost_ns, const std::string& api) {
  if (s.id >= driver_->streams()) throw InputError(api + ": stream " + std::to_string(s.id) + " does not exist");
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
  driver_->submit(d);
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
  fw::ts::TaskDescriptor d;
  d.type = fw::ts::TaskType::kKernel;
  d.kernel = platform_->add_kernel(fw::ts::KernelEntry{name, type, std::move(body)});
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
  driver_->drain();
  while (completed_ < next_task_) driver_->wait_for_completion();
  api_.push_back(ApiCall{"synchronizeDevice", start, now_ns(), -1});
}

void Device::synchronize(Stream s) {
  host_spends(cfg_.host.sync_overhead);
  driver_->drain();
  const std::uint32_t last = s.id < stream_last_task_.size() ? stream_last_task_[s.id] : UINT32_MAX;
  if (last == UINT32_MAX) return;
  while (!task_done_[last]) driver_->wait_for_completion();
}

void Device::synchronize(Event e) {
  host_spends(cfg_.host.sync_overhead);
  driver_->drain();
  if (e.id >= event_task_.size() || event_task_[e.id] < 0)
    throw InputError("synchronize on event " + std::to_string(e.id) + ", which was never recorded");
  while (!task_done_[static_cast<std::size_t>(event_task_[e.id])]) driver_->wait_for_completion();
}

bool Device::query(Event e) {
  host_spends(cfg_.host.event_overhead);
  driver_->drain();
  return e.id < event_task_.size() && event_task_[e.id] >= 0 && task_done_[static_cast<std::size_t>(event_task_[e.id])];
}

double Device::elapsed_ms(Event start, Event end) {
  driver_->drain();
  auto recorded_at = [&](Event e) {
    if (e.id >= event_task_.size() || event_task_[e.id] < 0 || !task_done_[static_cast<std::size_t>(event_task_[e.id])])
      throw InputError("elapsed time: event " + std::to_string(e.id) + " has not completed");
    for (const auto& r : tasks())
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
  platform_->start();
  sc_core::sc_spawn([this, &host] {
    host_or_stop([&] {
      host(*this);
      synchronize();
    });
  });
  sc_core::sc_start();
  drain_memory();
  check_finished();
}

void Device::drain_memory() {
  if (hw::mem::MemorySystem* m = chip().memory_system()) m->drain_writes();
}

void Device::check_finished() {
  if (host_error_) std::rethrow_exception(host_error_);
  platform_->check_errors();
  if (completed_ < next_task_) {
    std::string why = platform_->scheduler().describe_stuck();
    if (const std::string cores = platform_->describe_blocked_cores(); !cores.empty())
      why += (why.empty() ? "" : "; ") + cores;
    throw hw::core::KernelError("the device stopped with " + std::to_string(next_task_ - completed_) +
                                " task(s) unfinished" + (why.empty() ? std::string() : ": " + why));
  }
}

void Device::begin() {
  if (phase_ != Phase::kIdle) throw std::logic_error("Device::begin: the device has already run");
  phase_ = Phase::kStepping;
  platform_->start();
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
  drain_memory();
  if (sc_core::sc_get_status() != sc_core::SC_PAUSED) stopped_ = true;
  try {
    platform_->check_errors();
  } catch (...) {
    stopped_ = true;
    throw;
  }
  if (call_error_) std::rethrow_exception(call_error_);
  if (stopped_) {
    const std::string why = platform_->scheduler().describe_stuck();
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
  drain_memory();
  stopped_ = true;
  check_finished();
}

void Device::annotate(std::uint32_t task, std::vector<std::string> nodes) {
  if (task >= task_nodes_.size()) task_nodes_.resize(task + 1);
  task_nodes_[task] = std::move(nodes);
}

const std::vector<std::string>& Device::task_nodes(std::uint32_t task) const {
  static const std::vector<std::string> none;
  return task < task_nodes_.size() ? task_nodes_[task] : none;
}

}  // namespace npusim::stack::runtime
