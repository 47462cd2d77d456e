// The task-scheduler firmware (DESIGN.md, "Runtime, driver, firmware"). It runs on the control CPU: fetches task
// descriptors from each stream's submission ring in device memory, keeps every stream in order, honours events,
// dispatches the blocks of kernel tasks to free cores by kernel type (further waves when block_dim exceeds the
// cores), drives SDMA and the host link for memcpy tasks, and writes a completion descriptor per task into the
// completion ring. Latencies (keys launch.*): `dispatch` from the scheduler to a core, `core_startup` +
// `kernel_init` on the core before the kernel body, `completion` from the last block to the completion record.
#pragma once

#include <systemc>

#include <array>
#include <deque>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "firmware/kernel/launch_spec.hpp"
#include "firmware/ts/dispatch.hpp"
#include "firmware/ts/task_ring.hpp"
#include "hw/chip/chip.hpp"

namespace npusim::fw::ts {

// A kernel the host registered: the descriptor's `kernel` field indexes this table.
struct KernelEntry {
  std::string name;
  kernel::KernelType type = kernel::KernelType::kVector;
  std::function<void()> body;
};

// What the overlap metrics (docs/metrics.md, `overlap`) need of a kernel task's runs, summed when the task ends so
// that the runs' busy intervals can be dropped: a long session would otherwise keep tens of bytes per instruction
// it ever simulated.
struct PipeOverlap {
  static constexpr int kPairs = hw::isa::kPipeCount * (hw::isa::kPipeCount - 1) / 2;
  // Per pair of pipes (pair_index): cycles both were busy at once on one core, summed over the runs.
  std::array<std::uint64_t, kPairs> both{};
  // Split chips, per block: cycles its AIC's cube pipe computed while one of its AIVs' vector pipes did, and the
  // smaller of the two busy times (the AIVs' counted as the union of their intervals), each summed over blocks.
  std::uint64_t cube_vector_both = 0, cube_vector_shorter = 0;
  bool cube_vector = false;  // some block ran on both kinds
  // The slot of pipes i != j (pipe indices) in `both`.
  static constexpr int pair_index(int i, int j) {
    if (i > j) std::swap(i, j);
    return i * (2 * hw::isa::kPipeCount - i - 1) / 2 + (j - i - 1);
  }
  std::uint64_t pair(hw::isa::Pipe a, hw::isa::Pipe b) const {
    return both[pair_index(static_cast<int>(a), static_cast<int>(b))];
  }
  PipeOverlap& operator+=(const PipeOverlap& o);
};
static_assert(PipeOverlap::pair_index(hw::isa::kPipeCount - 2, hw::isa::kPipeCount - 1) == PipeOverlap::kPairs - 1);
// The overlaps of a task's runs (each run's pipes' intervals still there).
PipeOverlap pipe_overlap(const std::vector<kernel::CoreRun>& runs);

// What happened to a task, for traces, summaries and tests. Times in ns of simulated time.
struct TaskRecord {
  std::uint32_t task_id = 0;
  std::uint16_t stream = 0;
  TaskType type = TaskType::kKernel;
  std::string name;
  std::uint32_t block_dim = 0;
  double fetched_ns = 0;  // the scheduler took it from the ring (its stream was free)
  double start_ns = 0;    // first block dispatched / copy started
  double end_ns = 0;      // finished: its completion is written then, or once the completion ring has room
  std::uint32_t waves = 0;
  std::vector<kernel::CoreRun> runs;  // per block and core, kernels only; their pipes' intervals dropped at the end
  PipeOverlap overlap;                // of the runs, kernels only
};

class TaskScheduler {
 public:
  TaskScheduler(hw::chip::Chip& chip, std::vector<KernelEntry>& kernels, std::uint64_t cq_base,
                std::uint32_t cq_entries);

  // Registers a stream whose submission ring the driver created at `sq_base`; higher priority streams are served
  // first when several have a task ready.
  void add_stream(std::uint64_t sq_base, int priority = 0);
  // The driver's doorbell: new descriptors are in some ring.
  void doorbell() { wakeup_.notify(sc_core::SC_ZERO_TIME); }
  // The host took completions from the completion ring: held-back ones can be written now.
  void completions_taken() {
    if (!cq_backlog_.empty()) wakeup_.notify(sc_core::SC_ZERO_TIME);
  }
  // The firmware's main loop; runs forever on the control CPU (start it with ControlCpu::start).
  void run();

  // Notified when a completion descriptor was written.
  const sc_core::sc_event& completed() const { return completed_; }
  const std::vector<TaskRecord>& records() const { return records_; }
  // What keeps unfinished streams from finishing (for the error when the device stops early).
  std::string describe_stuck() const;

 private:
  struct Stream {
    TaskRing sq;
    bool busy = false;           // a task of this stream is in progress
    int waiting_event = -1;      // blocked at an event wait
    std::size_t record = 0;      // index of its task in records_
    int priority = 0;
  };
  std::vector<std::size_t> order_;  // stream indices, highest priority first
  struct KernelTask {
    std::size_t record;
    std::uint32_t kernel;
    std::uint32_t next_block = 0, done_cores = 0, block_dim = 0;
    kernel::KernelType type;
    std::uint32_t slot_cores = 1;
    std::shared_ptr<hw::core::InstructionBudget> budget;  // sim.max_instructions over the launch's blocks
    std::uint32_t cores_per_block() const { return slot_cores; }
  };
  struct Copy {
    std::size_t record;
    TaskDescriptor desc;
  };
  struct Pending {
    double at_ns;
    std::size_t record;
    std::uint16_t stream;
  };
  void start_task(std::size_t stream, const TaskDescriptor& d);
  // Free slots to the kernels in flight, in the order launch.dispatch_order says; true when a block started.
  bool dispatch();
  // One block of `task` on the first free slot of its type; false when it has no block left or no slot is free.
  bool dispatch_block(KernelTask& task, std::uint64_t init_cycles);
  void complete_copy(std::size_t record);
  void finish(std::size_t record, std::uint16_t stream, double at_ns);
  void write_completions();
  double now_ns() const { return sc_core::sc_time_stamp().to_seconds() * 1e9; }

  hw::chip::Chip& chip_;
  std::vector<KernelEntry>&
      kernels_;  // a finished task's body is released (its closure may hold a plan, tiling, buffers)
  // Its counters in the chip's registry (chip.ts.*, docs/metrics.md): tasks started per type, blocks dispatched,
  // completions that waited for room in the ring.
  struct Stats {
    traces::Counter *kernels, *memcpys, *event_records, *event_waits, *blocks, *completions_waited;
  };
  Stats stats_;
  TaskRing cq_;
  // Completions the ring had no room for, oldest first: written as the host drains it (back-pressure: a host that
  // does not drain the ring delays its completion notices, never the device).
  std::deque<TaskDescriptor> cq_backlog_;
  std::vector<Stream> streams_;
  std::deque<KernelTask> kernel_tasks_;  // in dispatch order
  std::vector<Pending> pending_;         // completions due at a time (copies, finished kernels)
  std::vector<bool> core_busy_;          // by core index
  std::unique_ptr<DispatchOrder> order_policy_;   // launch.dispatch_order
  std::vector<std::vector<BlockSlot>> slots_[3];  // per kernel type, computed on first use
  std::deque<Copy> copies_;
  std::vector<double> event_time_;       // recorded events (-1: not recorded)
  std::vector<TaskRecord> records_;
  sc_core::sc_event wakeup_, completed_;
};

}  // namespace npusim::fw::ts
