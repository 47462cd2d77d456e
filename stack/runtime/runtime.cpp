#include "stack/runtime/runtime.hpp"

#include "common/util/error.hpp"

namespace npusim::stack::runtime {

namespace {
// Driver rings live at the top of device memory, outside the allocator's range.
constexpr std::uint32_t kRingEntries = 256;
constexpr std::uint32_t kMaxStreams = 64;
constexpr std::uint64_t kRingRegion = (kMaxStreams + 1) * (fw::ts::kRingHeaderBytes + kRingEntries * fw::ts::kDescriptorBytes);
}  // namespace

Device::Device(const config::ChipConfig& cfg, hw::core::Mode mode)
    : cfg_(cfg), chip_(std::make_unique<hw::chip::Chip>(cfg, mode)) {
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

Stream Device::create_stream() {
  if (sqs_.size() >= kMaxStreams) throw InputError("at most " + std::to_string(kMaxStreams) + " streams");
  const std::uint64_t base = ts_->cq_base() + (sqs_.size() + 1) * fw::ts::TaskRing::footprint(kRingEntries);
  sqs_.push_back(fw::ts::TaskRing::create(chip_->memory(), base, kRingEntries));
  ts_->add_stream(base);
  return Stream{static_cast<std::uint16_t>(sqs_.size() - 1)};
}

Event Device::create_event() { return Event{next_event_++}; }

void Device::drain_completions() {
  while (!cq_->empty()) {
    cq_->pop();
    ++completed_;
  }
}

void Device::submit(fw::ts::TaskDescriptor d, Stream s, double host_cost_ns) {
  if (s.id >= sqs_.size()) throw InputError("stream " + std::to_string(s.id) + " does not exist");
  host_spends(host_cost_ns);
  d.stream = s.id;
  d.task_id = next_task_++;
  // A full ring: the driver waits for completions to make room.
  while (sqs_[s.id].full()) {
    sc_core::wait(ts_->completed());
    drain_completions();
  }
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
  submit(d, s, cfg_.host.memcpy_overhead);
}

void Device::memcpy_async(void* dst, std::uint64_t src, std::uint64_t bytes, Stream s) {
  fw::ts::TaskDescriptor d;
  d.type = fw::ts::TaskType::kMemcpy;
  d.copy = fw::ts::CopyKind::kDeviceToHost;
  d.src = src;
  d.dst = static_cast<std::uint64_t>(reinterpret_cast<std::uintptr_t>(dst));
  d.bytes = bytes;
  submit(d, s, cfg_.host.memcpy_overhead);
}

void Device::memcpy_d2d_async(std::uint64_t dst, std::uint64_t src, std::uint64_t bytes, Stream s) {
  fw::ts::TaskDescriptor d;
  d.type = fw::ts::TaskType::kMemcpy;
  d.copy = fw::ts::CopyKind::kDeviceToDevice;
  d.src = src;
  d.dst = dst;
  d.bytes = bytes;
  submit(d, s, cfg_.host.memcpy_overhead);
}

void Device::launch(const std::string& name, fw::kernel::KernelType type, std::uint32_t block_dim,
                    std::function<void()> body, Stream s) {
  kernels_.push_back(fw::ts::KernelEntry{name, type, std::move(body)});
  fw::ts::TaskDescriptor d;
  d.type = fw::ts::TaskType::kKernel;
  d.kernel = static_cast<std::uint32_t>(kernels_.size() - 1);
  d.block_dim = block_dim;
  submit(d, s, cfg_.host.launch_overhead);
}

void Device::record(Event e, Stream s) {
  fw::ts::TaskDescriptor d;
  d.type = fw::ts::TaskType::kEventRecord;
  d.event = e.id;
  submit(d, s, cfg_.host.event_overhead);
}

void Device::wait(Event e, Stream s) {
  fw::ts::TaskDescriptor d;
  d.type = fw::ts::TaskType::kEventWait;
  d.event = e.id;
  submit(d, s, cfg_.host.event_overhead);
}

void Device::synchronize() {
  host_spends(cfg_.host.sync_overhead);
  drain_completions();
  while (completed_ < next_task_) {
    sc_core::wait(ts_->completed());
    drain_completions();
  }
}

void Device::run(const std::function<void(Device&)>& host) {
  chip_->control_cpu().start([this](hw::chip::ControlCpu& cpu) { ts_->run(cpu); });
  sc_core::sc_spawn([this, &host] {
    try {
      host(*this);
      synchronize();
    } catch (const sc_core::sc_unwind_exception&) {
      throw;
    } catch (...) {
      host_error_ = std::current_exception();
      sc_core::sc_stop();
    }
  });
  sc_core::sc_report_handler::set_actions(sc_core::SC_INFO, sc_core::SC_DO_NOTHING);
  sc_core::sc_start();
  if (host_error_) std::rethrow_exception(host_error_);
  if (chip_->control_cpu().error()) std::rethrow_exception(chip_->control_cpu().error());
  for (std::size_t c = 0; c < chip_->core_count(); ++c)
    if (chip_->core(c).error()) std::rethrow_exception(chip_->core(c).error());
  if (completed_ < next_task_) {
    throw hw::core::KernelError("the device stopped with " + std::to_string(next_task_ - completed_) +
                                " task(s) unfinished (a kernel deadlocked or an event is never recorded)");
  }
}

}  // namespace npusim::stack::runtime
