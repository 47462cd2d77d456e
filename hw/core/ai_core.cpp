#include "hw/core/ai_core.hpp"

namespace npusim::hw::core {

CoreEngine* AiCore::current_ = nullptr;

// NOLINTNEXTLINE(performance-unnecessary-value-param): SystemC's idiom, a module name by value (it names the scope)
AiCore::AiCore(sc_core::sc_module_name name, CoreIdentity id, Env env)
    : sc_core::sc_module(name), id_(std::move(id)), env_(env) {
  SC_HAS_PROCESS(AiCore);
  // Kernels are ordinary C++ functions running on this thread's stack: give them room.
  sc_core::sc_spawn_options opts;
  opts.set_stack_size(2 * 1024 * 1024);
  thread_ = sc_core::sc_spawn([this] { run(); }, sc_core::sc_gen_unique_name("scalar"), &opts);
  if (env_.stats) register_stats(*env_.stats);
}

void AiCore::register_stats(traces::StatsRegistry& reg) {
  const std::string at = "chip." + id_.name;
  blocks_ = &reg.counter(at + ".blocks", "count", "kernel blocks the core ran");
  for (int p = 0; p < isa::kPipeCount; ++p) {
    const auto pipe = static_cast<isa::Pipe>(p);
    if (!kind_has_pipe(id_.kind, pipe)) continue;
    const std::string name = at + "." + std::string(isa::pipe_metric_name(pipe));
    PipeCounters& c = pipe_counters_[p];
    c.instructions =
        &reg.counter(name + ".instructions", "count",
                     pipe == isa::Pipe::kS ? "scalar issue slots spent (instructions issued and scalar work)"
                                           : "instructions the pipe executed");
    c.busy_cycles = &reg.counter(name + ".busy_cycles", "cycles", "cycles the pipe was occupied (core clock)");
    const bool moves_data =
        pipe == isa::Pipe::kMte1 || pipe == isa::Pipe::kMte2 || pipe == isa::Pipe::kMte3 || pipe == isa::Pipe::kFix;
    if (moves_data) c.bytes = &reg.counter(name + ".bytes", "bytes", "bytes the pipe's instructions moved");
    if (pipe == isa::Pipe::kV)
      c.bank_conflict_cycles = &reg.counter(name + ".bank_conflict_cycles", "cycles",
                                            "cycles UB bank conflicts added to the pipe's instructions (docs/hw.md)");
  }
}

void AiCore::count_block(const CoreEngine& e) {
  if (!blocks_) return;
  blocks_->add();
  for (int p = 0; p < isa::kPipeCount; ++p) {
    const PipeCounters& c = pipe_counters_[p];
    if (!c.instructions) continue;
    const PipeStats& s = e.pipe_stats(static_cast<isa::Pipe>(p));
    c.instructions->add(s.instructions);
    c.busy_cycles->add(s.busy);
    if (c.bytes) c.bytes->add(s.bytes);
    if (c.bank_conflict_cycles) c.bank_conflict_cycles->add(s.bank_conflict_cycles);
  }
}

void AiCore::start(Program program, std::uint32_t block, std::function<void(const CoreEngine&)> on_done,
                   const sc_core::sc_time& delay) {
  next_ = std::move(program);
  next_block_ = block;
  on_done_ = std::move(on_done);
  running_ = true;
  start_delay_ = delay;
  start_event_.notify(sc_core::SC_ZERO_TIME);
}

void AiCore::sync(std::uint64_t cycle) {
  const sc_core::sc_time target = env_.clock->cycles(cycle);
  if (target > sc_core::sc_time_stamp()) wait(target - sc_core::sc_time_stamp());
  current_ = engine_.get();  // other cores ran while we waited
}

void AiCore::wait_cross(std::optional<std::uint64_t> until) {
  if (until) {
    const sc_core::sc_time target = env_.clock->cycles(*until);
    if (target > sc_core::sc_time_stamp()) wait(target - sc_core::sc_time_stamp(), cross_event_);
  } else {
    wait(cross_event_);
  }
  current_ = engine_.get();
}

void AiCore::abandon() {
  if (thread_.valid() && !thread_.terminated()) thread_.kill();
}

void AiCore::run() {
  for (;;) {
    while (!next_) wait(start_event_);
    if (start_delay_ > sc_core::SC_ZERO_TIME) wait(start_delay_);
    Program program = std::move(*next_);
    next_.reset();
    CoreIdentity id = id_;
    id.block = next_block_;
    CoreHost& host = *this;
    engine_ = std::make_unique<CoreEngine>(*env_.cfg, id, env_.mode, host);
    engine_->set_trace(env_.trace);
    current_ = engine_.get();
    try {
      program(*engine_);
      engine_->finish();
      sync(engine_->end_cycle());
    } catch (const sc_core::sc_unwind_exception&) {
      throw;  // abandon(): let SystemC unwind the thread
    } catch (...) {
      error_ = std::current_exception();
      running_ = false;
      if (sc_core::sc_get_status() != sc_core::SC_STOPPED) sc_core::sc_stop();
      return;
    }
    running_ = false;
    count_block(*engine_);
    if (on_done_) on_done_(*engine_);
  }
}

}  // namespace npusim::hw::core
