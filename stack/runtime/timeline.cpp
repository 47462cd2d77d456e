#include "stack/runtime/timeline.hpp"

#include <algorithm>

#include "stack/runtime/report.hpp"
#include "traces/op_summary.hpp"

namespace npusim::stack::runtime {

using hw::isa::Pipe;

// Counter tracks of the memory system over time: HBM and L2 bandwidth and L2 hit rate per sim.counter_interval.
void write_memory_counters(traces::ChromeTraceWriter& w, const hw::mem::MemorySystem& ms) {
  const int pid = w.add_process("Memory", -1);
  const double bin_ns = static_cast<double>(ms.bin_cycles()) * ms.ns_per_cycle();
  auto sample = [&](std::uint64_t i, const hw::mem::MemoryBin& b) {
    const double ts = static_cast<double>(i) * bin_ns;
    w.counter(pid, "HBM", ts, {{"GB/s", static_cast<double>(b.hbm_bytes) / bin_ns}});
    const std::uint64_t looks = b.l2_hits + b.l2_misses;
    w.counter(pid, "L2 hit rate", ts,
              {{"hit rate", looks ? static_cast<double>(b.l2_hits) / static_cast<double>(looks) : 0.0}});
    w.counter(pid, "L2", ts, {{"GB/s", static_cast<double>(b.l2_bytes) / bin_ns}});
  };
  // Only bins with traffic are kept; a counter holds its value until the next sample, so an idle stretch is one
  // zero sample where it starts.
  const hw::mem::MemoryBin idle;
  std::uint64_t next = 0;
  for (const auto& [i, b] : ms.bins()) {
    if (i != next) sample(next, idle);
    sample(i, b);
    next = i + 1;
  }
  if (!ms.bins().empty()) sample(next, idle);
}

namespace {

// A task's graph nodes in one field: "MatMul /q_proj; Add /q_proj_bias".
std::string joined(const std::vector<std::string>& nodes) {
  std::string out;
  for (const std::string& n : nodes) out += (out.empty() ? "" : "; ") + n;
  return out;
}

struct BlockTrack {
  int pid = 0, tid = 0;
};

// Per core that ran blocks, a `blocks` track (in the core's process, which its pipe tracer opened when its pipes
// are traced) with a slice per block: the kernel's name, its task and block index.
std::map<std::uint32_t, BlockTrack> write_block_tracks(traces::ChromeTraceWriter& w, const Device& dev,
                                                       std::map<std::uint32_t, hw::chip::PipeTrace*>& cores) {
  struct Run {
    const fw::ts::TaskRecord* task;
    const fw::kernel::CoreRun* run;
  };
  std::map<std::uint32_t, std::vector<Run>> by_core;
  for (const auto& t : dev.tasks())
    for (const auto& r : t.runs) by_core[r.core_index].push_back({&t, &r});
  const double ns_per_cycle = 1e9 / dev.chip().config().clock.core_hz;
  std::map<std::uint32_t, BlockTrack> tracks;
  for (auto& [core, runs] : by_core) {
    std::sort(runs.begin(), runs.end(), [](const Run& a, const Run& b) { return a.run->start < b.run->start; });
    const auto traced = cores.find(core);
    BlockTrack& bt = tracks[core];
    // The core's process: its pipe tracer's when that traced some instruction, else a new one.
    bt.pid = traced != cores.end() && traced->second->opened()
                 ? traced->second->pid()
                 : w.add_process(runs.front().run->core, static_cast<int>(core));
    bt.tid = w.add_track(bt.pid, "blocks", -1);
    for (const Run& r : runs) {
      w.slice(bt.pid, bt.tid, r.task->name, static_cast<double>(r.run->start) * ns_per_cycle,
              static_cast<double>(r.run->end - r.run->start) * ns_per_cycle, "block",
              {traces::arg("task", static_cast<double>(r.task->task_id)),
               traces::arg("block", static_cast<double>(r.run->block)),
               traces::arg("instructions", static_cast<double>(r.run->instructions))});
    }
  }
  return tracks;
}

}  // namespace

void write_runtime_trace(traces::ChromeTraceWriter& w, const Device& dev,
                         std::map<std::uint32_t, hw::chip::PipeTrace*>& cores, TraceLevel level,
                         std::uint64_t dropped_slices) {
  if (const hw::mem::MemorySystem* ms = dev.chip().memory_system()) write_memory_counters(w, *ms);
  const int host = w.add_process("Host", -3);
  const int api = w.add_track(host, "API", 0);
  const int rt = w.add_process("Runtime/TS", -2);
  std::map<std::uint16_t, int> stream_track;
  std::map<std::uint16_t, std::vector<std::pair<double, int>>> queue_changes;
  for (const auto& t : dev.tasks()) {
    if (!stream_track.count(t.stream)) stream_track[t.stream] = w.add_track(rt, "stream " + std::to_string(t.stream), t.stream);
    // Queueing: a task waits from the host's submission until the scheduler takes it.
    queue_changes[t.stream].emplace_back(dev.submitted_ns(t.task_id), +1);
    queue_changes[t.stream].emplace_back(t.fetched_ns, -1);
  }
  for (auto& [stream, changes] : queue_changes) {
    std::sort(changes.begin(), changes.end());
    int depth = 0;
    for (const auto& [ts, delta] : changes) {
      depth += delta;
      w.counter(rt, "stream " + std::to_string(stream) + " queued", ts, {{"tasks", static_cast<double>(depth)}});
    }
  }
  std::map<std::int64_t, const ApiCall*> by_task;
  for (const auto& c : dev.api_calls()) {
    w.slice(host, api, c.name, c.start_ns, c.end_ns - c.start_ns, "api");
    if (c.task >= 0) by_task[c.task] = &c;
  }
  if (dropped_slices && !dev.api_calls().empty()) {
    w.instant(host, api, "trace truncated", dev.api_calls().back().end_ns,
              {traces::arg("instruction slices and flag events left out (--trace-limit)",
                           static_cast<double>(dropped_slices))});
  }
  const std::map<std::uint32_t, BlockTrack> blocks =
      level == TraceLevel::kTask ? std::map<std::uint32_t, BlockTrack>{} : write_block_tracks(w, dev, cores);
  std::vector<const fw::ts::TaskRecord*> tasks;
  for (const auto& t : dev.tasks()) tasks.push_back(&t);
  std::sort(tasks.begin(), tasks.end(), [](auto* a, auto* b) { return a->fetched_ns < b->fetched_ns; });
  const double hz = dev.chip().config().clock.core_hz;
  for (const auto* t : tasks) {
    const double submitted = dev.submitted_ns(t->task_id);
    const double dur = std::max(0.0, t->end_ns - t->fetched_ns);
    traces::Args args{traces::arg("task", static_cast<double>(t->task_id)),
                      traces::arg("queued_us", (t->fetched_ns - submitted) / 1e3),
                      traces::arg("block_dim", static_cast<double>(t->block_dim))};
    if (const auto& nodes = dev.task_nodes(t->task_id); !nodes.empty())
      args.push_back(traces::arg("nodes", joined(nodes)));
    w.slice(rt, stream_track[t->stream], t->name, t->fetched_ns, dur, task_type_name(t->type), args);
    // A flow from the launch call to the kernel's first block (to the task itself when no block is traced).
    if (t->type != fw::ts::TaskType::kKernel || t->runs.empty() || !by_task.count(t->task_id)) continue;
    const ApiCall* call = by_task[t->task_id];
    const auto first =
        std::min_element(t->runs.begin(), t->runs.end(), [](auto& a, auto& b) { return a.start < b.start; });
    const auto block = blocks.find(first->core_index);
    w.flow_begin(t->task_id + 1, host, api, "launch", (call->start_ns + call->end_ns) / 2);
    if (block != blocks.end()) {
      w.flow_end(t->task_id + 1, block->second.pid, block->second.tid, "launch",
                 static_cast<double>(first->start) / hz * 1e9 + 0.5e9 / hz);
    } else {
      w.flow_end(t->task_id + 1, rt, stream_track[t->stream], "launch", t->fetched_ns + dur / 2);
    }
  }
}

void write_op_summary(const std::string& path, const Device& dev) {
  std::vector<traces::CsvColumn> cols = {
      {"task_id", "", "submission order of the task on the device"},
      {"stream", "", "stream the task was submitted to"},
      {"name", "", "kernel name, or the memcpy/event kind"},
      {"type", "", "kernel, memcpy, event_record or event_wait"},
      {"start_us", "us", "when the task scheduler took the task (its stream was free)"},
      {"duration_us", "us", "from start to the completion record"},
      {"wait_us", "us", "from the host's submission to the start (queueing behind its stream)"},
      {"block_dim", "", "blocks of a kernel (0 otherwise)"},
      {"cores", "", "cores that ran the kernel's blocks"}};
  for (Pipe p : kReportPipes) {
    cols.push_back({std::string(hw::isa::pipe_metric_name(p)) + "_ratio", "",
                    "busy cycles of the pipe over the kernel's core span times its cores"});
    cols.push_back({std::string(hw::isa::pipe_metric_name(p)) + "_cycles", "cycles", "busy cycles of the pipe, summed over cores"});
  }
  cols.push_back(
      {"nodes", "", "the graph nodes the kernel runs (\"OpType name\", separated by \"; \"); empty outside a graph"});
  traces::CsvWriter csv(path, cols);
  for (const auto& t : dev.tasks()) {
    const PipeUse u = pipe_use(t);
    std::vector<std::string> row = {traces::csv_number(t.task_id),
                                    traces::csv_number(t.stream),
                                    t.name,
                                    task_type_name(t.type),
                                    traces::csv_number(t.fetched_ns / 1e3),
                                    traces::csv_number((t.end_ns - t.fetched_ns) / 1e3),
                                    traces::csv_number((t.fetched_ns - dev.submitted_ns(t.task_id)) / 1e3),
                                    traces::csv_number(t.block_dim),
                                    traces::csv_number(u.cores)};
    for (int p = 0; p < hw::isa::kPipeCount; ++p) {
      row.push_back(traces::csv_number(u.fraction[static_cast<int>(kReportPipes[p])]));
      row.push_back(traces::csv_number(static_cast<double>(u.cycles[static_cast<int>(kReportPipes[p])])));
    }
    row.push_back(joined(dev.task_nodes(t.task_id)));
    csv.row(row);
  }
  csv.close();
}

}  // namespace npusim::stack::runtime
