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

// Issue 24: keys that make a problem together (the UB's size, bank size and bank groups) blame the one the user set,
// naming the others to change with it; set together, they are taken.
TEST(Cli, AProblemOfSeveralKeysNamesTheOneTheUserSet) {
  Result set = run("info --set buffers.ub.size=96KiB");
  EXPECT_EQ(set.status, 1);
  EXPECT_NE(set.err.find("--set buffers.ub.size=96KiB: key 'buffers.ub.size': 96KiB of UB in banks of 4KiB is 24 "
                         "banks, which 16 bank groups cannot split evenly: set buffers.ub.size to a multiple of "
                         "64KiB, or buffers.ub.bank_groups to a divisor of 24 with it"),
            std::string::npos)
      << set.err;
  EXPECT_EQ(set.err.find("<built-in"), std::string::npos) << set.err;
  const std::string path = write_file("cli_ub.yaml", "extends: 910b\nbuffers:\n  ub: {size: 96KiB}\n");
  Result file = run("info --config " + path);
  EXPECT_EQ(file.status, 1);
  EXPECT_NE(file.err.find("cli_ub.yaml:3: key 'buffers.ub.size'"), std::string::npos) << file.err;
  Result groups = run("info --set buffers.ub.bank_groups=5");
  EXPECT_NE(groups.err.find("--set buffers.ub.bank_groups=5: key 'buffers.ub.bank_groups'"), std::string::npos)
      << groups.err;
  Result both =
      run("op flash_attention -p B=1 -p N=2 -p S=256 -p D=128 --set buffers.ub.size=96KiB "
          "--set buffers.ub.bank_groups=8 --json");
  ASSERT_EQ(both.status, 0) << both.err;
}

// Issue 24: a config that extends another without a description of its own says whose description it shows and
// what it changed since.
TEST(Cli, InfoSaysWhoseDescriptionAnExtendedConfigShows) {
  const std::string path = write_file("cli_desc.yaml", "extends: 910b\nname: mine\nl2: {capacity: 96MiB}\n");
  Result text = run("info --config " + path);
  ASSERT_EQ(text.status, 0) << text.err;
  EXPECT_NE(text.out.find("(the description of <built-in 910b>:"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("changed since: l2.capacity)"), std::string::npos) << text.out;
  nlohmann::json j = nlohmann::json::parse(run("info --json --config " + path + " --set clock.core=1.5GHz").out);
  EXPECT_EQ(j["changed_since_description"], nlohmann::json({"clock.core", "l2.capacity"}));
  const std::string own = write_file("cli_own.yaml", "extends: 910b\ndescription: my chip\nl2: {capacity: 96MiB}\n");
  nlohmann::json o = nlohmann::json::parse(run("info --json --config " + own).out);
  EXPECT_EQ(o["description"], "my chip");
  EXPECT_TRUE(o["changed_since_description"].empty());
  EXPECT_EQ(run("info").out.find("(the description of"), std::string::npos);
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
