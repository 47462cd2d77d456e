// `npusim op flash_attention`: values against the CPU reference (softmax in double from the same fp16/bf16
// inputs; tolerances per dtype in cli/op_command.cpp) over heads, grouped-query heads, lengths that are not
// multiples of the blocks, head dims up to 256, causal and explicit masks, on split (tiny, 910b) and coupled (910)
// chips; the seed shape of issue 6 within 1e-3; Cube and Vector working at the same time; blocks that follow the UB.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <random>

#include "cli/cli_support.hpp"

namespace {

using npusim_test::op_json;

TEST(OpAttention, RandomShapesMatchTheReferenceOnSplitAndCoupledChips) {
  std::mt19937 rng(5);
  const int dims[] = {16, 32, 48, 64, 128, 256};
  for (const char* config : {"tiny", "910b", "910"}) {
    for (int i = 0; i < 6; ++i) {
      const int n = 1 + static_cast<int>(rng() % 4), groups = (i % 2) ? 1 : n;
      std::string args = "flash_attention --check --config " + std::string(config) + " -p B=" + std::to_string(1 + rng() % 2) +
                         " -p N=" + std::to_string(n) + " -p KVN=" + std::to_string(n / groups) +
                         " -p S=" + std::to_string(1 + rng() % 300) + " -p SK=" + std::to_string(1 + rng() % 300) +
                         " -p D=" + std::to_string(dims[rng() % 6]) + " -p causal=" + std::to_string(i % 3 == 0) +
                         " -p mask=" + std::to_string(i % 3 == 1) + " --dtype " + (i == 5 ? "bf16" : "fp16");
      const auto j = op_json(args);
      EXPECT_TRUE(j["check"]["passed"].get<bool>()) << args << " " << j["check"];
    }
  }
}

// Masks of shape [MB, MN, MS, SK] (each of MB, MN, MS 1 or full): per batch, per head, and a key-padding row per
// batch that every query row adds (read once, broadcast in the UB), against the reference's broadcasting. Random
// values differ per batch and head, so reading another batch's or row's mask fails the check.
TEST(OpAttention, BroadcastMasksMatchTheReferenceOnSplitAndCoupledChips) {
  for (const char* config : {"tiny", "910b", "910"}) {
    for (const char* ms : {"2,1,1", "2,3,37", "1,3,1", "2,1,37"}) {
      const std::string args = "flash_attention --check --config " + std::string(config) +
                               " -p B=2 -p N=3 -p S=37 -p SK=150 -p D=64 -p mask=1 -p mask_shape=" + ms;
      const auto j = op_json(args);
      EXPECT_TRUE(j["check"]["passed"].get<bool>()) << args << " " << j["check"];
    }
  }
  const auto causal = op_json("flash_attention --check --config 910b -p B=2 -p N=2 -p S=200 -p D=128 -p causal=1 -p mask=1 -p mask_shape=2,1,1 --dtype bf16");
  EXPECT_TRUE(causal["check"]["passed"].get<bool>()) << causal["check"];
}

// Issue 6: the seed shape (4, 32, 2048, 64, causal, fp16) within 1e-3 of the fp32 reference. About a minute of
// host time; scripts/test.sh --sanitize leaves it out.
TEST(OpAttention, SeedShapeIsWithinOneThousandth) {
  const auto j = op_json("flash_attention --check -p B=4 -p N=32 -p S=2048 -p D=64 -p causal=1");
  EXPECT_TRUE(j["check"]["passed"].get<bool>()) << j["check"];
  EXPECT_LT(j["check"]["max_abs_err"].get<double>(), 1e-3);
}

TEST(OpAttention, CubeAndVectorWorkAtTheSameTimeOnDifferentBlocks) {
  const std::string trace = ::testing::TempDir() + "fa_trace.json";
  const auto j = op_json("flash_attention -p B=1 -p N=24 -p S=1024 -p D=64 -p causal=1 --trace " + trace);
  EXPECT_GT(j["overlap"]["cube_vector"].get<double>(), 0.5) << j["overlap"];
  // In the trace, some Cube instruction (on an AIC) overlaps in time with a Vector instruction (on an AIV).
  const auto file = nlohmann::json::parse(std::ifstream(trace));
  const auto& t = file.is_array() ? file : file["traceEvents"];
  std::map<std::pair<int, int>, std::string> threads;
  for (const auto& e : t)
    if (e["ph"] == "M" && e["name"] == "thread_name") threads[{e["pid"].get<int>(), e["tid"].get<int>()}] = e["args"]["name"];
  std::vector<std::pair<double, double>> cube, vec;
  for (const auto& e : t) {
    if (e["ph"] != "X") continue;
    const std::string& name = threads[{e["pid"].get<int>(), e["tid"].get<int>()}];
    const double ts = e["ts"].get<double>(), end = ts + e["dur"].get<double>();
    if (name == "M") cube.push_back({ts, end});  // pipe tracks are named S, MTE1, MTE2, MTE3, M, V, FIX
    if (name == "V") vec.push_back({ts, end});
  }
  ASSERT_FALSE(cube.empty());
  ASSERT_FALSE(vec.empty());
  bool overlapping = false;
  for (const auto& c : cube)
    for (const auto& v : vec)
      if (c.first < v.second && v.first < c.second) overlapping = true;
  EXPECT_TRUE(overlapping);
  // The coupled chip reports the same overlap within one core.
  const auto coupled = op_json("flash_attention --config 910 -p B=1 -p N=32 -p S=512 -p D=64 -p causal=1");
  EXPECT_GT(coupled["overlap"]["cube_vector"].get<double>(), 0.2) << coupled["overlap"];
}

TEST(OpAttention, BlocksFollowTheUbAndStayCorrect) {
  const std::string shape = "flash_attention --check -p B=1 -p N=2 -p S=300 -p D=64 -p causal=1";
  const auto full = op_json(shape);
  const auto half = op_json(shape + " --set buffers.ub.size=96KiB --set buffers.ub.bank_groups=8");
  EXPECT_TRUE(full["check"]["passed"].get<bool>());
  EXPECT_TRUE(half["check"]["passed"].get<bool>());
  // The scores an AIV holds per pass: row_chunk rows of block_k keys.
  auto chunk = [](const nlohmann::json& j) {
    return j["op"]["tiling"]["row_chunk"].get<double>() * j["op"]["tiling"]["block_k"].get<double>();
  };
  EXPECT_LT(chunk(half), chunk(full));
}

// On 910b a block of 256 keys passes through L0 in two 128-key sub-blocks and through each AIV's UB in row chunks;
// keys that end mid-sub-block (600 = 256 + 256 + 88) and query rows that end mid-chunk (16 heads of 200 rows in
// ranges of 9 fractals: units of 128 rows and shorter ones, some ending at a head's 200th row) stay exact, with a
// causal or an explicit mask.
TEST(OpAttention, LongKeyBlocksPassThroughL0AndTheUbInPieces) {
  for (const char* extra : {" -p causal=1", " -p mask=1", ""}) {
    const auto j = op_json(std::string("flash_attention --check -p B=1 -p N=16 -p S=200 -p SK=600 -p D=128") + extra);
    EXPECT_TRUE(j["check"]["passed"].get<bool>()) << extra << " " << j["check"];
    const auto& t = j["op"]["tiling"];
    EXPECT_LT(t["key_pass"].get<double>(), t["block_k"].get<double>()) << t;
    EXPECT_LT(t["row_chunk"].get<double>(), t["block_q"].get<double>() / 2) << t;
  }
}

// Issue 19's bar: on 910b, B = 1, N = 1, D = 128, non-causal, S = 32768, at least 40 % of the Cube peak
// (HARDWARE.md: 24 AIC x 4096 MAC/cycle x 2 x 1.8 GHz = 353.9 TFLOPS), the flops being 4 S^2 D over the kernel's
// device time. Timing-only; the same kernel's values are checked at the shapes above.
TEST(OpAttention, LongSequencesReachFortyPercentOfTheCubePeakOn910b) {
  const auto j = op_json("flash_attention -p B=1 -p N=1 -p S=32768 -p D=128");
  const double peak = 24 * 4096 * 2 * 1.8e9, s = 32768;
  const double rate = 4 * s * s * 128 / (j["kernel"]["time_us"].get<double>() * 1e-6);
  EXPECT_GE(rate / peak, 0.40) << rate / 1e12 << " TFLOPS";
}

// Load balance across the cube cores (910b, 24 AIC): the rows are cut into one range per core by their estimated
// cost, so the busiest AIC's Cube time stays near the mean. Whole 128-row units handed out round-robin, heaviest
// first, gave the busiest core 3 units against a mean of 64 / 24 = 2.67 (+12.5 %) at S = 8192, and causal 60 key
// blocks against a mean of 1056 / 24 = 44 (+36 %); a short sequence (8 units) used 8 of the 24 cores.
TEST(OpAttention, RowRangesBalanceTheCubeCores) {
  struct Case {
    const char* args;
    double spread;      // the busiest AIC's Cube busy time over the mean, at most
    std::size_t cores;  // AICs with work: all 24, or (S = 1024) the 22 that ranges of ceil(64 / 24) = 3 fractals need
  };
  // Non-causal: 22 fractals of 16 rows against a mean of 21.33 (+3.1 %). Causal: the estimate weighs a unit by
  // its key blocks and the slowest pipe of a step, not the Cube alone, so the Cube's spread is wider.
  for (const Case& c :
       {Case{"-p S=8192", 1.04, 24}, Case{"-p S=8192 -p causal=1", 1.10, 24}, Case{"-p S=1024", 1.10, 22}}) {
    const std::string path = ::testing::TempDir() + "npusim_fa_balance.json";
    const std::string call = std::string("flash_attention -p B=1 -p N=1 -p D=128 ") + c.args + " --stats " + path;
    op_json(call);
    std::ifstream in(path);
    const auto chip = nlohmann::json::parse(in)["stats"]["chip"];
    std::vector<double> cube;
    for (const auto& [name, core] : chip.items())
      if (name.rfind("aic", 0) == 0 && core.contains("cube") && core["cube"]["busy_cycles"].get<double>() > 0)
        cube.push_back(core["cube"]["busy_cycles"].get<double>());
    ASSERT_EQ(cube.size(), c.cores) << call;
    double sum = 0, most = 0;
    for (double v : cube) {
      sum += v;
      most = std::max(most, v);
    }
    EXPECT_LE(most / (sum / static_cast<double>(c.cores)), c.spread) << call;
  }
}

// UB bank conflicts are on by default; FlashAttention's buffers are laid out so that the conflicts cost under 1 % of
// each Vector unit's busy cycles (what remains: in-place per-row updates of the running max and sum, partial-
// reduction combines, and on coupled chips the NZ -> ND conversion of O) on split and coupled chips, D = 64, 128
// and 256. Counted where they arise (chip.<core>.vector.bank_conflict_cycles), not as the kernel's time with and
// without them: a shift of a few cycles moves the cores' memory contention, which alone moves this kernel by up to
// 1 % (a cross-core flag latency of 1 cycle instead of 0 changes B=1 N=4 S=2048 D=128 from 110918 to 111334 cycles
// without conflicts).
TEST(OpAttention, LayoutsKeepUbBankConflictsUnderOnePercent) {
  for (const char* args : {"-p B=1 -p N=4 -p S=2048 -p D=64 -p causal=1", "-p B=1 -p N=4 -p S=2048 -p D=128",
                           "-p B=1 -p N=4 -p S=2048 -p D=256", "-p B=1 -p N=4 -p S=1024 -p D=128 --config 910"}) {
    const std::string path = ::testing::TempDir() + "npusim_fa_banks.json";
    const std::string call = std::string("flash_attention ") + args + " --stats " + path;
    op_json(call);
    std::ifstream in(path);
    const auto chip = nlohmann::json::parse(in)["stats"]["chip"];
    int cores = 0;
    for (const auto& [name, core] : chip.items()) {
      if (!core.contains("vector") || core["vector"]["busy_cycles"].get<double>() == 0) continue;
      ++cores;
      const double busy = core["vector"]["busy_cycles"].get<double>();
      EXPECT_LT(core["vector"]["bank_conflict_cycles"].get<double>(), 0.01 * busy) << call << ": " << name;
    }
    EXPECT_GT(cores, 0) << call;
  }
}

// Issue 24: more UB never makes FlashAttention slower. The tiling takes the largest blocks that fit and, among the
// row chunks that fit, the one its estimate says is fastest (fastest_row_chunk), not the largest: a whole 64-row
// half in one chunk hides none of its copies behind vector work (at 256 KiB it was 2.2 % slower than at 192 KiB).
// Within 0.5 %: a different UB size changes the bank count and so which buffers share a bank.
TEST(OpAttention, MoreUbIsNeverSlower) {
  for (const char* d : {"64", "128", "256"}) {
    double previous = 0;
    for (const char* ub : {"128KiB", "192KiB", "256KiB"}) {
      const std::string call =
          std::string("flash_attention -p B=2 -p N=8 -p S=2048 -p causal=1 -p D=") + d + " --set buffers.ub.size=" + ub;
      const double cycles = op_json(call)["kernel"]["cycles"].get<double>();
      if (previous > 0) {
        EXPECT_LE(cycles, previous * 1.005) << call;
      }
      previous = cycles;
    }
  }
}

TEST(OpAttention, BadCallsAreClearErrors) {
  npusim_test::expect_input_errors({
      {"op flash_attention -p B=1 -p N=2 -p S=4", "parameter 'D' is required"},
      {"op flash_attention -p B=1 -p N=2 -p S=4 -p D=40", "D=40 must be a multiple of 16"},
      {"op flash_attention -p B=1 -p N=2 -p S=4 -p D=512", "D='512' is not an integer in 0..256"},
      {"op flash_attention -p B=1 -p N=6 -p KVN=4 -p S=4 -p D=64", "N=6 query heads cannot be grouped over KVN=4"},
      {"op flash_attention -p B=1 -p N=2 -p S=4 -p D=64 -p scale=-1", "scale='-1' is not a positive number"},
      {"op flash_attention -p B=1 -p N=2 -p S=4 -p D=64 --dtype fp32", "flash_attention takes fp16 or bf16"},
      {"op flash_attention -p B=1 -p N=1 -p S=4 -p D=256 --config tiny --set buffers.l0b.size=4KiB", "no block of D=256 fits the buffers of chip tiny"},
      {"op flash_attention -p B=2 -p N=2 -p S=4 -p D=64 -p mask=1 -p mask_shape=3,1,1", "B of the mask must be 1 or 2"},
      {"op flash_attention -p B=2 -p N=2 -p S=4 -p D=64 -p mask=1 -p mask_shape=1,1", "mask_shape='1,1' is not MB,MN,MS"},
      {"op flash_attention -p B=2 -p N=2 -p S=4 -p D=64 -p mask_shape=2,1,1", "mask_shape is given without mask=1"},
  });
}

}  // namespace
