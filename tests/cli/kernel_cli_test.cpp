// `npusim kernel` end to end: the acceptance properties (double buffering overlaps and speeds up a
// copy-bound kernel, peaks are reached, rates move bound kernels proportionally), functional checks, the trace,
// and bad input. Every run is its own process, as SystemC needs.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <cctype>
#include <fstream>
#include <set>
#include <string>

#include "cli/cli_support.hpp"
#include "traces/trace_check.hpp"

namespace {

using npusim_test::Result;
using npusim_test::run;

nlohmann::json run_json(const std::string& args) { return npusim_test::json_of_success(run("kernel " + args + " --json"), args); }

// docs/firmware.md's table of measured runs stays true: each row whose first cell is a `npusim kernel` call is run
// and its kernel cycles compared with the documented figure (issue 24: a figure there had gone stale).
TEST(KernelCli, DocumentedCyclesAreWhatTheKernelsTake) {
  std::ifstream doc(std::string(NPUSIM_SOURCE_DIR) + "/docs/firmware.md");
  ASSERT_TRUE(doc.good());
  int rows = 0;
  for (std::string line; std::getline(doc, line);) {
    // | `kernel args` | cycles | notes |
    if (line.rfind("| `", 0) != 0) continue;
    const auto close = line.find("` | ", 3);
    if (close == std::string::npos) continue;
    const std::string call = line.substr(3, close - 3);
    const std::string rest = line.substr(close + 4);
    if (rest.empty() || !std::isdigit(static_cast<unsigned char>(rest[0]))) continue;  // the kernel list, not runs
    const std::uint64_t documented = std::stoull(rest);
    EXPECT_EQ(run_json(call)["kernel"]["cycles"].get<std::uint64_t>(), documented) << "docs/firmware.md: " << call;
    ++rows;
  }
  EXPECT_EQ(rows, 4);
}

TEST(KernelCli, JsonHasTheContractKeys) {
  const auto j = run_json("vector_add -p n=65536");
  for (const char* key : {"config", "cycles", "time_us", "tasks", "overlap", "memory", "sim"}) EXPECT_TRUE(j.contains(key)) << key;
  const auto& task = j["tasks"][2];
  for (const char* key : {"name", "op", "stream", "block_dim", "start_us", "dur_us", "cycles", "pipes"})
    EXPECT_TRUE(task.contains(key)) << key;
  for (const char* pipe : {"scalar", "cube", "vector", "mte1", "mte2", "mte3", "fixpipe"}) EXPECT_TRUE(task["pipes"].contains(pipe)) << pipe;
  for (const char* key : {"hbm_read_bytes", "hbm_write_bytes", "hbm_avg_GBps", "l2_hit_rate"})
    EXPECT_TRUE(j["memory"].contains(key));
  // 65536 fp16 in and out: 2 x 128 KiB read, 128 KiB written by the cores. The reads miss the cold L2 and come
  // from HBM; the writes stay in the write-back L2 (nothing is evicted).
  EXPECT_EQ(j["memory"]["gm_read_bytes"], 262144);
  EXPECT_EQ(j["memory"]["gm_write_bytes"], 131072);
  EXPECT_EQ(j["memory"]["hbm_read_bytes"], 262144);
  EXPECT_EQ(j["memory"]["hbm_write_bytes"], 0);
  EXPECT_EQ(j["memory"]["l2_hit_rate"], 0.0);
  EXPECT_EQ(j["config"], "910b");
  EXPECT_GT(j["sim"]["instructions"].get<double>(), 0);
  // 1.8 GHz: time = cycles / 1800 us (cycles are whole).
  EXPECT_NEAR(j["time_us"].get<double>(), j["cycles"].get<double>() / 1800.0, 1.0 / 1800);
  // Through the runtime: two copies in, the kernel, one copy out; the kernel's own span is under "kernel".
  ASSERT_EQ(j["tasks"].size(), 4u);
  EXPECT_EQ(j["tasks"][2]["name"], "vector_add");
  EXPECT_LT(j["kernel"]["cycles"].get<double>(), j["cycles"].get<double>());
}

TEST(KernelCli, DoubleBufferingOverlapsCopyAndComputeOn910b) {
  // Copy-bound: 2 x 32 KiB in and 32 KiB out per tile against a 128-repeat Add.
  const std::string args = "vector_add -p n=1048576 -p tile=16384 -p dtype=fp16";
  const auto one = run_json(args + " -p buffer_num=1");
  const auto two = run_json(args + " -p buffer_num=2");
  const double speedup = one["kernel"]["cycles"].get<double>() / two["kernel"]["cycles"].get<double>();
  EXPECT_GE(speedup, 1.5) << one["kernel"]["cycles"] << " vs " << two["kernel"]["cycles"];
  EXPECT_GE(two["overlap"]["mte2_vector"].get<double>(), 0.8);
  EXPECT_LE(one["overlap"]["mte2_vector"].get<double>(), 0.02);
  // The copy-in pipe is the bottleneck with two buffers.
  EXPECT_GE(two["tasks"][2]["pipes"]["mte2"].get<double>(), 0.85);
}

TEST(KernelCli, VectorAddIsBitExactAndFunctionalModeKeepsTheCycles) {
  for (const char* dtype : {"fp16", "fp32", "int32"}) {
    const std::string args = std::string("vector_add -p n=131072 -p tile=8192 -p dtype=") + dtype;
    const auto timing = run_json(args);
    const auto checked = run_json(args + " --check");
    EXPECT_TRUE(checked["check"]["passed"].get<bool>()) << dtype;
    EXPECT_EQ(checked["check"]["max_abs_err"].get<double>(), 0.0) << dtype;
    EXPECT_EQ(timing["cycles"], checked["cycles"]) << dtype;
    EXPECT_EQ(timing["kernel"]["cycles"], checked["kernel"]["cycles"]) << dtype;
    EXPECT_EQ(checked["sim"]["mode"], "functional");
    EXPECT_EQ(timing["sim"]["mode"], "timing");
  }
  // Several blocks on several cores, including a second wave on tiny (4 AIV).
  const auto waves = run_json("vector_add --config tiny -p n=65536 -p tile=1024 -p blocks=8 --check");
  EXPECT_TRUE(waves["check"]["passed"].get<bool>());
  EXPECT_EQ(waves["kernel"]["cores"], 4);
  EXPECT_EQ(waves["tasks"][2]["block_dim"], 8);
  EXPECT_EQ(waves["tasks"][2]["waves"], 2);
}

TEST(KernelCli, CubeAndVectorPeaksAreReached) {
  for (const char* config : {"910b", "910"}) {
    const auto cube = run_json(std::string("cube_peak --config ") + config);
    // Peak MACs per cycle of one core: fp16 fractal MACs per fractal cycle (16x16x16 per cycle on both configs).
    EXPECT_GE(cube["kernel"]["macs_per_cycle"].get<double>(), 0.95 * 4096) << config;
    const auto vec = run_json(std::string("vector_peak --config ") + config);
    // Vector peak: one 256 B repeat per cycles_per_repeat (2) cycles; the kernel runs 255-repeat Adds.
    const double repeats = 1000.0 * 255;
    EXPECT_GE(repeats * 2 / vec["kernel"]["cycles"].get<double>(), 0.95) << config;
  }
}

TEST(KernelCli, RatesMoveBoundKernelsProportionally) {
  // Each kernel is bound by one unit; doubling that unit's cost doubles the time. Tolerance: the fixed start-up
  // (first copy's latency, the pipeline fill, issue) is under 7.5 % of these runs.
  auto cycles = [](const std::string& args) { return run_json(args)["kernel"]["cycles"].get<double>(); };
  const double v1 = cycles("vector_peak"), v2 = cycles("vector_peak --set vector.cycles_per_repeat=4");
  EXPECT_NEAR(v2 / v1, 2.0, 2.0 * 0.075);
  // The Vector datapath's width: half as wide, twice the time; twice as wide, half the time.
  const double narrow = cycles("vector_peak --set vector.bytes_per_repeat=128");
  const double wide = cycles("vector_peak --set vector.bytes_per_repeat=512");
  EXPECT_NEAR(narrow / v1, 2.0, 2.0 * 0.075);
  EXPECT_NEAR(wide / v1, 0.5, 0.5 * 0.075);
  const double c1 = cycles("cube_peak"), c2 = cycles("cube_peak --set cube.fp16.cycles=2");
  EXPECT_NEAR(c2 / c1, 2.0, 2.0 * 0.075);
  // A copy-bound stream limited by the core's read port into the interconnect.
  const std::string stream = "vector_add -p n=1048576 -p tile=16384 -p buffer_num=2";
  const double g1 = cycles(stream + " --set noc.core_read_bytes_per_cycle=55");
  const double g2 = cycles(stream + " --set noc.core_read_bytes_per_cycle=27.5");
  EXPECT_NEAR(g2 / g1, 2.0, 2.0 * 0.075);
}

TEST(KernelCli, MatmulTileMatchesTheReferenceOnSplitAndCoupledChips) {
  for (const std::string config : {"910b", "910", "310p"}) {
    const auto j = run_json("matmul_tile --config " + config + " --check");
    EXPECT_TRUE(j["check"]["passed"].get<bool>()) << config << " " << j["check"];
    EXPECT_GT(j["tasks"][2]["pipes"]["cube"].get<double>(), 0) << config;
  }
  const auto small = run_json("matmul_tile --config tiny -p M=64 -p N=48 -p K=96 -p k_tile=32 --check");
  EXPECT_TRUE(small["check"]["passed"].get<bool>()) << small["check"];
  // Ping-pong buffers let the next K tile's copy start before the previous one left L1.
  const auto pp = run_json("matmul_tile -p K=2048");
  const auto single = run_json("matmul_tile -p K=2048 -p buffers=1");
  EXPECT_LT(pp["kernel"]["cycles"].get<double>(), 0.9 * single["kernel"]["cycles"].get<double>());
  EXPECT_GT(pp["overlap"]["mte2_cube"].get<double>(), 0.8);
}

TEST(KernelCli, TraceHasOneTrackPerPipeAndIsValid) {
  const std::string path = ::testing::TempDir() + "npusim_kernel_trace.json";
  const auto j = run_json("vector_add -p n=65536 -p tile=4096 --trace " + path);
  EXPECT_EQ(j["trace"], path);
  const auto problems = npusim::traces::check_trace_file(path);
  EXPECT_TRUE(problems.ok()) << (problems.ok() ? "" : problems.problems.front());
  EXPECT_GT(problems.slices, 10u);
  std::ifstream in(path);
  const auto trace = nlohmann::json::parse(in);
  std::set<std::string> tracks, slices;
  for (const auto& e : trace["traceEvents"]) {
    if (e["ph"] == "M" && e["name"] == "thread_name") tracks.insert(e["args"]["name"].get<std::string>());
    if (e["ph"] == "X") slices.insert(e["name"].get<std::string>());
  }
  for (const char* t : {"MTE2", "MTE3", "V", "S", "API", "stream 0"}) EXPECT_TRUE(tracks.count(t)) << t;
  EXPECT_TRUE(slices.count("DataCopy"));
  EXPECT_TRUE(slices.count("Add"));
  std::remove(path.c_str());
}

TEST(KernelCli, BadInputIsAClearError) {
  struct Case {
    std::string args, message;
  };
  const Case cases[] = {
      {"kernel nosuch", "no sample kernel named 'nosuch'"},
      {"kernel vector_add -p typo=3", "has no parameter 'typo'"},
      {"kernel vector_add -p buffer_num=4", "parameter 'buffer_num': 4 is out of range [1, 3]"},
      {"kernel vector_add -p n=abc", "'abc' is not a non-negative integer"},
      {"kernel vector_add -p dtype=fp64", "'fp64' is not one of fp16, fp32, int32"},
      {"kernel vector_add -p n=1000 -p blocks=3", "does not split into 3 blocks"},
      {"kernel vector_add -p tile=1000000", "does not fit"},
      {"kernel vector_add -p novalue", "expected key=value"},
      {"kernel cube_peak -p m=24", "multiples of the fp16 fractal"},
      {"kernel cube_peak --config tiny", "32768 B in L0A does not fit"},
      {"kernel vector_add --trace /nonexistent/dir/t.json", "--trace"},
  };
  for (const Case& c : cases) {
    Result r = run(c.args);
    EXPECT_EQ(r.status, 1) << c.args << "\n" << r.err;
    EXPECT_NE(r.err.find(c.message), std::string::npos) << c.args << "\n" << r.err;
    EXPECT_TRUE(r.out.empty()) << c.args;
  }
  Result help = run("kernel --help");
  EXPECT_EQ(help.status, 0);
  for (const char* name : {"vector_add", "cube_peak", "vector_peak", "matmul_tile"}) EXPECT_NE(help.out.find(name), std::string::npos);
}

}  // namespace
