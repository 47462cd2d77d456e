// The timing and functional model of one AI core, in plain C++ (the SystemC shell in ai_core.hpp is thin).
//
// The kernel runs on the scalar unit and calls issue() for each instruction, in program order. The scalar unit has
// its own clock (`scalar_time`) that advances by scalar.cycles_per_instruction per issued instruction; it runs ahead
// of the pipes and only waits when a queue is full, at a wait_flag into S, at pipe_barrier(ALL), or when it reads a
// buffer. Each pipe is an in-order queue of configured depth. The engine executes queued instructions lazily but
// strictly in time order of their start (a conservative discrete-event loop over the seven queue heads):
//   start = max(issue time, pipe free, dependencies)     dependencies: the flag's set time for a wait_flag, the
//                                                         pipe's earlier work for pipe_barrier and cross-core sets
// A set_flag fires when the pipe's earlier work is done (data landed), without holding the pipe.
//   end   = start + cost (hw/core/cost_model formulas; GM accesses add the port's accept and data times)
// A pipe is free again at its occupancy end; an instruction's data is done at `done` (>= end, e.g. after a GM read's
// latency). So consecutive copies overlap their latencies, as the MTEs' outstanding requests do.
//
// Shared resources (GM, cross-core flags) are touched only at the SystemC time equal to the access's start: the
// host's sync() advances global time there first. Because the engine runs in time order and the scalar never issues
// into the past, syncs are monotonic and requests reach the memory model in simulated-time order.
#pragma once

#include <array>
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/config/chip_config.hpp"
#include "common/util/error.hpp"
#include "hw/core/cost_model.hpp"
#include "hw/core/cross_core.hpp"
#include "hw/core/sanitizer.hpp"
#include "hw/isa/instr.hpp"
#include "hw/isa/semantics.hpp"
#include "hw/mem/device_memory.hpp"
#include "hw/mem/gm_port.hpp"

namespace npusim::hw::core {

enum class Mode : std::uint8_t { kFunctional, kTimingOnly };

// A kernel misuse found by the core: deadlock, flag misuse, bad access, illegal barrier. The message names core,
// block, pipe, flag and instruction with its kernel source position.
class KernelError : public InputError {
 public:
  using InputError::InputError;
};

// What a core needs from its surroundings: global time, GM, cross-core flags. The SystemC shell implements it;
// tests drive the engine with a standalone host where time is the engine's own.
class CoreHost {
 public:
  virtual ~CoreHost() = default;
  virtual std::uint64_t now() const = 0;             // global time in core cycles
  virtual void sync(std::uint64_t cycle) = 0;        // advance global time to `cycle` (>= now())
  virtual mem::GmPort& gm() = 0;
  // Null for hosts without one. In timing-only mode only what the host wrote (e.g. tiling data) holds values.
  virtual mem::DeviceMemory* device_memory() = 0;
  virtual CrossCoreHub* cross_core() = 0;            // null when the chip has none
  // Block until a cross-core count arrives for this core, or until `until` if given.
  virtual void wait_cross(std::optional<std::uint64_t> until) = 0;
};

// Receives one call per executed instruction, in each pipe's program order, with its occupancy [start, end): until
// it completes, so a GM copy's may reach past the next instruction's start (copies in flight). For traces.
class TraceSink {
 public:
  virtual ~TraceSink() = default;
  virtual void on_instr(isa::Pipe pipe, const isa::Instr& in, std::uint64_t start, std::uint64_t end) = 0;
  // A set_flag(src -> dst, id) fired at `at` (when src's earlier work was done). Returns the number the sink gave
  // it (a sink lives as long as its core, over blocks and kernels), passed back with the wait that takes it.
  virtual std::uint64_t on_flag_set(isa::Pipe /*src*/, isa::Pipe /*dst*/, std::uint32_t /*id*/, std::uint64_t /*at*/) {
    return 0;
  }
  // dst's wait_flag(src -> dst, id) took set `seq`: dst reached it at `from` and went on at `to` (>= from).
  virtual void on_flag_wait(isa::Pipe /*src*/, isa::Pipe /*dst*/, std::uint32_t /*id*/, std::uint64_t /*from*/,
                            std::uint64_t /*to*/, std::uint64_t /*seq*/) {}
};

struct CoreIdentity {
  std::uint32_t index = 0;  // position in the launch, used by the cross-core hub
  CoreKind kind = CoreKind::kVector;
  std::string name;         // "aiv3", "aic0", "core5"
  std::uint32_t block = 0;  // the block the core runs
};

// What one kernel launch may issue over all its blocks (sim.max_instructions), shared by their engines: a launch
// past it is stopped with a KernelError instead of running on (a loop that never ends) or taking the host's memory.
struct InstructionBudget {
  std::uint64_t limit = 0;
  std::uint64_t used = 0;
};

struct PipeStats {
  std::uint64_t instructions = 0;
  std::uint64_t busy = 0;  // cycles with an instruction in execution (the intervals' total length)
  std::uint64_t bytes = 0;
  std::uint64_t bank_conflict_cycles = 0;  // vector: cycles UB bank conflicts added to its instructions
  // Merged busy intervals [start, end), for the overlap metrics: the task scheduler sums what the reports need
  // when a task ends (fw::ts::PipeOverlap) and drops them, so a long run does not keep one per instruction.
  std::vector<std::pair<std::uint64_t, std::uint64_t>> intervals;
  std::uint64_t first_start = 0, last_end = 0;  // the first interval's start and the last one's end (0, 0 if none)
};

// The pipes a core of this kind has (docs/hw.md, "Pipes per core kind"): AIC S, MTE1, MTE2, M, FIX; AIV S, MTE2,
// MTE3, V; coupled cores all seven.
bool kind_has_pipe(CoreKind kind, isa::Pipe p);

class CoreEngine {
 public:
  CoreEngine(const config::ChipConfig& cfg, CoreIdentity id, Mode mode, CoreHost& host);
  ~CoreEngine();
  CoreEngine(const CoreEngine&) = delete;
  CoreEngine& operator=(const CoreEngine&) = delete;

