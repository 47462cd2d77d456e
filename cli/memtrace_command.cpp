#include "cli/memtrace_command.hpp"

#include <chrono>
#include <cmath>
#include <iomanip>
#include <iostream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "common/config/loader.hpp"
#include "common/util/error.hpp"
#include "common/util/file.hpp"
#include "hw/mem/trace_replay.hpp"
#include "traces/stats.hpp"

namespace npusim::cli {

// The largest --bytes: a trace's request is a cache line or a burst; this only keeps the sizes' sums from wrapping.
constexpr std::uint64_t kMaxRequestBytes = std::uint64_t{1} << 20;

int run_memtrace_command(const MemtraceOptions& opts) {
  const config::LoadedConfig loaded = config::load_config(opts.config, opts.sets);
  const config::ChipConfig& cfg = loaded.chip;
  if (opts.bytes == 0 || opts.bytes % cfg.hbm.burst_bytes != 0 || opts.bytes > kMaxRequestBytes) {
    throw InputError("--bytes " + std::to_string(opts.bytes) + " must be a positive multiple of hbm.burst_bytes (" +
                     std::to_string(cfg.hbm.burst_bytes) + ") of at most " + std::to_string(kMaxRequestBytes));
  }
  if (cfg.sim.memory_model != "detailed") {
    // The trace is replayed against the L2 and HBM models; simple_gm has neither (docs/memory.md).
    throw InputError("memtrace replays against the detailed memory system; sim.memory_model is '" +
                     cfg.sim.memory_model + "' (set it to detailed)");
  }
  if (!opts.stats.empty()) check_output_dir("--stats", opts.stats);  // before the replay
  hw::mem::MemorySystem memory(cfg, 1);
  traces::StatsRegistry stats;
  memory.register_stats(stats, "chip");
  hw::mem::TraceReplayer replay(memory, !opts.no_l2, opts.bytes);
  const auto t0 = std::chrono::steady_clock::now();
  traces::read_memtrace_file(opts.file, [&](const traces::MemTraceRecord& r) {
    if (opts.bytes > cfg.hbm.capacity ||
        r.addr > cfg.hbm.capacity - opts.bytes) {  // not r.addr + bytes, which wraps near 2^64
      throw InputError(opts.file + ":" + std::to_string(r.line) + ": address 0x" +
                       [&] {
                         std::ostringstream os;
                         os << std::hex << r.addr;
                         return os.str();
                       }() +
                       " (+" + std::to_string(opts.bytes) + " B) is outside the " + std::to_string(cfg.hbm.capacity) +
                       " B of device memory");
    }
    replay.issue(r);
  });
  replay.finish();
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const hw::mem::ReplayResult& res = replay.result();
  if (res.requests == 0) throw InputError(opts.file + ": no requests");

  const double hz = cfg.clock.core_hz;
  const double span_cycles = res.last_done - res.first_issue;
  const double seconds = span_cycles / hz;
  const hw::mem::HbmStats& h = memory.hbm().stats();
  std::uint64_t hits = 0, misses = 0;
  for (const auto& s : memory.l2().stats()) {
    hits += s.hits;
    misses += s.misses;
  }
  nlohmann::json j;
  j["config"] = cfg.name;
  j["cycles"] = static_cast<std::uint64_t>(std::ceil(span_cycles));
  j["time_us"] = seconds * 1e6;
  j["memory"] = {
      {"model", "detailed"},
      {"through_l2", !opts.no_l2},
      {"request_bytes", opts.bytes},
      {"requests", res.requests},
      {"reads", res.reads},
      {"writes", res.writes},
      {"hbm_read_bytes", h.read_bytes},
      {"hbm_write_bytes", h.write_bytes},
      {"hbm_avg_GBps", seconds > 0 ? static_cast<double>(h.read_bytes + h.write_bytes) / seconds / 1e9 : 0.0},
      {"request_avg_GBps", seconds > 0 ? static_cast<double>(res.bytes) / seconds / 1e9 : 0.0},
      {"hbm_peak_GBps", cfg.hbm.peak_bytes_per_second() / 1e9},
      {"avg_latency_ns", res.reads ? res.read_latency / static_cast<double>(res.reads) / hz * 1e9 : 0.0},
      {"row_hit_rate", h.row_hit_rate()},
      {"hbm_row_hit_rate_reads", h.read_row_hit_rate()},
      {"hbm_row_hit_rate_writes", h.write_row_hit_rate()},
      {"hbm_read_latency_ns", traces::histogram_json(h.read_latency, false)},
      {"hbm_write_latency_ns", traces::histogram_json(h.write_latency, false)},
      {"hbm_latency_histogram_ns", traces::buckets_json(h.read_latency, h.write_latency)},
      {"l2_hit_rate", opts.no_l2 || hits + misses == 0
                          ? nlohmann::json(nullptr)
                          : nlohmann::json(static_cast<double>(hits) / static_cast<double>(hits + misses))}};
  j["sim"] = {{"wall_seconds", wall},
              {"requests_per_second", wall > 0 ? static_cast<double>(res.requests) / wall : 0.0}};
  if (!opts.stats.empty()) {
    try {
      traces::write_stats_file(opts.stats, cfg.name, stats);
    } catch (const std::runtime_error& e) {
      throw InputError(std::string("--stats: ") + e.what());
    }
    j["stats"] = opts.stats;
  }
  if (opts.json) {
    std::cout << j.dump(2) << "\n";
  } else {
    const auto& m = j["memory"];
    std::cout << std::fixed << std::setprecision(3);
    std::cout << "memtrace " << opts.file << " on " << cfg.name << (opts.no_l2 ? " (no L2)" : " (through L2)") << "\n";
    std::cout << "  requests     " << res.requests << " (" << res.reads << " reads, " << res.writes << " writes, "
              << opts.bytes << " B each)\n";
    std::cout << "  time         " << j["time_us"].get<double>() << " us\n";
    std::cout << "  HBM          " << m["hbm_avg_GBps"].get<double>() << " GB/s of " << m["hbm_peak_GBps"].get<double>()
              << " GB/s peak\n";
    std::cout << "  latency      " << m["avg_latency_ns"].get<double>() << " ns (reads, accepted to data)\n";
    const auto& hr = m["hbm_read_latency_ns"];
    if (hr["count"].get<std::uint64_t>() > 0) {
      std::cout << "  HBM reads    mean " << hr["mean"].get<double>() << " ns, p50 " << hr["p50"].get<double>()
                << ", p90 " << hr["p90"].get<double>() << ", p99 " << hr["p99"].get<double>() << ", max "
                << hr["max"].get<double>() << " (arrival at the controllers to data)\n";
    }
    std::cout << "  row hit rate " << m["row_hit_rate"].get<double>() << " (reads "
              << m["hbm_row_hit_rate_reads"].get<double>() << ", writes " << m["hbm_row_hit_rate_writes"].get<double>()
              << ")\n";
    if (!m["l2_hit_rate"].is_null()) std::cout << "  L2 hit rate  " << m["l2_hit_rate"].get<double>() << "\n";
  }
  return 0;
}

}  // namespace npusim::cli
