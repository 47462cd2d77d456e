#include "stack/runtime/report.hpp"

#include <algorithm>
#include <map>
#include <string>
#include <vector>

namespace npusim::stack::runtime {

using hw::isa::Pipe;

std::string task_type_name(fw::ts::TaskType t) {
  switch (t) {
    case fw::ts::TaskType::kKernel: return "kernel";
    case fw::ts::TaskType::kMemcpy: return "memcpy";
    case fw::ts::TaskType::kEventRecord: return "event_record";
    case fw::ts::TaskType::kEventWait: return "event_wait";
    default: return "other";
  }
}

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

namespace {

// The blocks of one or more kernel tasks as one launch: their span, instructions, cores and host seconds.
struct Launch {
  std::uint64_t start = 0, end = 0;  // core cycles, first block start to last block end
  std::vector<fw::kernel::CoreRun> runs;
  fw::ts::PipeOverlap overlap;  // of the tasks' runs
  std::uint32_t cores_used = 0;
  std::uint64_t instructions = 0;
  double wall_seconds = 0;

  void summarise(double wall) {
    start = runs.empty() ? 0 : UINT64_MAX;
    std::vector<std::string> used;
    for (const auto& run : runs) {
      start = std::min(start, run.start);
      end = std::max(end, run.end);
      instructions += run.instructions;
      if (std::find(used.begin(), used.end(), run.core) == used.end()) used.push_back(run.core);
    }
    cores_used = static_cast<std::uint32_t>(used.size());
    wall_seconds = wall;
  }
  std::uint64_t cycles() const { return end - start; }
};

// Busy fraction per pipe: busy cycles summed over the cores that ran the launch and have the pipe, over duration x
// those cores (on split chips the cube pipes count the AIC, the vector pipes the AIV).
nlohmann::json launch_pipes(const Launch& l) {
  nlohmann::json pipes = nlohmann::json::object();
  for (Pipe p : kReportPipes) {
    std::uint64_t busy = 0;
    std::vector<std::uint32_t> cores;
    for (const fw::kernel::CoreRun& run : l.runs) {
      if (!hw::core::kind_has_pipe(run.kind, p)) continue;
      busy += run.pipes[static_cast<int>(p)].busy;
      if (std::find(cores.begin(), cores.end(), run.core_index) == cores.end()) cores.push_back(run.core_index);
    }
    const double denom = static_cast<double>(l.cycles()) * static_cast<double>(cores.size());
    pipes[std::string(hw::isa::pipe_metric_name(p))] = denom > 0 ? static_cast<double>(busy) / denom : 0.0;
  }
  return pipes;
}

// Overlap per pipe pair: time both were busy on the same core, over the shorter pipe's busy time (summed over
// cores). Pairs where either pipe never worked are left out. On split chips a block's cube and vector work sit on
// different cores: cube_vector is then the cycles in which a block's AIC computed while at least one of its AIV
// did, over the smaller of the two busy times, summed over blocks (fw::ts::PipeOverlap).
nlohmann::json launch_overlap(const Launch& l) {
  nlohmann::json overlap = nlohmann::json::object();
  for (std::size_t a = 0; a < std::size(kReportPipes); ++a) {
    for (std::size_t b = a + 1; b < std::size(kReportPipes); ++b) {
      std::uint64_t shorter = 0, busy_a = 0, busy_b = 0;
      for (const fw::kernel::CoreRun& run : l.runs) {
        const auto& pa = run.pipes[static_cast<int>(kReportPipes[a])];
        const auto& pb = run.pipes[static_cast<int>(kReportPipes[b])];
        shorter += std::min(pa.busy, pb.busy);
        busy_a += pa.busy;
        busy_b += pb.busy;
      }
      if (busy_a == 0 || busy_b == 0 || shorter == 0) continue;
      overlap[std::string(hw::isa::pipe_metric_name(kReportPipes[a])) + "_" +
              std::string(hw::isa::pipe_metric_name(kReportPipes[b]))] =
          static_cast<double>(l.overlap.pair(kReportPipes[a], kReportPipes[b])) / static_cast<double>(shorter);
    }
  }
  if (!overlap.contains("cube_vector") && l.overlap.cube_vector && l.overlap.cube_vector_shorter > 0) {
    overlap["cube_vector"] =
        static_cast<double>(l.overlap.cube_vector_both) / static_cast<double>(l.overlap.cube_vector_shorter);
  }
  return overlap;
}

// A counter's growth since the window's snapshot.
class Since {
 public:
  Since(const traces::StatsRegistry& reg, const traces::StatsRegistry::Snapshot* since) : reg_(reg), since_(since) {}
  std::uint64_t count(const std::string& path) const { return reg_.count(path) - (since_ ? since_->count(path) : 0); }
  double real(const std::string& path) const { return reg_.real(path) - (since_ ? since_->real(path) : 0.0); }
  traces::Histogram histogram(const std::string& path) const {
    return since_ ? reg_.histogram(path).since(since_->histogram(path)) : reg_.histogram(path);
  }