  // The scalar unit's interface (called by the kernel API).
  // `call_cycles`: scalar work the kernel API spent on the call before issuing (scalar.api_call_cycles).
  void issue(isa::Instr in, std::uint64_t call_cycles = 0);
  // Scalar-unit work of `cycles` cycles (scalar code the kernel accounts for explicitly).
  void scalar_work(std::uint64_t cycles);
  // Reads/writes `bytes` of a local buffer from the scalar unit at the current scalar time (GetValue/SetValue).
  void scalar_read(isa::Space s, std::uint64_t addr, void* out, std::uint64_t bytes, isa::SourceLoc where);
  void scalar_write(isa::Space s, std::uint64_t addr, const void* in, std::uint64_t bytes, isa::SourceLoc where);
  // Drains every queue at the end of the kernel; throws KernelError if something can never run.
  void finish();

  // What each blocked pipe waits for (for deadlock reports); empty when nothing is blocked.
  std::string describe_blocked() const;

  const CoreIdentity& identity() const { return id_; }
  const config::ChipConfig& config() const { return cfg_; }
  Mode mode() const { return mode_; }
  bool has_pipe(isa::Pipe p) const { return has_pipe_[static_cast<int>(p)]; }
  std::uint64_t buffer_size(isa::Space s) const { return size_[static_cast<int>(s)]; }
  std::uint64_t buffer_align(isa::Space s) const { return align_[static_cast<int>(s)]; }

  std::uint64_t start_cycle() const { return start_; }
  std::uint64_t scalar_time() const { return scalar_time_; }
  // The cycle at which all work of the kernel is done (valid after finish()).
  std::uint64_t end_cycle() const { return end_; }
  const PipeStats& pipe_stats(isa::Pipe p) const { return pipes_[static_cast<int>(p)].stats; }
  std::uint64_t instructions() const { return issued_; }

  void set_trace(TraceSink* sink) { trace_ = sink; }
  // The launch's budget, shared with its other blocks (null: no limit).
  void set_budget(InstructionBudget* b) { budget_ = b; }
  // Opaque per-core context of the software running on the scalar unit (firmware/kernel owns it).
  void set_user_context(void* p) { user_ = p; }
  // The GM ranges the running kernel was launched with: when set, every GM access must lie inside one of them
  // (an error naming the instruction and the tensors otherwise). Empty: only the device capacity bounds GM.
  struct GmRange {
    std::uint64_t addr = 0, bytes = 0;
    std::string name;
  };
  void set_gm_bounds(std::vector<GmRange> r) { gm_bounds_ = std::move(r); }
  // The synchronisation checker (sim.sanitize), or null.
  Sanitizer* sanitizer() { return san_.get(); }
  void* user_context() const { return user_; }

