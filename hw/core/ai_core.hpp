// The SystemC shell of an AI core: one SC_THREAD that runs the programs given to the core (a kernel block) on the
// scalar unit of a CoreEngine. Time flows only when the engine synchronises (GM access, cross-core flag).
#pragma once

#include <systemc>

#include <array>
#include <exception>
#include <functional>
#include <memory>
#include <optional>

#include "hw/core/core_engine.hpp"
#include "hw/sim/clock.hpp"
#include "traces/stats.hpp"

namespace npusim::hw::core {

// What a core runs: a function of its engine (the firmware sets up its kernel context in it).
using Program = std::function<void(CoreEngine&)>;

class AiCore : public sc_core::sc_module, private CoreHost {
 public:
  struct Env {
    const config::ChipConfig* cfg;
    const Clock* clock;
    mem::GmPort* gm;
    mem::DeviceMemory* memory;  // in timing-only mode too: the host's writes (tiling data) hold values there
    CrossCoreHub* hub;          // null on coupled chips
    Mode mode;
    TraceSink* trace = nullptr;
    // Where the core registers its counters (chip.<core>.blocks, chip.<core>.<pipe>.instructions, .busy_cycles and,
    // on the data-moving pipes, .bytes), summed over the blocks it ran; null: none.
    traces::StatsRegistry* stats = nullptr;
  };
  AiCore(sc_core::sc_module_name name, CoreIdentity id, Env env);

  // Queues a program to start `delay` from now (e.g. the dispatch latency); the core runs its programs one after
  // another, each on a fresh engine.
  void start(Program program, std::uint32_t block, std::function<void(const CoreEngine&)> on_done,
             const sc_core::sc_time& delay = sc_core::SC_ZERO_TIME);
  // A count for this core arrived at the cross-core hub.
  void notify_cross() { cross_event_.notify(sc_core::SC_ZERO_TIME); }

  bool busy() const { return running_; }
  const CoreIdentity& identity() const { return id_; }
  // The engine of the program running now (for a deadlock report when the simulation ran out of events).
  const CoreEngine* engine() const { return engine_.get(); }
  std::exception_ptr error() const { return error_; }

  // Unwinds the stack of a program that can never finish (a deadlock), so its objects are destroyed. Call from a
  // SystemC process (kills are immediate there).
  void abandon();

  // The engine of the core whose thread is running (the kernel API's way to find its core).
  static CoreEngine* current() { return current_; }

 private:
  void run();
  void register_stats(traces::StatsRegistry& reg);
  // Adds a finished block's pipe statistics to the registered counters.
  void count_block(const CoreEngine& e);
  // CoreHost
  std::uint64_t now() const override { return env_.clock->to_cycles(sc_core::sc_time_stamp()); }
  void sync(std::uint64_t cycle) override;
  mem::GmPort& gm() override { return *env_.gm; }
  mem::DeviceMemory* device_memory() override { return env_.memory; }
  CrossCoreHub* cross_core() override { return env_.hub; }
  void wait_cross(std::optional<std::uint64_t> until) override;

  CoreIdentity id_;
  Env env_;
  sc_core::sc_event start_event_, cross_event_;
  std::optional<Program> next_;
  std::function<void(const CoreEngine&)> on_done_;
  std::uint32_t next_block_ = 0;
  sc_core::sc_time start_delay_ = sc_core::SC_ZERO_TIME;
  std::unique_ptr<CoreEngine> engine_;
  bool running_ = false;
  std::exception_ptr error_;
  sc_core::sc_process_handle thread_;
  struct PipeCounters {
    traces::Counter* instructions = nullptr;
    traces::Counter* busy_cycles = nullptr;
    traces::Counter* bytes = nullptr;                 // null on pipes that move no data
    traces::Counter* bank_conflict_cycles = nullptr;  // the Vector pipe's only
  };
  traces::Counter* blocks_ = nullptr;
  std::array<PipeCounters, isa::kPipeCount> pipe_counters_{};
  static CoreEngine* current_;
};

}  // namespace npusim::hw::core
