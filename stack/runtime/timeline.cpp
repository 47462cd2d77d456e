#include "stack/runtime/timeline.hpp"

#include <algorithm>

#include "traces/op_summary.hpp"
#include "traces/overlap.hpp"

namespace npusim::stack::runtime {

namespace {

using hw::isa::Pipe;
constexpr Pipe kPipes[] = {Pipe::kS, Pipe::kMte1, Pipe::kMte2, Pipe::kMte3, Pipe::kM, Pipe::kV, Pipe::kFix};

std::string type_name(fw::ts::TaskType t) {
  switch (t) {
    case fw::ts::TaskType::kKernel: return "kernel";
    case fw::ts::TaskType::kMemcpy: return "memcpy";
    case fw::ts::TaskType::kEventRecord: return "event_record";
    case fw::ts::TaskType::kEventWait: return "event_wait";
    default: return "other";
  }
}

// Busy fraction per pipe over the cores that ran the task, and busy cycles.
struct PipeUse {
  double fraction[hw::isa::kPipeCount] = {};
  std::uint64_t cycles[hw::isa::kPipeCount] = {};
  std::uint32_t cores = 0;
  std::uint64_t span = 0;
};
PipeUse pipe_use(const fw::ts::TaskRecord& t) {
  PipeUse u;
  if (t.runs.empty()) return u;
  std::uint64_t first = UINT64_MAX, last = 0;
  std::vector<std::string> cores;
  for (const auto& r : t.runs) {
    first = std::min(first, r.start);
    last = std::max(last, r.end);
    if (std::find(cores.begin(), cores.end(), r.core) == cores.end()) cores.push_back(r.core);
    for (int p = 0; p < hw::isa::kPipeCount; ++p) u.cycles[p] += r.pipes[p].busy;
  }
  u.cores = static_cast<std::uint32_t>(cores.size());
  u.span = last - first;
  for (int p = 0; p < hw::isa::kPipeCount; ++p)
    u.fraction[p] = u.span ? static_cast<double>(u.cycles[p]) / static_cast<double>(u.span * u.cores) : 0.0;
  return u;
}

}  // namespace

// Counter tracks of the memory system over time: HBM and L2 bandwidth and L2 hit rate per sim.counter_interval.
void write_memory_counters(traces::ChromeTraceWriter& w, const hw::mem::MemorySystem& ms) {
  const int pid = w.add_process("Memory", -1);
  const double bin_ns = static_cast<double>(ms.bin_cycles()) * ms.ns_per_cycle();
  const auto& bins = ms.bins();
  for (std::size_t i = 0; i < bins.size(); ++i) {
    const double ts = static_cast<double>(i) * bin_ns;
    w.counter(pid, "HBM", ts, {{"GB/s", static_cast<double>(bins[i].hbm_bytes) / bin_ns}});
    const std::uint64_t looks = bins[i].l2_hits + bins[i].l2_misses;
    w.counter(pid, "L2 hit rate", ts,
              {{"hit rate", looks ? static_cast<double>(bins[i].l2_hits) / static_cast<double>(looks) : 0.0}});
    w.counter(pid, "L2", ts, {{"GB/s", static_cast<double>(bins[i].l2_bytes) / bin_ns}});
  }
}

void write_runtime_trace(traces::ChromeTraceWriter& w, const Device& dev,
                         std::map<std::uint32_t, hw::chip::PipeTrace*>& cores) {
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
  std::vector<const fw::ts::TaskRecord*> tasks;
  for (const auto& t : dev.tasks()) tasks.push_back(&t);
  std::sort(tasks.begin(), tasks.end(), [](auto* a, auto* b) { return a->fetched_ns < b->fetched_ns; });
  const double hz = dev.chip().config().clock.core_hz;
  for (const auto* t : tasks) {
    const double submitted = dev.submitted_ns(t->task_id);
    w.slice(rt, stream_track[t->stream], t->name, t->fetched_ns, std::max(0.0, t->end_ns - t->fetched_ns), type_name(t->type),
            {traces::arg("task", static_cast<double>(t->task_id)), traces::arg("queued_us", (t->fetched_ns - submitted) / 1e3),
             traces::arg("block_dim", static_cast<double>(t->block_dim))});
    // A flow from the launch call to the kernel's first block, on its core's scalar track.
    if (t->type == fw::ts::TaskType::kKernel && !t->runs.empty() && by_task.count(t->task_id)) {
      const auto first = std::min_element(t->runs.begin(), t->runs.end(), [](auto& a, auto& b) { return a.start < b.start; });
      if (cores.count(first->core_index)) {
        const ApiCall* call = by_task[t->task_id];
        hw::chip::PipeTrace* pt = cores[first->core_index];
        w.flow_begin(t->task_id + 1, host, api, "launch", (call->start_ns + call->end_ns) / 2);
        w.flow_end(t->task_id + 1, pt->pid(), pt->tid(Pipe::kS), "launch", static_cast<double>(first->start) / hz * 1e9 + 0.5e9 / hz);
      }
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
  for (Pipe p : kPipes) {
    cols.push_back({std::string(hw::isa::pipe_metric_name(p)) + "_ratio", "",
                    "busy cycles of the pipe over the kernel's core span times its cores"});
    cols.push_back({std::string(hw::isa::pipe_metric_name(p)) + "_cycles", "cycles", "busy cycles of the pipe, summed over cores"});
  }
  traces::CsvWriter csv(path, cols);
  for (const auto& t : dev.tasks()) {
    const PipeUse u = pipe_use(t);
    std::vector<std::string> row = {traces::csv_number(t.task_id), traces::csv_number(t.stream), t.name, type_name(t.type),
                                    traces::csv_number(t.fetched_ns / 1e3), traces::csv_number((t.end_ns - t.fetched_ns) / 1e3),
                                    traces::csv_number((t.fetched_ns - dev.submitted_ns(t.task_id)) / 1e3),
                                    traces::csv_number(t.block_dim), traces::csv_number(u.cores)};
    for (int p = 0; p < hw::isa::kPipeCount; ++p) {
      row.push_back(traces::csv_number(u.fraction[static_cast<int>(kPipes[p])]));
      row.push_back(traces::csv_number(static_cast<double>(u.cycles[static_cast<int>(kPipes[p])])));
    }
    csv.row(row);
  }
  csv.flush();
}

ReportWindow window_from_now(const Device& dev, const fw::kernel::MemorySnapshot& memory) {
  return ReportWindow{dev.submitted(), dev.api_calls().size(), &memory};
}

nlohmann::json runtime_report(const Device& dev, const ReportWindow& window) {
  const Device& d = dev;
  const double hz = d.chip().config().clock.core_hz;
  double first = 1e300, last = 0;
  nlohmann::json tasks = nlohmann::json::array();
  for (const auto& t : dev.tasks()) {
    if (t.task_id < window.first_task) continue;
    first = std::min(first, t.fetched_ns);
    last = std::max(last, t.end_ns);
    const PipeUse u = pipe_use(t);
    nlohmann::json pipes = nlohmann::json::object();
    for (Pipe p : kPipes) pipes[std::string(hw::isa::pipe_metric_name(p))] = u.fraction[static_cast<int>(p)];
    tasks.push_back({{"name", t.name}, {"op", t.name}, {"type", type_name(t.type)}, {"stream", t.stream},
                     {"block_dim", t.block_dim}, {"start_us", t.fetched_ns / 1e3}, {"dur_us", (t.end_ns - t.fetched_ns) / 1e3},
                     {"cycles", static_cast<std::uint64_t>((t.end_ns - t.fetched_ns) * 1e-9 * hz)},
                     {"wait_us", (t.fetched_ns - dev.submitted_ns(t.task_id)) / 1e3}, {"waves", t.waves},
                     {"pipes", pipes}});
  }
  nlohmann::json j;
  j["config"] = d.chip().config().name;
  j["cycles"] = static_cast<std::uint64_t>(std::max(0.0, last - first) * 1e-9 * hz);
  j["time_us"] = std::max(0.0, last - first) / 1e3;
  j["tasks"] = tasks;
  const std::size_t calls = dev.api_calls().size() - std::min(dev.api_calls().size(), window.first_api_call);
  j["host"] = {{"api_calls", calls},
               {"end_us", dev.api_calls().empty() ? 0.0 : dev.api_calls().back().end_ns / 1e3}};
  return j;
}

namespace {

// A launch result's span, instruction count and cores from its runs.
void summarise(fw::kernel::LaunchResult& r, double wall_seconds) {
  r.start = r.runs.empty() ? 0 : UINT64_MAX;
  std::vector<std::string> used;
  for (const auto& run : r.runs) {
    r.start = std::min(r.start, run.start);
    r.end = std::max(r.end, run.end);
    r.instructions += run.instructions;
    if (std::find(used.begin(), used.end(), run.core) == used.end()) used.push_back(run.core);
  }
  r.cores_used = static_cast<std::uint32_t>(used.size());
  r.wall_seconds = wall_seconds;
}

}  // namespace

nlohmann::json run_report(Device& dev, double wall_seconds, const ReportWindow& window) {
  // The simulated instructions and the pipe overlaps count every kernel of the run; `kernel` describes the last one
  // (the only one of `npusim op` and `npusim kernel`).
  fw::kernel::LaunchResult result, last;
  std::string name;
  std::size_t kernels = 0;
  std::uint32_t blocks = 0;  // block ids stay distinct across kernels (cube_vector pairs a block's AIC and AIVs)
  for (const auto& t : dev.tasks()) {
    if (t.type != fw::ts::TaskType::kKernel || t.task_id < window.first_task) continue;
    std::uint32_t most = 0;
    for (fw::kernel::CoreRun run : t.runs) {
      most = std::max(most, run.block + 1);
      run.block += blocks;
      result.runs.push_back(std::move(run));
    }
    blocks += most;
    last.runs = t.runs;
    name = t.name;
    ++kernels;
  }
  summarise(result, wall_seconds);
  summarise(last, wall_seconds);
  const nlohmann::json all = fw::kernel::launch_report(result, dev.chip(), name, window.memory);
  const nlohmann::json view = kernels > 1 ? fw::kernel::launch_report(last, dev.chip(), name, window.memory) : all;
  nlohmann::json report = runtime_report(dev, window);
  report["overlap"] = all["overlap"];
  report["memory"] = all["memory"];
  report["sim"] = all["sim"];
  if (kernels == 1) {
    for (auto& t : report["tasks"]) {
      if (t["type"] == "kernel" && t["name"] == name) {
        t["pipes"] = view["tasks"][0]["pipes"];
        t["cores"] = result.cores_used;
      }
    }
  }
  report["kernel"] = {{"cycles", view["cycles"]}, {"time_us", view["time_us"]}, {"cores", last.cores_used},
                      {"pipes", view["tasks"][0]["pipes"]}};
  return report;
}

}  // namespace npusim::stack::runtime