 private:
  const traces::StatsRegistry& reg_;
  const traces::StatsRegistry::Snapshot* since_;
};

double per_second(std::uint64_t bytes, double seconds) {
  return seconds > 0 ? static_cast<double>(bytes) / seconds / 1e9 : 0.0;
}

double ratio(std::uint64_t part, std::uint64_t whole) {
  return whole ? static_cast<double>(part) / static_cast<double>(whole) : 0.0;
}

// The `memory` section over `seconds` of device time, from the chip's counters (docs/metrics.md).
nlohmann::json memory_report(const hw::chip::Chip& chip, const traces::StatsRegistry::Snapshot* since, double seconds) {
  const Since s(chip.stats(), since);
  const std::uint64_t gm_rd = s.count("chip.gm.read_bytes"), gm_wr = s.count("chip.gm.write_bytes");
  if (!chip.stats().has("chip.hbm.read_bytes")) {
    return {{"model", "simple"},        {"hbm_read_bytes", gm_rd},
            {"hbm_write_bytes", gm_wr}, {"hbm_avg_GBps", per_second(gm_rd + gm_wr, seconds)},
            {"l2_hit_rate", nullptr},   {"gm_read_bytes", gm_rd},
            {"gm_write_bytes", gm_wr}};
  }
  const std::uint64_t rd = s.count("chip.hbm.read_bytes"), wr = s.count("chip.hbm.write_bytes");
  std::uint64_t hits = 0, misses = 0, l2_bytes = 0;
  nlohmann::json slices = nlohmann::json::array();
  for (std::size_t i = 0; chip.stats().has("chip.l2.slice" + std::to_string(i) + ".hits"); ++i) {
    const std::string at = "chip.l2.slice" + std::to_string(i) + ".";
    nlohmann::json slice = nlohmann::json::object();
    for (const char* key : {"hits", "misses", "evictions", "writebacks", "bytes"}) slice[key] = s.count(at + key);
    hits += slice["hits"].get<std::uint64_t>();
    misses += slice["misses"].get<std::uint64_t>();
    l2_bytes += slice["bytes"].get<std::uint64_t>();
    slices.push_back(std::move(slice));
  }
  const std::uint64_t reads = s.count("chip.gm.reads");
  const double hz = chip.config().clock.core_hz;
  return {
      {"model", "detailed"},
      {"hbm_read_bytes", rd},
      {"hbm_write_bytes", wr},
      {"hbm_avg_GBps", per_second(rd + wr, seconds)},
      {"hbm_row_hit_rate", ratio(s.count("chip.hbm.row_hits"), s.count("chip.hbm.bursts"))},
      {"hbm_utilization",
       seconds > 0 ? static_cast<double>(rd + wr) / seconds / chip.config().hbm.peak_bytes_per_second() : 0.0},
      {"l2_hit_rate", ratio(hits, hits + misses)},
      {"l2_avg_GBps", per_second(l2_bytes, seconds)},
      {"gm_read_bytes", gm_rd},
      {"gm_write_bytes", gm_wr},
      {"avg_latency_ns", reads ? s.real("chip.gm.read_latency_cycles") / static_cast<double>(reads) / hz * 1e9 : 0.0},
      {"hbm_activates", s.count("chip.hbm.activates")},
      {"hbm_row_hit_rate_reads", ratio(s.count("chip.hbm.read_row_hits"), s.count("chip.hbm.read_bursts"))},
      {"hbm_row_hit_rate_writes", ratio(s.count("chip.hbm.write_row_hits"), s.count("chip.hbm.write_bursts"))},
      {"hbm_read_latency_ns", traces::histogram_json(s.histogram("chip.hbm.read_latency"), false)},
      {"hbm_write_latency_ns", traces::histogram_json(s.histogram("chip.hbm.write_latency"), false)},
      {"hbm_latency_histogram_ns",
       traces::buckets_json(s.histogram("chip.hbm.read_latency"), s.histogram("chip.hbm.write_latency"))},
      {"l2_slices", slices}};
}

}  // namespace

ReportWindow window_from_now(const Device& dev, const traces::StatsRegistry::Snapshot& stats) {
  return ReportWindow{dev.submitted(), dev.api_calls().size(), &stats};
}

nlohmann::json runtime_report(const Device& dev, const ReportWindow& window) {
  const double hz = dev.chip().config().clock.core_hz;
  double first = 1e300, last = 0;
  nlohmann::json tasks = nlohmann::json::array();
  for (const auto& t : dev.tasks()) {
    if (t.task_id < window.first_task) continue;
    first = std::min(first, t.fetched_ns);
    last = std::max(last, t.end_ns);
    const PipeUse u = pipe_use(t);
    nlohmann::json pipes = nlohmann::json::object();
    for (Pipe p : kReportPipes) pipes[std::string(hw::isa::pipe_metric_name(p))] = u.fraction[static_cast<int>(p)];
    tasks.push_back({{"id", t.task_id},
                     {"name", t.name},
                     {"op", t.name},
                     {"nodes", dev.task_nodes(t.task_id)},
                     {"type", task_type_name(t.type)},
                     {"stream", t.stream},
                     {"block_dim", t.block_dim},
                     {"start_us", t.fetched_ns / 1e3},
                     {"dur_us", (t.end_ns - t.fetched_ns) / 1e3},
                     {"cycles", static_cast<std::uint64_t>((t.end_ns - t.fetched_ns) * 1e-9 * hz)},
                     {"wait_us", (t.fetched_ns - dev.submitted_ns(t.task_id)) / 1e3},
                     {"waves", t.waves},
                     {"pipes", pipes}});
  }
  nlohmann::json j;
  j["config"] = dev.chip().config().name;
  j["cycles"] = static_cast<std::uint64_t>(std::max(0.0, last - first) * 1e-9 * hz);
  j["time_us"] = std::max(0.0, last - first) / 1e3;
  j["tasks"] = tasks;
  const std::size_t calls = dev.api_calls().size() - std::min(dev.api_calls().size(), window.first_api_call);
  const auto& api = dev.api_calls();
  // The host time the window's calls took, from the first one's start to the last one's end (a synchronize ends
  // when the device work it waits for is done).
  const double span_ns = calls ? api.back().end_ns - api[api.size() - calls].start_ns : 0.0;
  j["host"] = {
      {"api_calls", calls}, {"end_us", api.empty() ? 0.0 : api.back().end_ns / 1e3}, {"span_us", span_ns / 1e3}};
  return j;
}

nlohmann::json run_report(Device& dev, double wall_seconds, const ReportWindow& window) {
  // The simulated instructions, the pipe overlaps and the memory counters cover every kernel of the window;
  // `kernel` describes the last one (the only one of `npusim op` and `npusim kernel`).
  Launch all, last;
  std::string name;
  std::size_t kernels = 0;
  for (const auto& t : dev.tasks()) {
    if (t.type != fw::ts::TaskType::kKernel || t.task_id < window.first_task) continue;
    all.runs.insert(all.runs.end(), t.runs.begin(), t.runs.end());
    all.overlap += t.overlap;
    last.runs = t.runs;
    last.overlap = t.overlap;
    name = t.name;
    ++kernels;
  }
  all.summarise(wall_seconds);
  last.summarise(wall_seconds);
  const hw::chip::Chip& chip = dev.chip();
  const double hz = chip.config().clock.core_hz;
  const nlohmann::json all_pipes = launch_pipes(all);
  const nlohmann::json last_pipes = kernels > 1 ? launch_pipes(last) : all_pipes;
  const Launch& view = kernels > 1 ? last : all;

  nlohmann::json report = runtime_report(dev, window);
  report["overlap"] = launch_overlap(all);
  report["memory"] = memory_report(chip, window.stats, static_cast<double>(all.cycles()) / hz);
  report["sim"] = {{"wall_seconds", all.wall_seconds},
                   {"instructions", all.instructions},
                   {"instructions_per_second",
                    all.wall_seconds > 0 ? static_cast<double>(all.instructions) / all.wall_seconds : 0.0},
                   {"mode", chip.mode() == hw::core::Mode::kFunctional ? "functional" : "timing"}};
  if (kernels == 1) {
    for (auto& t : report["tasks"]) {
      if (t["type"] == "kernel" && t["name"] == name) {
        t["pipes"] = last_pipes;
        t["cores"] = all.cores_used;
      }
    }
  }
  report["kernel"] = {{"cycles", view.cycles()},
                      {"time_us", static_cast<double>(view.cycles()) / hz * 1e6},
                      {"cores", last.cores_used},
                      {"pipes", last_pipes}};
  return report;
}

}  // namespace npusim::stack::runtime
