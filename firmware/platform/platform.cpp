#include "firmware/platform/platform.hpp"

#include <chrono>
#if defined(__SANITIZE_ADDRESS__)
#include <pthread.h>
#include <sanitizer/common_interface_defs.h>
#endif
#include <set>

#include "common/util/error.hpp"
#include "firmware/ts/dispatch.hpp"

namespace npusim::fw {

namespace {

// Under AddressSanitizer: SystemC's coroutine switches (QuickThreads in Debian's build, not annotated for the
// sanitizers) can leave ASan believing the main thread runs on a coroutine's stack; a C++ throw after the simulation
// then trips ASan's own no-return handler (a false "stack-buffer-overflow" in sigaltstack, google/sanitizers#189).
// Once sc_start has returned we are on the main thread's stack, and ASan is told so (a fiber switch to it).
void back_on_main_stack() {
#if defined(__SANITIZE_ADDRESS__)
  pthread_attr_t attr;
  if (pthread_getattr_np(pthread_self(), &attr) != 0) return;
  void* bottom = nullptr;
  std::size_t size = 0;
  pthread_attr_getstack(&attr, &bottom, &size);
  pthread_attr_destroy(&attr);
  void* fake_stack = nullptr;
  __sanitizer_start_switch_fiber(&fake_stack, bottom, size);
  __sanitizer_finish_switch_fiber(fake_stack, nullptr, nullptr);
#endif
}

constexpr std::uint64_t kRingRegion =
    (Platform::kMaxStreams + 1) * (ts::kRingHeaderBytes + Platform::kRingEntries * ts::kDescriptorBytes);

}  // namespace

Platform::Platform(const config::ChipConfig& cfg, hw::core::Mode mode, const hw::chip::Chip::TraceFactory& trace)
    : cfg_(cfg), chip_(std::make_unique<hw::chip::Chip>(cfg, mode, trace)) {
  ring_base_ = (cfg.hbm.capacity - kRingRegion) / 4096 * 4096;
  ts_ = std::make_unique<ts::TaskScheduler>(*chip_, kernels_, ring_base_, kRingEntries);
}

Platform::~Platform() = default;

std::uint64_t Platform::submission_ring(std::size_t s) const {
  if (s >= kMaxStreams) throw InputError("at most " + std::to_string(kMaxStreams) + " streams");
  return ring_base_ + (s + 1) * ts::TaskRing::footprint(kRingEntries);
}

std::uint32_t Platform::add_kernel(ts::KernelEntry entry) {
  kernels_.push_back(std::move(entry));
  return static_cast<std::uint32_t>(kernels_.size() - 1);
}

void Platform::start() {
  chip_->control_cpu().start([this](hw::chip::ControlCpu&) { ts_->run(); });
  sc_core::sc_report_handler::set_actions(sc_core::SC_INFO, sc_core::SC_DO_NOTHING);
  // After a failure several processes may stop the simulation; SystemC's warning about the second stop would land
  // on stdout (which carries the --json report), and the first stop's error says what happened.
  sc_core::sc_report_handler::set_actions("sc_stop has already been called", sc_core::SC_DO_NOTHING);
}

void Platform::check_errors() const {
  if (chip_->control_cpu().error()) std::rethrow_exception(chip_->control_cpu().error());
  for (std::size_t c = 0; c < chip_->core_count(); ++c)
    if (chip_->core(c).error()) std::rethrow_exception(chip_->core(c).error());
}

std::string Platform::describe_blocked_cores() const {
  std::string stuck;
  for (std::uint32_t c = 0; c < chip_->core_count(); ++c) {
    const hw::core::AiCore& core = chip_->core(c);
    if (!core.busy()) continue;
    const hw::core::CoreEngine* e = core.engine();
    stuck += (stuck.empty() ? "" : "; ") + core.identity().name + " (block " +
             std::to_string(e ? e->identity().block : 0) + "): " + (e ? e->describe_blocked() : std::string("?"));
  }
  return stuck;
}

kernel::LaunchResult Platform::run_kernel(const kernel::LaunchSpec& spec) {
  if (spec.block_dim == 0) throw InputError("kernel " + spec.name + ": block_dim must be at least 1");
  if (ts::block_slots(*chip_, spec.type).empty())
    throw InputError("kernel " + spec.name + ": the chip has no cores of the kernel's type");
  ts::TaskDescriptor d;
  d.type = ts::TaskType::kKernel;
  d.kernel = add_kernel(ts::KernelEntry{spec.name, spec.type, spec.body});
  d.block_dim = spec.block_dim;
  const std::uint64_t sq_base = submission_ring(0);
  ts::TaskRing sq = ts::TaskRing::create(chip_->memory(), sq_base, kRingEntries);
  ts_->add_stream(sq_base);
  start();
  sc_core::sc_spawn([this, &sq, d] {  // the host: submit, ring the doorbell, await the completion
    sq.push(d);
    ts_->doorbell();
    sc_core::wait(ts_->completed());
  });
  const auto t0 = std::chrono::steady_clock::now();
  sc_core::sc_start();
  back_on_main_stack();
  if (hw::mem::MemorySystem* m = chip_->memory_system()) m->drain_writes();  // statistics count every write
  kernel::LaunchResult result;
  result.wall_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  check_errors();
  // Out of events while cores still wait: a deadlock between cores (cross-core flags nobody sets).
  if (const std::string stuck = describe_blocked_cores(); !stuck.empty()) {
    // Unwind the stuck kernels' stacks (their objects are destroyed) from a process, where kills are allowed.
    sc_core::sc_spawn([this] {
      for (std::uint32_t c = 0; c < chip_->core_count(); ++c)
        if (chip_->core(c).busy()) chip_->core(c).abandon();
    });
    sc_core::sc_start();
    back_on_main_stack();
    throw hw::core::KernelError("deadlock: no core can make progress: " + stuck);
  }
  const std::vector<ts::TaskRecord>& records = ts_->records();
  if (records.empty() || records[0].end_ns <= 0) {
    const std::string why = ts_->describe_stuck();
    throw hw::core::KernelError("kernel " + spec.name + " did not finish" + (why.empty() ? std::string() : ": " + why));
  }
  result.runs = records[0].runs;
  std::set<std::uint32_t> cores;
  result.start = result.runs.empty() ? 0 : UINT64_MAX;
  for (const kernel::CoreRun& r : result.runs) {
    result.start = std::min(result.start, r.start);
    result.end = std::max(result.end, r.end);
    result.instructions += r.instructions;
    cores.insert(r.core_index);
  }
  result.cores_used = static_cast<std::uint32_t>(cores.size());
  return result;
}

}  // namespace npusim::fw
