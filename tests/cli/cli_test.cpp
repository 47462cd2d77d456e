// The npusim binary end to end: info for every built-in config, JSON contract keys, help, and bad input giving a
// clear error and a non-zero exit.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "cli/cli_support.hpp"

namespace {

using npusim_test::Result;
using npusim_test::run;
using npusim_test::write_file;

TEST(Cli, InfoDefaultIs910b) {
  Result r = run("info");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("910b"), std::string::npos);
  EXPECT_NE(r.out.find("353.9 TFLOPS"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("AI Vector cores (AIV)"), std::string::npos);
}

TEST(Cli, InfoJsonHasTheContractKeysForEveryBuiltin) {
  for (const char* name : {"910b", "910", "310p", "tiny"}) {
    SCOPED_TRACE(name);
    Result r = run(std::string("info --json --config ") + name);
    ASSERT_EQ(r.status, 0) << r.err;
    nlohmann::json j = nlohmann::json::parse(r.out);
    for (const char* key : {"name", "cores", "clock_GHz", "peak_fp16_tflops", "peak_int8_tops", "peak_hbm_GBps",
                            "l2_bytes", "hbm_bytes"}) {
      EXPECT_TRUE(j.contains(key)) << key;
    }
    EXPECT_EQ(j["name"], name);
    EXPECT_GT(j["peak_fp16_tflops"].get<double>(), 0);
    // Also the table form.
    Result t = run(std::string("info --config ") + name);
    EXPECT_EQ(t.status, 0) << t.err;
  }
}

// HARDWARE.md: 24 x 4096 MAC x 2 x 1.8 GHz = 353.9 TFLOPS; 4 stacks x 1024 bit x 3.2 Gb/s / 8 = 1638.4 GB/s.
TEST(Cli, InfoJson910bFigures) {
  Result r = run("info --json --config 910b");
  ASSERT_EQ(r.status, 0) << r.err;
  nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_NEAR(j["peak_fp16_tflops"].get<double>(), 353.9, 0.05);
  EXPECT_NEAR(j["peak_hbm_GBps"].get<double>(), 1638.4, 0.1);
  EXPECT_EQ(j["cores"]["aic"], 24);
  EXPECT_EQ(j["cores"]["aiv"], 48);
  EXPECT_DOUBLE_EQ(j["clock_GHz"].get<double>(), 1.8);
  EXPECT_EQ(j["hbm_bytes"].get<std::uint64_t>(), 64ull << 30);
}

TEST(Cli, SetChangesDerivedFigures) {
  Result r = run("info --json --set clock.core=0.9GHz --set hbm.pin_rate=1.6Gbps");
  ASSERT_EQ(r.status, 0) << r.err;
  nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_NEAR(j["peak_fp16_tflops"].get<double>(), 353.9 / 2, 0.05);
  EXPECT_NEAR(j["peak_hbm_GBps"].get<double>(), 1638.4 / 2, 0.1);
}

TEST(Cli, InfoConfigFile) {
  std::string path = write_file("cli_cfg.yaml", "extends: 910b\nname: half\ncores: {aic: 12, aiv: 24}\n");
  Result r = run("info --json --config " + path);
  ASSERT_EQ(r.status, 0) << r.err;
  nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["name"], "half");
  EXPECT_NEAR(j["peak_fp16_tflops"].get<double>(), 353.9 / 2, 0.05);
}

TEST(Cli, BadConfigFileGivesFileLineKeyAndExitOne) {
  std::string path = write_file("cli_bad.yaml", "extends: 910b\nl2:\n  capacity: lots\n");
  Result r = run("info --config " + path);
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("cli_bad.yaml:3: key 'l2.capacity'"), std::string::npos) << r.err;
  EXPECT_TRUE(r.out.empty());
}

TEST(Cli, BadSetGivesError) {
  Result r = run("info --set buffers.l0a.size=100B");
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("key 'buffers.l0a.size'"), std::string::npos) << r.err;
}

TEST(Cli, UnknownConfigName) {
  Result r = run("info --config nonesuch");
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("'nonesuch' is neither a built-in config"), std::string::npos) << r.err;
}

TEST(Cli, HelpAndUsageErrors) {
  Result h = run("--help");
  EXPECT_EQ(h.status, 0);
  EXPECT_NE(h.out.find("info"), std::string::npos);
  Result sh = run("info --help");
  EXPECT_EQ(sh.status, 0);
  EXPECT_NE(sh.out.find("--config"), std::string::npos);
  EXPECT_NE(sh.out.find("--set"), std::string::npos);
  EXPECT_EQ(run("").status, 2);
  EXPECT_EQ(run("frobnicate").status, 2);
  Result bad = run("info --bogus");
  EXPECT_EQ(bad.status, 2);
  EXPECT_FALSE(bad.err.empty());
  EXPECT_EQ(run("--version").status, 0);
}

}  // namespace
