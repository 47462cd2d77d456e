#include "firmware/kernel/report.hpp"

#include <algorithm>
#include <map>

#include "traces/overlap.hpp"

namespace npusim::fw::kernel {

using hw::isa::Pipe;

namespace {
// The order of pipe names in overlap keys ("mte2_vector").
constexpr Pipe kOrder[] = {Pipe::kS, Pipe::kMte1, Pipe::kMte2, Pipe::kMte3, Pipe::kM, Pipe::kV, Pipe::kFix};
}  // namespace

MemorySnapshot memory_snapshot(const hw::chip::Chip& chip) {
  MemorySnapshot s;
  if (const hw::mem::MemorySystem* ms = chip.memory_system()) {
    s.hbm = ms->hbm().stats();
    s.l2 = ms->l2().stats();
    s.totals = ms->totals();
  } else {
    s.gm_read_bytes = chip.gm().read_bytes();
    s.gm_write_bytes = chip.gm().write_bytes();
  }
  return s;
}

nlohmann::json launch_report(const LaunchResult& r, const hw::chip::Chip& chip, const std::string& op,
                             const MemorySnapshot* since) {
  const double hz = chip.config().clock.core_hz;
  const std::uint64_t cycles = r.end - r.start;
  nlohmann::json j;
  j["config"] = chip.config().name;
  j["cycles"] = cycles;
  j["time_us"] = static_cast<double>(cycles) / hz * 1e6;

  // Busy fraction per pipe: busy cycles summed over the cores that ran the task and have the pipe, over duration x
  // those cores (on split chips the cube pipes count the AIC, the vector pipes the AIV).
  nlohmann::json pipes = nlohmann::json::object();
  for (Pipe p : kOrder) {
    std::uint64_t busy = 0;
    std::vector<std::uint32_t> cores;
    for (const CoreRun& run : r.runs) {
      if (!hw::core::kind_has_pipe(run.kind, p)) continue;
      busy += run.pipes[static_cast<int>(p)].busy;
      if (std::find(cores.begin(), cores.end(), run.core_index) == cores.end()) cores.push_back(run.core_index);
    }
    const double denom = static_cast<double>(cycles) * static_cast<double>(cores.size());
    pipes[std::string(hw::isa::pipe_metric_name(p))] = denom > 0 ? static_cast<double>(busy) / denom : 0.0;
  }
  nlohmann::json task;
  task["name"] = op;
  task["op"] = op;
  task["stream"] = 0;
  task["block_dim"] = r.runs.empty() ? 0 : std::max_element(r.runs.begin(), r.runs.end(), [](const CoreRun& a, const CoreRun& b) {
                                         return a.block < b.block;
                                       })->block + 1;
  task["start_us"] = static_cast<double>(r.start) / hz * 1e6;
  task["dur_us"] = static_cast<double>(cycles) / hz * 1e6;
  task["cycles"] = cycles;
  task["cores"] = r.cores_used;
  task["pipes"] = pipes;
  j["tasks"] = nlohmann::json::array({task});

  // Overlap per pipe pair: time both were busy on the same core, over the shorter pipe's busy time (summed over
  // cores). Pairs where either pipe never worked are left out.
  nlohmann::json overlap = nlohmann::json::object();
  for (std::size_t a = 0; a < std::size(kOrder); ++a) {
    for (std::size_t b = a + 1; b < std::size(kOrder); ++b) {
      std::uint64_t both = 0, shorter = 0, busy_a = 0, busy_b = 0;
      for (const CoreRun& run : r.runs) {
        const auto& pa = run.pipes[static_cast<int>(kOrder[a])];
        const auto& pb = run.pipes[static_cast<int>(kOrder[b])];
        both += traces::overlap_length(pa.intervals, pb.intervals);
        shorter += std::min(pa.busy, pb.busy);
        busy_a += pa.busy;
        busy_b += pb.busy;
      }
      if (busy_a == 0 || busy_b == 0 || shorter == 0) continue;
      overlap[std::string(hw::isa::pipe_metric_name(kOrder[a])) + "_" +
              std::string(hw::isa::pipe_metric_name(kOrder[b]))] = static_cast<double>(both) / static_cast<double>(shorter);
    }
  }
  // Split chips: a block's cube and vector work sit on different cores. cube_vector is then the cycles in which
  // a block's AIC computed while at least one of its AIV did, over the smaller of the two busy times (the AIV's
  // busy time counted as the union of their intervals), summed over blocks.
  if (!overlap.contains("cube_vector")) {
    std::uint64_t both = 0, shorter = 0;
    std::map<std::uint32_t, std::pair<std::vector<const traces::Intervals*>, std::vector<const traces::Intervals*>>> blocks;
    for (const CoreRun& run : r.runs) {
      if (run.kind == hw::core::CoreKind::kCube) blocks[run.block].first.push_back(&run.pipes[static_cast<int>(Pipe::kM)].intervals);
      if (run.kind == hw::core::CoreKind::kVector) blocks[run.block].second.push_back(&run.pipes[static_cast<int>(Pipe::kV)].intervals);
    }
    for (const auto& [block, lists] : blocks) {
      if (lists.first.empty() || lists.second.empty()) continue;
      const traces::Intervals cube = traces::union_of(lists.first), vec = traces::union_of(lists.second);
      both += traces::overlap_length(cube, vec);
      shorter += std::min(traces::total_length(cube), traces::total_length(vec));
    }
    if (shorter > 0) overlap["cube_vector"] = static_cast<double>(both) / static_cast<double>(shorter);
  }
  j["overlap"] = overlap;

  const double seconds = static_cast<double>(cycles) / hz;
  nlohmann::json mem;
  const MemorySnapshot zero, &base = since ? *since : zero;
  if (const hw::mem::MemorySystem* ms = chip.memory_system()) {
    hw::mem::HbmStats h = ms->hbm().stats();
    h.read_bytes -= base.hbm.read_bytes;
    h.write_bytes -= base.hbm.write_bytes;
    h.bursts -= base.hbm.bursts;
    h.row_hits -= base.hbm.row_hits;
    h.activates -= base.hbm.activates;
    h.refreshes -= base.hbm.refreshes;
    std::vector<hw::mem::SliceStats> l2 = ms->l2().stats();
    for (std::size_t i = 0; i < l2.size() && i < base.l2.size(); ++i) {
      l2[i].hits -= base.l2[i].hits;
      l2[i].misses -= base.l2[i].misses;
      l2[i].evictions -= base.l2[i].evictions;
      l2[i].writebacks -= base.l2[i].writebacks;
      l2[i].bytes -= base.l2[i].bytes;
    }
    std::uint64_t hits = 0, misses = 0, l2_bytes = 0;
    for (const auto& sl : l2) {
      hits += sl.hits;
      misses += sl.misses;
      l2_bytes += sl.bytes;
    }
    hw::mem::MemoryTotals t = ms->totals();
    t.read_bytes -= base.totals.read_bytes;
    t.write_bytes -= base.totals.write_bytes;
    t.reads -= base.totals.reads;
    t.read_latency_cycles -= base.totals.read_latency_cycles;
    nlohmann::json slices = nlohmann::json::array();
    for (const auto& sl : l2)
      slices.push_back({{"hits", sl.hits}, {"misses", sl.misses}, {"evictions", sl.evictions},
                        {"writebacks", sl.writebacks}, {"bytes", sl.bytes}});
    mem = {{"model", "detailed"},
           {"hbm_read_bytes", h.read_bytes},
           {"hbm_write_bytes", h.write_bytes},
           {"hbm_avg_GBps", seconds > 0 ? static_cast<double>(h.read_bytes + h.write_bytes) / seconds / 1e9 : 0.0},
           {"hbm_row_hit_rate", h.row_hit_rate()},
           {"hbm_utilization", seconds > 0 ? static_cast<double>(h.read_bytes + h.write_bytes) / seconds /
                                                 chip.config().hbm.peak_bytes_per_second() : 0.0},
           {"l2_hit_rate", hits + misses ? static_cast<double>(hits) / static_cast<double>(hits + misses) : 0.0},
           {"l2_avg_GBps", seconds > 0 ? static_cast<double>(l2_bytes) / seconds / 1e9 : 0.0},
           {"gm_read_bytes", t.read_bytes},
           {"gm_write_bytes", t.write_bytes},
           {"avg_latency_ns", t.reads ? t.read_latency_cycles / static_cast<double>(t.reads) / hz * 1e9 : 0.0},
           {"hbm_activates", h.activates},
           {"l2_slices", slices}};
  } else {
    const auto rd = chip.gm().read_bytes() - base.gm_read_bytes, wr = chip.gm().write_bytes() - base.gm_write_bytes;
    mem = {{"model", "simple"},
           {"hbm_read_bytes", rd},
           {"hbm_write_bytes", wr},
           {"hbm_avg_GBps", seconds > 0 ? static_cast<double>(rd + wr) / seconds / 1e9 : 0.0},
           {"l2_hit_rate", nullptr},
           {"gm_read_bytes", rd},
           {"gm_write_bytes", wr}};
  }
  j["memory"] = mem;
  j["sim"] = {{"wall_seconds", r.wall_seconds},
              {"instructions", r.instructions},
              {"instructions_per_second", r.wall_seconds > 0 ? static_cast<double>(r.instructions) / r.wall_seconds : 0.0},
              {"mode", chip.mode() == hw::core::Mode::kFunctional ? "functional" : "timing"}};
  return j;
}

}  // namespace npusim::fw::kernel
