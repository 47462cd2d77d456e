// The memory system end to end through `npusim kernel` (microbenchmarks) and `npusim memtrace`: the issue's
// acceptance properties, each against a formula from the config (910b: 4 HBM2e stacks, 1638.4 GB/s peak; one
// stack 409.6 GB/s; tRFC 350 ns, tREFI 3900 ns, tFAW 16 ns; 1.8 GHz core clock).
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>

#include "cli/cli_support.hpp"

namespace {

using npusim_test::Result;
using npusim_test::run;

nlohmann::json json_of(const std::string& args) { return npusim_test::json_of_success(run(args + " --json"), args); }

constexpr double kPeak910b = 1638.4;  // GB/s

TEST(MemoryCli, AllVectorCoresStreamingReachTheHbmLimit) {
  // Without refresh, activates and row conflicts between the 48 streams cost under 10 % of the peak; all-bank
  // refresh then takes tRFC of every tREFI (the refresh ceiling 1 - tRFC / tREFI, within 2 points).
  const auto j = json_of("kernel hbm_stream -p bytes=134217728");
  const double bw = j["memory"]["hbm_avg_GBps"].get<double>();
  const double no_refresh =
      json_of("kernel hbm_stream -p bytes=134217728 --set hbm.refresh=none")["memory"]["hbm_avg_GBps"].get<double>();
  EXPECT_GE(no_refresh, 0.9 * kPeak910b);
  EXPECT_LE(no_refresh, 1.0 * kPeak910b);
  EXPECT_NEAR(bw / no_refresh, 1 - 350.0 / 3900.0, 0.02);
  EXPECT_EQ(j["kernel"]["cores"], 48);
  // One core is limited by its own read port (noc.core_read_bytes_per_cycle = 110 B/cycle at 1.8 GHz = 198 GB/s).
  const auto one = json_of("kernel hbm_stream -p cores=1 -p bytes=33554432 -p access=65536");
  const double port = 110 * 1.8;
  EXPECT_LE(one["memory"]["hbm_avg_GBps"].get<double>(), port);
  EXPECT_GE(one["memory"]["hbm_avg_GBps"].get<double>(), 0.8 * port);
}

TEST(MemoryCli, DoublingThePinRateSpeedsTheStreamUp) {
  const double base = json_of("kernel hbm_stream -p bytes=134217728")["kernel"]["cycles"].get<double>();
  const double fast =
      json_of("kernel hbm_stream -p bytes=134217728 --set hbm.pin_rate=6.4Gbps")["kernel"]["cycles"].get<double>();
  EXPECT_GE(base / fast, 1.8);
  EXPECT_LE(base / fast, 2.0);
}

TEST(MemoryCli, L2StreamRunsAtL2BandwidthUntilTheWorkingSetOutgrowsTheL2) {
  // 64 MiB read 4 times fits the 192 MiB L2: after the first pass every read hits.
  const auto fits = json_of("kernel l2_stream -p working_set=67108864 -p passes=4");
  EXPECT_NEAR(fits["memory"]["l2_hit_rate"].get<double>(), 0.75, 0.01);
  EXPECT_GE(fits["memory"]["l2_avg_GBps"].get<double>(), 2 * kPeak910b);
  // A working set 5x the L2 (here a 12 MiB L2) thrashes it: every read misses and the stream runs at HBM speed.
  const auto big = json_of("kernel l2_stream -p working_set=67108864 -p passes=2 --set l2.capacity=12MiB");
  EXPECT_LE(big["memory"]["l2_hit_rate"].get<double>(), 0.05);
  EXPECT_LE(big["memory"]["l2_avg_GBps"].get<double>(), kPeak910b);
  // Halving the L2 moves the knee: 128 MiB fits 192 MiB but not 96 MiB.
  const auto before = json_of("kernel l2_stream -p working_set=134217728 -p passes=4");
  const auto after = json_of("kernel l2_stream -p working_set=134217728 -p passes=4 --set l2.capacity=96MiB");
  const auto small = json_of("kernel l2_stream -p working_set=33554432 -p passes=4 --set l2.capacity=96MiB");
  EXPECT_GE(before["memory"]["l2_hit_rate"].get<double>(), 0.6);
  EXPECT_LE(after["memory"]["l2_hit_rate"].get<double>(), 0.4);
  EXPECT_GE(small["memory"]["l2_hit_rate"].get<double>(), 0.7);
  EXPECT_GT(before["memory"]["l2_avg_GBps"].get<double>(), 1.3 * after["memory"]["l2_avg_GBps"].get<double>());
}

TEST(MemoryCli, LatencyProbeMeasuresTheDocumentedSums) {
  // docs/memory.md: an L2 hit costs bytes / core port rate + 2 x noc.latency + l2.hit_latency cycles; an HBM line
  // fill adds l2.miss_latency cycles and, in ns, controller + (bank groups - 1) x tRRD + tRCD + tCL + the line's
  // 16 bursts (1.25 ns each). Refresh off, so no read meets a refresh window.
  const double hz = 1.8e9;
  const double l2 = (32.0 / 110 + 2 * 20 + 50) / hz * 1e9;
  const double hbm = (32.0 / 110 + 2 * 20 + 50 + 150) / hz * 1e9 + 10 + 3 * 4 + 14 + 16 + 16 * 1.25;
  const auto hit = json_of("kernel latency_probe -p target=l2 --set hbm.refresh=none");
  const auto miss = json_of("kernel latency_probe -p target=hbm --set hbm.refresh=none");
  EXPECT_NEAR(hit["memory"]["avg_latency_ns"].get<double>(), l2, 1e-6);
  EXPECT_NEAR(miss["memory"]["avg_latency_ns"].get<double>(), hbm, 1e-6);
  EXPECT_EQ(hit["memory"]["l2_hit_rate"], 1.0);
  EXPECT_EQ(miss["memory"]["l2_hit_rate"], 0.0);
}

std::string trace_file(const std::string& name, int n, bool random, std::uint64_t cycle = 0) {
  std::string path = ::testing::TempDir() + "npusim_" + name + "_" + std::to_string(getpid()) + ".trace";
  std::ofstream out(path);
  std::mt19937_64 rng(5);
  for (int i = 0; i < n; ++i) {
    const std::uint64_t addr = random ? (rng() % (1ULL << 24)) * 64 : static_cast<std::uint64_t>(i) * 64;
    out << "0x" << std::hex << addr << std::dec << " READ " << cycle << "\n";
  }
  return path;
}

TEST(MemoryCli, MemtraceOnOneStackMeetsTheRefreshCeilingAndTheActivateBound) {
  const std::string one_stack = " --set hbm.stacks=1 --no-l2";
  const std::string seq = trace_file("seq", 200000, false), rnd = trace_file("rnd", 100000, true);
  const auto s = json_of("memtrace " + seq + one_stack);
  // The activate window alone: tRRD_L = tRRD_S (a random stream's activates in one bank group are tRRD_L apart).
  const auto r = json_of("memtrace " + rnd + one_stack + " --set hbm.timing.tRRD_L=4ns");
  const double peak = 409.6;
  // Sequential 64 B reads: all-bank refresh takes tRFC of every tREFI.
  const double ceiling = 1 - 350.0 / 3900.0;
  EXPECT_NEAR(s["memory"]["hbm_avg_GBps"].get<double>() / peak, ceiling, 0.03);
  EXPECT_GE(s["memory"]["row_hit_rate"].get<double>(), 0.9);
  // Random 64 B reads: each opens a row in each of its two bank groups; at most 4 activates per tFAW per
  // pseudo-channel, outside refresh: 16 PCs x 4 x 32 B / 16 ns x (1 - tRFC/tREFI).
  const double faw_bound = 16 * 4 * 32 / 16.0 * ceiling;
  EXPECT_NEAR(r["memory"]["hbm_avg_GBps"].get<double>() / faw_bound, 1.0, 0.10);
  EXPECT_LE(r["memory"]["row_hit_rate"].get<double>(), 0.01);
  EXPECT_LT(r["memory"]["hbm_avg_GBps"].get<double>(), 0.4 * s["memory"]["hbm_avg_GBps"].get<double>());
  std::remove(seq.c_str());
  std::remove(rnd.c_str());
}

TEST(MemoryCli, MemtraceIdleBankReadCostsTheDocumentedSum) {
  // One 32 B read at cycle 1800 (1 us, between refresh windows): controller 10 + tRCD 14 + tCL 16 + one burst.
  const std::string one = trace_file("one", 1, false, 1800);
  const auto j = json_of("memtrace " + one + " --no-l2 --bytes 32");
  EXPECT_NEAR(j["memory"]["avg_latency_ns"].get<double>(), 10 + 14 + 16 + 1.25, 1e-9);
  // The latency statistics (from arrival at the controllers, here the same): every percentile is that read's.
  const auto& lat = j["memory"]["hbm_read_latency_ns"];
  EXPECT_EQ(lat["count"], 1);
  for (const char* k : {"mean", "p50", "p90", "p99", "max"}) EXPECT_NEAR(lat[k].get<double>(), 41.25, 1e-9) << k;
  EXPECT_EQ(j["memory"]["hbm_write_latency_ns"]["count"], 0);
  EXPECT_EQ(j["memory"]["hbm_latency_histogram_ns"]["reads"], nlohmann::json::parse("[[42.0, 1]]"));
  EXPECT_EQ(j["memory"]["hbm_row_hit_rate_reads"], 0.0);
  // Through the L2 the same read misses and fills a 512 B line.
  const auto l2 = json_of("memtrace " + one);
  EXPECT_EQ(l2["memory"]["l2_hit_rate"], 0.0);
  EXPECT_EQ(l2["memory"]["hbm_read_bytes"], 512);
  std::remove(one.c_str());
}

TEST(MemoryCli, RandomSmallReadsAreFarSlowerThanSequentialOnes) {
  // Through the L2 (910b, all stacks): a random 64 B read fetches a whole 512 B line and opens rows for it, so it
  // moves 8x its bytes from HBM and opens a row in each bank group for it; sequential reads share each line.
  const std::string seq = trace_file("seq_l2", 100000, false), rnd = trace_file("rnd_l2", 100000, true);
  const auto s = json_of("memtrace " + seq);
  const auto r = json_of("memtrace " + rnd);
  EXPECT_LT(r["memory"]["request_avg_GBps"].get<double>(), 0.2 * s["memory"]["request_avg_GBps"].get<double>());
  EXPECT_NEAR(r["memory"]["hbm_read_bytes"].get<double>() / (100000 * 64), 8.0, 0.3);  // a few random repeats hit
  EXPECT_NEAR(s["memory"]["hbm_read_bytes"].get<double>() / (100000 * 64), 1.0, 0.01);
  EXPECT_NEAR(s["memory"]["l2_hit_rate"].get<double>(), 7.0 / 8, 0.01);
  // The same through the cores' DataCopy: 64 B random reads over 1 GiB.
  const auto k = json_of("kernel hbm_stream -p bytes=4194304 -p access=64 -p pattern=random");
  EXPECT_NEAR(k["memory"]["hbm_read_bytes"].get<double>() / k["memory"]["gm_read_bytes"].get<double>(), 8.0, 0.5);
  std::remove(seq.c_str());
  std::remove(rnd.c_str());
}

// `memtrace --stats`: the memory system's counters behind the report. Sequential 64 B reads through the L2: one
// lookup per request, and a 512 B line missed once per 8 requests (7 of 8 hit), each miss a line read from HBM.
TEST(MemoryCli, MemtraceStatsAreTheCountersBehindTheReport) {
  const std::string seq = trace_file("seq_stats", 8000, false);
  const std::string path = ::testing::TempDir() + "npusim_memtrace_stats.json";
  const auto j = json_of("memtrace " + seq + " --stats " + path);
  EXPECT_EQ(j["stats"], path);
  std::ifstream in(path);
  const nlohmann::json f = nlohmann::json::parse(in);
  const nlohmann::json& chip = f["stats"]["chip"];
  EXPECT_EQ(chip["hbm"]["read_bytes"], j["memory"]["hbm_read_bytes"]);
  EXPECT_EQ(chip["gm"]["reads"].get<std::uint64_t>(), 8000u);
  EXPECT_EQ(chip["gm"]["read_bytes"].get<std::uint64_t>(), 8000u * 64);
  std::uint64_t hits = 0, misses = 0;
  for (const auto& [name, slice] : chip["l2"].items()) {
    hits += slice["hits"].get<std::uint64_t>();
    misses += slice["misses"].get<std::uint64_t>();
  }
  EXPECT_EQ(hits + misses, 8000u);
  EXPECT_EQ(misses, 1000u);
  EXPECT_EQ(chip["hbm"]["read_bytes"].get<std::uint64_t>(), misses * 512);
  EXPECT_EQ(f["units"]["chip.hbm.read_bytes"]["unit"], "bytes");
  const Result bad = run("memtrace " + seq + " --stats /nonexistent-dir/s.json");
  EXPECT_EQ(bad.status, 1);
  EXPECT_NE(bad.err.find("--stats /nonexistent-dir/s.json: the directory"), std::string::npos) << bad.err;
  std::remove(seq.c_str());
}

TEST(MemoryCli, SampleTracesReplayAndBadTracesAreClearErrors) {
  for (const char* t : {"seq_read_64B", "random_read_64B", "mixed_rw_64B", "two_streams_64B"}) {
    Result r = run(std::string("memtrace ") + NPUSIM_SOURCE_DIR + "/traces/samples/" + t + ".trace");
    EXPECT_EQ(r.status, 0) << t << r.err;
    EXPECT_NE(r.out.find("GB/s"), std::string::npos);
  }
  // HBM2 legacy channels (910: one 128-bit channel per stack channel, 64 B bursts) replay too.
  const auto legacy = json_of(std::string("memtrace ") + NPUSIM_SOURCE_DIR + "/traces/samples/seq_read_64B.trace --config 910 --no-l2");
  EXPECT_GT(legacy["memory"]["hbm_avg_GBps"].get<double>(), 0.5 * legacy["memory"]["hbm_peak_GBps"].get<double>());
  EXPECT_GE(legacy["memory"]["row_hit_rate"].get<double>(), 0.9);
  const std::string bad = npusim_test::write_file("bad.trace", "0x40 READ 0\n0x80 FETCH 4\n");
  Result r = run("memtrace " + bad);
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("bad.trace:2: 'FETCH' is neither READ nor WRITE"), std::string::npos) << r.err;
  const std::string back = npusim_test::write_file("back.trace", "0x40 READ 10\n0x80 READ 4\n");
  r = run("memtrace " + back);
  EXPECT_NE(r.err.find("back.trace:2: cycle 4 is before the previous request's 10"), std::string::npos) << r.err;
  r = run("memtrace /nonexistent.trace");
  EXPECT_NE(r.err.find("cannot open memory trace"), std::string::npos);
  r = run("memtrace " + bad + " --bytes 48");
  EXPECT_NE(r.err.find("--bytes 48 must be a positive multiple of hbm.burst_bytes"), std::string::npos) << r.err;
  const std::string far = npusim_test::write_file("far.trace", "0xffffffffffff READ 0\n");
  r = run("memtrace " + far);
  EXPECT_NE(r.err.find("is outside the"), std::string::npos) << r.err;
}

