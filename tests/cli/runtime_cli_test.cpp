// pipeline_demo through the runtime: multi-stream overlap against its formula, the trace layout of DESIGN.md
// (Host, Runtime/TS per stream, cores, flows from launches to first blocks), the op summary, a functional check.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "cli/cli_support.hpp"
#include "traces/trace_check.hpp"

namespace {

using npusim_test::Result;
using npusim_test::run;

nlohmann::json demo(const std::string& args) {
  return npusim_test::json_of_success(run("kernel pipeline_demo " + args + " --json"), args);
}

TEST(RuntimeCli, StreamsOverlapCopiesAndComputeAsTheFormulaSays) {
  const int chunks = 8;
  const auto one = demo("-p streams=1 -p chunks=8");
  const auto two = demo("-p streams=2 -p chunks=8");
  std::map<std::string, double> dur;
  for (const auto& t : one["tasks"]) dur[t["name"].get<std::string>()] += t["dur_us"].get<double>() / chunks;
  const double h = dur["memcpy H2D"], k = dur["twice_plus_one"], d = dur["memcpy D2H"];
  // One stream: every chunk's three tasks in a row.
  EXPECT_NEAR(one["time_us"].get<double>(), chunks * (h + k + d), 0.01 * chunks * (h + k + d));
  // Two streams: the busiest resource (a link direction) paces the chunks; the first chunk's other stages add on.
  const double busiest = std::max({h, k, d});
  const double expected = chunks * busiest + (h + k + d - busiest);
  EXPECT_NEAR(two["time_us"].get<double>(), expected, 0.05 * expected);
  EXPECT_GT(one["time_us"].get<double>() / two["time_us"].get<double>(), 1.6);
}

TEST(RuntimeCli, TraceShowsHostStreamsCoresAndFlows) {
  const std::string path = ::testing::TempDir() + "npusim_pipeline_trace.json";
  const std::string csv = ::testing::TempDir() + "npusim_pipeline_summary.csv";
  // 1 MiB chunks: a copy (35 us) outlasts the host's submissions of a chunk (19 us), so the streams overlap.
  const auto j = demo("-p streams=2 -p chunks=4 -p bytes=1048576 --trace " + path + " --summary " + csv);
  const auto check = npusim::traces::check_trace_file(path);
  EXPECT_TRUE(check.ok()) << (check.ok() ? "" : check.problems.front());
  EXPECT_EQ(check.flows, 4u);  // one per launch
  std::ifstream in(path);
  const auto trace = nlohmann::json::parse(in);
  std::map<int, std::string> process;
  for (const auto& e : trace["traceEvents"])
    if (e["ph"] == "M" && e["name"] == "process_name") process[e["pid"].get<int>()] = e["args"]["name"].get<std::string>();
  int rt = -1;
  bool host = false, core = false;
  for (const auto& [pid, name] : process) {
    if (name == "Runtime/TS") rt = pid;
    if (name == "Host") host = true;
    if (name.rfind("aiv", 0) == 0) core = true;
  }
  EXPECT_TRUE(host && core);
  ASSERT_GE(rt, 0);
  // A copy on one stream overlaps a kernel on the other.
  std::vector<std::tuple<int, std::string, double, double>> tasks;
  for (const auto& e : trace["traceEvents"])
    if (e["ph"] == "X" && e["pid"] == rt)
      tasks.emplace_back(e["tid"].get<int>(), e["name"].get<std::string>(), e["ts"].get<double>(),
                         e["ts"].get<double>() + e["dur"].get<double>());
  bool overlap = false;
  for (const auto& [ta, na, sa, ea] : tasks)
    for (const auto& [tb, nb, sb, eb] : tasks)
      if (ta != tb && na.rfind("memcpy", 0) == 0 && nb == "twice_plus_one" && sa < eb && sb < ea) overlap = true;
  EXPECT_TRUE(overlap);
  // The op summary: a header and one row per device task.
  std::ifstream s(csv);
  std::string line;
  std::getline(s, line);
  // Each unit once: a name that ends with its unit gets no second one (issue 24: start_us(us)).
  EXPECT_EQ(line.rfind(
                "task_id,stream,name,type,start_us,duration_us,wait_us,block_dim,cores,scalar_ratio,scalar_cycles,", 0),
            0u)
      << line;
  int rows = 0;
  while (std::getline(s, line)) ++rows;
  EXPECT_EQ(rows, static_cast<int>(j["tasks"].size()));
  std::remove(path.c_str());
  std::remove(csv.c_str());
}

TEST(RuntimeCli, FunctionalRunComputesEveryChunk) {
  const auto j = demo("-p streams=3 -p chunks=5 -p bytes=65536 --check");
  EXPECT_TRUE(j["check"]["passed"].get<bool>());
  Result bad = run("kernel pipeline_demo -p bytes=1500");
  EXPECT_EQ(bad.status, 1);
  EXPECT_NE(bad.err.find("bytes must be a positive multiple of 1 KiB"), std::string::npos) << bad.err;
  Result typo = run("kernel pipeline_demo -p stream=2");
  EXPECT_NE(typo.err.find("has no parameter 'stream'"), std::string::npos) << typo.err;
}

}  // namespace