  // Test access to local buffers in functional mode.
  std::uint8_t* local_data(isa::Space s) { return local_[static_cast<int>(s)].data(); }

 private:
  struct Entry {
    isa::Instr in;
    std::uint64_t issued;
    // A GM access in progress: it is served chunk by chunk (sim.chunk_bytes), each chunk a request at the time the
    // previous one was accepted, so other cores' requests interleave at chunk granularity.
    bool started = false;
    std::uint32_t segment = 0;
    std::uint64_t offset = 0;  // bytes of the segment already requested
    std::uint64_t begin = 0;   // start of the instruction
    std::uint64_t done = 0;    // latest data-done time of its chunks
  };
  struct PipeState {
    std::deque<Entry> queue;
    std::uint64_t depth = 0;
    std::uint64_t free_at = 0;   // occupancy end of the last instruction
    std::uint64_t done_max = 0;  // latest data-done time of everything executed
    std::uint64_t last_start = 0;
    bool continuing = false;  // the head is a GM access part-way through its chunks (it has left the queue)
    PipeStats stats;
  };
  // A flag's sets not yet consumed, oldest first, with the cycle each fired at. The hardware flag is binary: a set
  // that fires before the previous one was waited for is the "set twice" error, found when the wait consumes.
  struct FlagSet {
    std::uint64_t time;
    isa::SourceLoc where;
    std::uint64_t seq = 0;  // the trace sink's number for it (TraceSink::on_flag_set)
  };
  struct Flag {
    std::deque<FlagSet> sets;
  };
  // `reached`: when the waiting pipe (or the scalar unit) got to the wait, for the trace.
  void consume(Flag& f, const isa::Instr& wait, isa::Pipe pipe, std::uint64_t when, std::uint64_t reached);
  void fire(const isa::Instr& set, std::uint64_t at);
  class View;

  void validate(const isa::Instr& in) const;
  [[noreturn]] void fail(const isa::Instr& in, isa::Pipe pipe, const std::string& what) const;
  void check_gm_bounds(const isa::Instr& in, isa::Pipe pipe, const std::string& what, std::uint64_t addr,
                       std::uint64_t bytes) const;
  Flag& flag(isa::Pipe src, isa::Pipe dst, std::uint32_t id);
  std::optional<std::uint64_t> ready_time(int p);
  bool blocked_on_cross() const;
  // Executes the earliest-starting ready head, or waits for global time to reach it when a cross-core count may
  // arrive first. Returns false when no head can start (or none before `limit`).
  bool step(std::optional<std::uint64_t> limit = std::nullopt);
  // Runs until `done()` holds; `waiting_for` describes the scalar's need for a deadlock report.
  template <class Pred, class Why>
  void run_until(Pred done, Why waiting_for);
  [[noreturn]] void deadlock(const std::string& waiting_for) const;
  void execute(int p, Entry e, std::uint64_t start);
  // One chunk of a GM access; returns true when the instruction is complete.
  bool gm_chunk(PipeState& ps, Entry& e, const InstrCost& c, std::uint64_t start, std::uint64_t* end,
                std::uint64_t* done);
  void record(PipeState& ps, std::uint64_t start, std::uint64_t end);
  // One more instruction issued; KernelError past the launch's budget.
  void count_issue();
  void run_semantics(const isa::Instr& in, isa::Pipe pipe);
  void scalar_busy(std::uint64_t cycles);

  const config::ChipConfig& cfg_;
  CoreIdentity id_;
  Mode mode_;
  CoreHost& host_;
  std::array<bool, isa::kPipeCount> has_pipe_{};
  std::array<std::uint64_t, isa::kSpaceCount> size_{}, align_{};
  std::array<std::vector<std::uint8_t>, isa::kSpaceCount> local_;
  std::array<PipeState, isa::kPipeCount> pipes_;
  std::vector<Flag> flags_;  // [src][dst][id]
  std::unique_ptr<View> view_;
  std::uint64_t start_ = 0, scalar_time_ = 0, end_ = 0;
  std::uint64_t issued_ = 0;
  InstructionBudget* budget_ = nullptr;
  TraceSink* trace_ = nullptr;
  void* user_ = nullptr;
  std::vector<GmRange> gm_bounds_;
  std::unique_ptr<Sanitizer> san_;
  bool finished_ = false;
  bool scalar_cross_wait_ = false;  // the scalar unit itself waits for a cross-core count
};

}  // namespace npusim::hw::core