// hbm.scheduler end to end: two sequential read streams that meet in every bank (rows 0 and 1, the row hash off)
// find the other stream's row open at nearly every request. FCFS serves each bank in arrival order, so every
// request is a row conflict; FR-FCFS serves each stream's hits while the other's precharge waits (tRAS), so most are
// hits and the same trace moves more bytes per ns with shorter latencies.
TEST(MemoryCli, FrFcfsServesTheRowHitsOfInterleavedStreams) {
  std::string trace;
  for (int i = 0; i < 2048; ++i) {
    char line[96];
    std::snprintf(line, sizeof line, "0x%x READ %d\n0x%x READ %d\n", i * 64, i / 4, (1 << 20) + i * 64, i / 4);
    trace += line;
  }
  const std::string path = npusim_test::write_file("two_streams.trace", trace);
  const std::string args = "memtrace " + path + " --no-l2 --set hbm.row_hash=false --json --set hbm.scheduler=";
  const auto fr = json_of(args + "fr_fcfs")["memory"], fcfs = json_of(args + "fcfs")["memory"];
  EXPECT_EQ(fcfs["row_hit_rate"].get<double>(), 0.0);
  EXPECT_GT(fr["row_hit_rate"].get<double>(), 0.5);
  EXPECT_GT(fr["hbm_avg_GBps"].get<double>(), 1.5 * fcfs["hbm_avg_GBps"].get<double>());
  EXPECT_LT(fr["hbm_read_latency_ns"]["p99"].get<double>(), fcfs["hbm_read_latency_ns"]["p50"].get<double>());
  // The cap bounds the passing: with none allowed, FR-FCFS is FCFS.
  const auto capped = json_of(args + "fr_fcfs --set hbm.scheduler_cap=0")["memory"];
  EXPECT_EQ(capped["hbm_avg_GBps"].get<double>(), fcfs["hbm_avg_GBps"].get<double>());
  const Result bad = run("memtrace " + path + " --set hbm.scheduler=lifo");
  EXPECT_NE(bad.status, 0);
  EXPECT_NE(bad.err.find("hbm.scheduler"), std::string::npos) << bad.err;
  std::remove(path.c_str());
}

TEST(MemoryCli, KernelTraceHasMemoryCounters) {
  const std::string path = ::testing::TempDir() + "npusim_mem_counters.json";
  json_of("kernel hbm_stream -p bytes=8388608 --trace " + path);
  std::ifstream in(path);
  const auto trace = nlohmann::json::parse(in);
  int hbm = 0, l2 = 0;
  for (const auto& e : trace["traceEvents"]) {
    if (e["ph"] != "C") continue;
    if (e["name"] == "HBM") ++hbm;
    if (e["name"] == "L2 hit rate") ++l2;
  }
  EXPECT_GT(hbm, 2);
  EXPECT_GT(l2, 2);
  std::remove(path.c_str());
}

}  // namespace