namespace {

nlohmann::json read_json(const std::string& path) {
  std::ifstream in(path);
  return nlohmann::json::parse(in);
}

// Sums a pipe's stat over the cores (the entries with a `blocks` counter).
std::uint64_t over_cores(const nlohmann::json& chip, const std::string& pipe, const std::string& key) {
  std::uint64_t sum = 0;
  for (const auto& [name, c] : chip.items())
    if (c.contains("blocks") && c.contains(pipe)) sum += c[pipe][key].get<std::uint64_t>();
  return sum;
}

TEST(RuntimeCli, StatsFileHoldsEveryComponentsCountersAndAgreesWithTheReport) {
  const std::string path = ::testing::TempDir() + "npusim_softmax_stats.json";
  const std::string args = "op softmax -p shape=64x1024 --dtype fp16 --json --stats " + path;
  const nlohmann::json j = npusim_test::json_of_success(run(args), args);
  EXPECT_EQ(j["stats"], path);
  const nlohmann::json f = read_json(path);
  EXPECT_EQ(f["config"], j["config"]);
  const nlohmann::json& chip = f["stats"]["chip"];
  // Softmax reads each row into UB once (MTE2) and writes it back once (MTE3): rows x cols x 2 bytes each way.
  EXPECT_EQ(over_cores(chip, "mte2", "bytes"), 64u * 1024 * 2);
  EXPECT_EQ(over_cores(chip, "mte3", "bytes"), 64u * 1024 * 2);
  // The report's memory section is these counters over the run.
  EXPECT_EQ(chip["gm"]["read_bytes"], j["memory"]["gm_read_bytes"]);
  EXPECT_EQ(chip["hbm"]["read_bytes"], j["memory"]["hbm_read_bytes"]);
  EXPECT_EQ(chip["hbm"]["activates"], j["memory"]["hbm_activates"]);
  std::uint64_t blocks = 0;
  for (const auto& [name, c] : chip.items())
    if (c.contains("blocks")) blocks += c["blocks"].get<std::uint64_t>();
  std::uint64_t block_dim = 0;
  for (const auto& t : j["tasks"])
    if (t["type"] == "kernel") block_dim += t["block_dim"].get<std::uint64_t>();
  EXPECT_EQ(blocks, block_dim);
  // The task scheduler's own counters: the tasks of the report, by type, and the blocks it dispatched.
  std::uint64_t kernels = 0, memcpys = 0;
  for (const auto& t : j["tasks"]) {
    kernels += t["type"] == "kernel";
    memcpys += t["type"] == "memcpy";
  }
  EXPECT_EQ(chip["ts"]["kernels"].get<std::uint64_t>(), kernels);
  EXPECT_EQ(chip["ts"]["memcpys"].get<std::uint64_t>(), memcpys);
  EXPECT_GT(memcpys, 0u);
  EXPECT_EQ(chip["ts"]["blocks_dispatched"].get<std::uint64_t>(), block_dim);
  EXPECT_EQ(chip["ts"]["completions_waited"].get<std::uint64_t>(), 0u);  // the CLI's host drains as it goes
  EXPECT_EQ(f["units"]["chip.aiv0.mte2.bytes"]["unit"], "bytes");
  EXPECT_EQ(f["units"]["chip.hbm.activates"]["unit"], "count");
}

TEST(RuntimeCli, OutputsNamingOneFileOrAMissingDirectoryAreRefusedBeforeTheRun) {
  const std::string dir = ::testing::TempDir();
  npusim_test::expect_input_errors({
      {"op softmax -p shape=8x64 --trace " + dir + "same.json --stats " + dir + "same.json",
       "--trace and --stats name the same file"},
      {"op softmax -p shape=8x64 --summary " + dir + "x.csv --stats " + dir + "./x.csv",
       "--summary and --stats name the same file"},
      {"kernel vector_add --trace " + dir + "t.json --summary " + dir + "t.json",
       "--trace and --summary name the same file"},
      {"op softmax -p shape=8x64 --stats /nonexistent-dir/s.json", "--stats /nonexistent-dir/s.json: the directory"},
      {"op softmax -p shape=8x64 --summary /nonexistent-dir/s.csv", "--summary /nonexistent-dir/s.csv: the directory"},
  });
}

// Output files appear complete or not at all (issue 21, item 3). A finished run leaves exactly its files; a run
// stopped by SIGTERM (or Ctrl-C) says so on stderr, exits 128 + 15 and leaves neither its files nor their
// temporaries, and a trace from an earlier run under the same name is untouched.
TEST(RuntimeCli, OutputFilesAppearCompleteOrNotAtAll) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::path(::testing::TempDir()) / ("npusim_atomic." + std::to_string(getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string files = " --trace " + (dir / "t.json").string() + " --stats " + (dir / "s.json").string() +
                            " --summary " + (dir / "s.csv").string();
  const std::string small = "op softmax -p shape=8x64" + files + " --json";
  npusim_test::json_of_success(run(small), small);
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names, (std::vector<std::string>{"s.csv", "s.json", "t.json"}));
  const std::uintmax_t earlier = fs::file_size(dir / "t.json");
  fs::remove(dir / "s.json");
  fs::remove(dir / "s.csv");

  // A run long enough to be stopped while it writes its trace.
  const std::string big = "op flash_attention -p B=1 -p N=8 -p S=8192 -p D=128" + files;
  const std::string err = (dir / "err.txt").string();
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    const std::string cmd = "exec " + std::string(NPUSIM_BINARY) + " " + big + " >/dev/null 2>" + err;
    execl("/bin/sh", "sh", "-c", cmd.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  // Wait (up to a minute) until its trace's temporary exists, then stop it.
  bool writing = false;
  for (int i = 0; i < 600 && !writing; ++i) {
    for (const auto& e : fs::directory_iterator(dir))
      writing = writing || e.path().filename().string().rfind("t.json.part-", 0) == 0;
    if (!writing) usleep(100000);
  }
  EXPECT_TRUE(writing) << "the run never started its trace";
  kill(pid, SIGTERM);
  int raw = 0;
  waitpid(pid, &raw, 0);
  ASSERT_TRUE(WIFEXITED(raw));
  EXPECT_EQ(WEXITSTATUS(raw), 128 + SIGTERM);
  std::ifstream e(err);
  std::stringstream message;
  message << e.rdbuf();
  EXPECT_NE(message.str().find("npusim: interrupted by SIGTERM; no output file was left half-written"),
            std::string::npos)
      << message.str();
  names.clear();
  for (const auto& f : fs::directory_iterator(dir)) names.push_back(f.path().filename().string());
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names, (std::vector<std::string>{"err.txt", "t.json"}));
  EXPECT_EQ(fs::file_size(dir / "t.json"), earlier);
}

}  // namespace
