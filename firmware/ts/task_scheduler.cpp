#include "firmware/ts/task_scheduler.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <vector>

#include "common/util/error.hpp"
#include "traces/overlap.hpp"

namespace npusim::fw::ts {

using kernel::KernelType;

TaskScheduler::TaskScheduler(hw::chip::Chip& chip, std::vector<KernelEntry>& kernels, std::uint64_t cq_base,
                             std::uint32_t cq_entries)
    : chip_(chip),
      kernels_(kernels),
      stats_{&chip.stats().counter("chip.ts.kernels", "count", "kernel tasks the task scheduler started"),
             &chip.stats().counter("chip.ts.memcpys", "count", "copy tasks started (H2D, D2H, D2D)"),
             &chip.stats().counter("chip.ts.event_records", "count", "event record tasks"),
             &chip.stats().counter("chip.ts.event_waits", "count", "event wait tasks"),
             &chip.stats().counter("chip.ts.blocks_dispatched", "count", "kernel blocks dispatched to cores"),
             &chip.stats().counter("chip.ts.completions_waited", "count",
                                   "completions held back because the completion ring was full (host slow to drain)")},
      cq_(TaskRing::create(chip.memory(), cq_base, cq_entries)),
      core_busy_(chip.core_count(), false),
      order_policy_(make_dispatch_order(chip.config().launch.dispatch_order)) {}

void TaskScheduler::add_stream(std::uint64_t sq_base, int priority) {
  Stream s{TaskRing::attach(chip_.memory(), sq_base)};
  s.priority = priority;
  streams_.push_back(s);
  order_.push_back(streams_.size() - 1);
  std::stable_sort(order_.begin(), order_.end(),
                   [this](std::size_t a, std::size_t b) { return streams_[a].priority > streams_[b].priority; });
}

void TaskScheduler::finish(std::size_t record, std::uint16_t stream, double at_ns) {
  TaskRecord& r = records_[record];
  r.end_ns = at_ns;
  TaskDescriptor c;
  c.type = TaskType::kCompletion;
  c.task_id = r.task_id;
  c.stream = stream;
  if (cq_.full() || !cq_backlog_.empty()) stats_.completions_waited->add();  // it cannot be written now
  cq_backlog_.push_back(c);
  write_completions();
  streams_[stream].busy = false;
}

void TaskScheduler::write_completions() {
  bool wrote = false;
  for (; !cq_backlog_.empty() && !cq_.full(); wrote = true) {
    cq_.push(cq_backlog_.front());
    cq_backlog_.pop_front();
  }
  if (wrote) completed_.notify(sc_core::SC_ZERO_TIME);
}

void TaskScheduler::start_task(std::size_t s, const TaskDescriptor& d) {
  Stream& st = streams_[s];
  TaskRecord r;
  r.task_id = d.task_id;
  r.stream = static_cast<std::uint16_t>(s);
  r.type = d.type;
  r.fetched_ns = r.start_ns = now_ns();
  records_.push_back(r);
  const std::size_t rec = records_.size() - 1;
  st.busy = true;
  st.record = rec;
  switch (d.type) {
    case TaskType::kKernel: {
      stats_.kernels->add();
      if (d.kernel >= kernels_.size()) throw InputError("task " + std::to_string(d.task_id) + ": unknown kernel " + std::to_string(d.kernel));
      if (d.block_dim == 0) throw InputError("kernel " + kernels_[d.kernel].name + ": block_dim must be at least 1");
      records_[rec].name = kernels_[d.kernel].name;
      records_[rec].block_dim = d.block_dim;
      kernel_tasks_.push_back(KernelTask{rec, d.kernel, 0, 0, d.block_dim, kernels_[d.kernel].type, 1,
                                         std::make_shared<hw::core::InstructionBudget>(
                                             hw::core::InstructionBudget{chip_.config().sim.max_instructions, 0})});
      break;
    }
    case TaskType::kMemcpy: {
      stats_.memcpys->add();
      const double t = now_ns();
      hw::mem::Transfer tr;
      if (d.copy == CopyKind::kDeviceToDevice) {
        records_[rec].name = "memcpy D2D";
        tr = chip_.sdma().copy(d.bytes, t);
      } else {
        const bool h2d = d.copy == CopyKind::kHostToDevice;
        records_[rec].name = h2d ? "memcpy H2D" : "memcpy D2H";
        tr = chip_.host_link().transfer(h2d, d.bytes, t);
      }
      records_[rec].start_ns = tr.start_ns;
      copies_.push_back(Copy{rec, d});
      pending_.push_back(Pending{tr.done_ns, rec, static_cast<std::uint16_t>(s)});
      break;
    }
    case TaskType::kEventRecord:
      stats_.event_records->add();
      records_[rec].name = "event record " + std::to_string(d.event);
      if (event_time_.size() <= d.event) event_time_.resize(d.event + 1, -1.0);
      event_time_[d.event] = now_ns();  // every earlier task of the stream is done: stream order
      finish(rec, static_cast<std::uint16_t>(s), now_ns());
      break;
    case TaskType::kEventWait:
      stats_.event_waits->add();
      records_[rec].name = "event wait " + std::to_string(d.event);
      st.waiting_event = static_cast<int>(d.event);
      st.record = rec;
      break;
    case TaskType::kCompletion: throw InputError("a completion descriptor in a submission ring");
  }
}

PipeOverlap& PipeOverlap::operator+=(const PipeOverlap& o) {
  for (int k = 0; k < kPairs; ++k) both[k] += o.both[k];
  cube_vector_both += o.cube_vector_both;
  cube_vector_shorter += o.cube_vector_shorter;
  cube_vector = cube_vector || o.cube_vector;
  return *this;
}

PipeOverlap pipe_overlap(const std::vector<kernel::CoreRun>& runs) {
  using hw::isa::Pipe;
  PipeOverlap o;
  for (const kernel::CoreRun& run : runs)
    for (int a = 0; a < hw::isa::kPipeCount; ++a)
      for (int b = a + 1; b < hw::isa::kPipeCount; ++b)
        o.both[PipeOverlap::pair_index(a, b)] += traces::overlap_length(run.pipes[a].intervals, run.pipes[b].intervals);
  // A block's cube work on its AIC against the union of its AIVs' vector work.
  std::map<std::uint32_t, std::pair<std::vector<const traces::Intervals*>, std::vector<const traces::Intervals*>>>
      blocks;
  for (const kernel::CoreRun& run : runs) {
    if (run.kind == hw::core::CoreKind::kCube)
      blocks[run.block].first.push_back(&run.pipes[static_cast<int>(Pipe::kM)].intervals);
    if (run.kind == hw::core::CoreKind::kVector)
      blocks[run.block].second.push_back(&run.pipes[static_cast<int>(Pipe::kV)].intervals);
  }
  for (const auto& [block, lists] : blocks) {
    if (lists.first.empty() || lists.second.empty()) continue;
    const traces::Intervals cube = traces::union_of(lists.first), vec = traces::union_of(lists.second);
    o.cube_vector = true;
    o.cube_vector_both += traces::overlap_length(cube, vec);
    o.cube_vector_shorter += std::min(traces::total_length(cube), traces::total_length(vec));
  }
  return o;
}

bool TaskScheduler::dispatch_block(KernelTask& task, std::uint64_t init_cycles) {
  if (task.next_block == task.block_dim) return false;
  auto& slots = slots_[static_cast<int>(task.type)];
  if (slots.empty()) slots = block_slots(chip_, task.type);
  if (slots.empty()) throw InputError("kernel " + kernels_[task.kernel].name + ": the chip has no cores of its type");
  task.slot_cores = static_cast<std::uint32_t>(slots.front().size());
  TaskRecord& rec = records_[task.record];
  rec.waves = static_cast<std::uint32_t>((task.block_dim + slots.size() - 1) / slots.size());
  for (const auto& slot : slots) {
    bool free = true;
    for (const auto& c : slot) free = free && !core_busy_[c.core->identity().index];
    if (!free) continue;
    const std::uint32_t block = task.next_block++;
    stats_.blocks->add();
    if (block == 0) rec.start_ns = now_ns();
    const std::size_t record = task.record;
    const std::uint32_t cores_per_block = static_cast<std::uint32_t>(slot.size());
    for (const auto& c : slot) {
      core_busy_[c.core->identity().index] = true;
      c.core->start(
          block_program(kernels_[task.kernel].body, block, task.block_dim, c.sub_idx, c.sub_num, init_cycles,
                        task.budget),
          block,
          [this, record, cores_per_block, &task](const hw::core::CoreEngine& e) {
            records_[record].runs.push_back(core_run(e));
            core_busy_[e.identity().index] = false;
            if (++task.done_cores == task.block_dim * cores_per_block) {
              TaskRecord& done = records_[record];
              kernels_[task.kernel].body = nullptr;  // never run again: a long session keeps no closure per launch
              done.overlap = pipe_overlap(done.runs);
              for (kernel::CoreRun& r : done.runs)
                for (hw::core::PipeStats& p : r.pipes) {
                  p.intervals.clear();
                  p.intervals.shrink_to_fit();
                }
              pending_.push_back(Pending{now_ns() + chip_.config().launch.completion, record, records_[record].stream});
            }
            wakeup_.notify(sc_core::SC_ZERO_TIME);
          },
          sc_core::sc_time(chip_.config().launch.dispatch, sc_core::SC_NS));
    }
    return true;
  }
  return false;
}

bool TaskScheduler::dispatch() {
  bool any = false;
  const std::uint64_t init_cycles = block_init_cycles(chip_.config());
  std::vector<KernelTask*> tasks;
  std::vector<DispatchCandidate> candidates;
  for (KernelTask& task : kernel_tasks_) {
    tasks.push_back(&task);
    candidates.push_back(
        {task.next_block < task.block_dim, task.next_block - task.done_cores / task.cores_per_block()});
  }
  for (std::size_t k = order_policy_->pick(candidates); k != DispatchOrder::kNone;
       k = order_policy_->pick(candidates)) {
    KernelTask& task = *tasks[k];
    if (dispatch_block(task, init_cycles)) {
      any = true;
      ++candidates[k].running;
      candidates[k].eligible = task.next_block < task.block_dim;
    } else {
      candidates[k].eligible = false;  // no slot of its type is free
    }
  }
  // Forget kernels whose blocks have all been dispatched and finished.
  while (!kernel_tasks_.empty() && kernel_tasks_.front().next_block == kernel_tasks_.front().block_dim &&
         kernel_tasks_.front().done_cores == kernel_tasks_.front().block_dim * kernel_tasks_.front().cores_per_block())
    kernel_tasks_.pop_front();
  return any;
}

void TaskScheduler::complete_copy(std::size_t record) {
  for (auto it = copies_.begin(); it != copies_.end(); ++it) {
    if (it->record != record) continue;
    const TaskDescriptor& d = it->desc;
    // The bytes move when the copy completes (stream order and events keep their readers behind it).
    if (chip_.mode() == hw::core::Mode::kFunctional) {
      // The host side of a copy is a host pointer the descriptor carries as an integer (the ring's ABI).
      // NOLINTBEGIN(performance-no-int-to-ptr)
      if (d.copy == CopyKind::kHostToDevice) {
        chip_.memory().write(d.dst, reinterpret_cast<const void*>(static_cast<std::uintptr_t>(d.src)), d.bytes);
      } else if (d.copy == CopyKind::kDeviceToHost) {
        chip_.memory().read(d.src, reinterpret_cast<void*>(static_cast<std::uintptr_t>(d.dst)), d.bytes);
        // NOLINTEND(performance-no-int-to-ptr)
      } else {
        std::vector<std::uint8_t> tmp(d.bytes);
        chip_.memory().read(d.src, tmp.data(), d.bytes);
        chip_.memory().write(d.dst, tmp.data(), d.bytes);
      }
    }
    copies_.erase(it);
    return;
  }
}

std::string TaskScheduler::describe_stuck() const {
  std::string out;
  for (std::size_t s = 0; s < streams_.size(); ++s) {
    const Stream& st = streams_[s];
    if (st.waiting_event >= 0) {
      out += (out.empty() ? "" : "; ") + std::string("stream ") + std::to_string(s) + " waits for event " +
             std::to_string(st.waiting_event) + ", which is never recorded";
    } else if (st.busy) {
      out += (out.empty() ? "" : "; ") + std::string("stream ") + std::to_string(s) + " is stuck in task " +
             std::to_string(records_[st.record].task_id);
    }
  }
  return out;
}

void TaskScheduler::run() {
  // Completions closer than the kernel's time resolution are due now: a wait shorter than the resolution would
  // round to zero and this loop would spin at the same time for ever.
  const double resolution_ns = sc_core::sc_get_time_resolution().to_seconds() * 1e9;
  for (;;) {
    write_completions();
    for (bool progress = true; progress;) {
      progress = false;
      const double now = now_ns();
      for (std::size_t i = 0; i < pending_.size();) {
        if (pending_[i].at_ns < now + resolution_ns) {
          const Pending p = pending_[i];
          pending_.erase(pending_.begin() + static_cast<std::ptrdiff_t>(i));
          complete_copy(p.record);
          finish(p.record, p.stream, now);
          progress = true;
        } else {
          ++i;
        }
      }
      for (std::size_t s : order_) {
        Stream& st = streams_[s];
        if (st.waiting_event >= 0) {
          const auto e = static_cast<std::size_t>(st.waiting_event);
          if (e < event_time_.size() && event_time_[e] >= 0) {
            st.waiting_event = -1;
            finish(st.record, static_cast<std::uint16_t>(s), now);
            progress = true;
          }
          continue;
        }
        if (st.busy || st.sq.empty()) continue;
        start_task(s, st.sq.pop());
        progress = true;
      }
      if (dispatch()) progress = true;
    }
    if (pending_.empty()) {
      sc_core::wait(wakeup_);
    } else {
      double next = pending_.front().at_ns;
      for (const Pending& p : pending_) next = std::min(next, p.at_ns);
      sc_core::wait(sc_core::sc_time(std::max(0.0, next - now_ns()), sc_core::SC_NS), wakeup_);
    }
  }
}

}  // namespace npusim::fw::ts
