// MatMul's tiling (stack/ops/matmul/tiling.cpp, plan_tiling), called directly: the documented tile of the 4096^3
// call, tiles that follow L1 and L0, clipped tiles for small matrices, where the bias and activation go, an error
// naming the chip when no tile fits; and its buffer plans (matmul_buffers), which the kernels allocate exactly.
#include <gtest/gtest.h>

#include <array>
#include <functional>

#include "common/config/loader.hpp"
#include "common/util/error.hpp"
#include "stack/ops/matmul/matmul_common.hpp"
#include "tests/stack/ops/kernel_peaks.hpp"

namespace npusim::stack::ops::matmul {
namespace {

config::ChipConfig chip(const char* name, const std::vector<std::string>& set = {}) {
  return config::load_config(name, set).chip;
}

MatmulShape shape(std::uint32_t M, std::uint32_t N, std::uint32_t K, bool bias = false,
                  Activation act = Activation::kNone) {
  MatmulShape s;
  s.M = M;
  s.N = N;
  s.K = K;
  s.bias = bias;
  s.act = act;
  return s;
}

// docs/ops.md: "On 910b the 4096^3 call uses 128 x 256 x 64 tiles with step_k 320 and group_m 7".
TEST(MatmulTiling, TheDocumentedTileOf4096CubedOn910b) {
  const MatmulTiling t = plan_tiling(shape(4096, 4096, 4096), 2, chip("910b"));
  EXPECT_EQ(t.base_m, 128u);
  EXPECT_EQ(t.base_n, 256u);
  EXPECT_EQ(t.base_k, 64u);
  EXPECT_EQ(t.step_k, 320u);
  EXPECT_EQ(t.group_m, 7u);
  EXPECT_EQ(t.tiles_m, 32u);
  EXPECT_EQ(t.tiles_n, 16u);
  EXPECT_EQ(t.block_dim, 24u);
  EXPECT_FALSE(t.vector_epilogue);
}

// The tile order sweeps odd groups backwards only when A, B and C together outgrow the L2 (192 MiB on 910b): at
// 4096^3 they take 96 MiB, at 8192^3 384 MiB; a smaller L2 turns it on at 4096^3.
TEST(MatmulTiling, TheSerpentineOrderIsForOperandsLargerThanTheL2) {
  EXPECT_FALSE(plan_tiling(shape(4096, 4096, 4096), 2, chip("910b")).serpentine);
  EXPECT_TRUE(plan_tiling(shape(8192, 8192, 8192), 2, chip("910b")).serpentine);
  EXPECT_TRUE(plan_tiling(shape(4096, 4096, 4096), 2, chip("910b", {"l2.capacity=48MiB"})).serpentine);
}

// step_k is as many base_k as the double-buffered L1 steps hold, base_k the most the double-buffered L0A/L0B hold:
// halving L1 halves step_k, halving L0A and L0B halves base_k.
TEST(MatmulTiling, TilesFollowL1AndL0) {
  const MatmulShape s = shape(256, 256, 1024);
  const MatmulTiling full = plan_tiling(s, 2, chip("910b"));
  const MatmulTiling half_l1 = plan_tiling(s, 2, chip("910b", {"buffers.l1.size=256KiB"}));
  const MatmulTiling half_l0 = plan_tiling(s, 2, chip("910b", {"buffers.l0a.size=32KiB", "buffers.l0b.size=32KiB"}));
  EXPECT_EQ(full.step_k, 2 * half_l1.step_k);
  EXPECT_EQ(full.base_k, 2 * half_l0.base_k);
}

// A matrix smaller than a tile gets a tile clipped to it (in multiples of 16), and no more blocks than tiles.
TEST(MatmulTiling, SmallMatricesGetClippedTiles) {
  const MatmulTiling t = plan_tiling(shape(16, 40, 24), 2, chip("910b"));
  EXPECT_EQ(t.base_m, 16u);
  EXPECT_LE(t.base_n, 48u);
  EXPECT_EQ(t.base_k, 32u);  // K rounded up to 16
  EXPECT_EQ(t.block_dim, t.tiles_m * t.tiles_n);
}

// A bias seeds the Mmad through the bias table where the chip has one (910b) and goes to the vector epilogue where
// it has none (910); GELU always needs the epilogue, ReLU never (the FixPipe applies it).
TEST(MatmulTiling, BiasAndActivationGoWhereTheChipCanApplyThem) {
  const MatmulTiling bias_b = plan_tiling(shape(512, 512, 512, true), 2, chip("910b"));
  EXPECT_TRUE(bias_b.bias_table);
  EXPECT_FALSE(bias_b.vector_epilogue);
  const MatmulTiling bias_910 = plan_tiling(shape(512, 512, 512, true), 2, chip("910"));
  EXPECT_FALSE(bias_910.bias_table);
  EXPECT_TRUE(bias_910.vector_epilogue);
  EXPECT_GT(bias_910.epi_rows, 0u);
  EXPECT_TRUE(plan_tiling(shape(512, 512, 512, false, Activation::kGeluErf), 2, chip("910b")).vector_epilogue);
  EXPECT_FALSE(plan_tiling(shape(512, 512, 512, true, Activation::kRelu), 2, chip("910b")).vector_epilogue);
}

// Every tiling's plans fit their buffers, over shapes, chips and options (plan_tiling also checks this, as a bug).
TEST(MatmulTiling, EveryPlanFitsItsBuffers) {
  for (const char* name : {"tiny", "910b", "910", "310p"}) {
    const config::ChipConfig c = chip(name);
    const auto& b = c.buffers;
    for (const MatmulShape& s : {shape(4096, 4096, 4096), shape(1, 8192, 8192), shape(300, 17, 1000, true),
                                 shape(2048, 512, 64, true, Activation::kGeluTanh)}) {
      const MatmulTiling t = plan_tiling(s, 2, c);
      const MatmulBuffers p = matmul_buffers(s, t, 2);
      const std::string what = std::string(name) + " " + std::to_string(s.M) + "x" + std::to_string(s.N);
      EXPECT_LE(p.l1.total(b.l1.align), b.l1.size) << what;
      EXPECT_LE(p.l0a.total(b.l0a.align), b.l0a.size) << what;
      EXPECT_LE(p.l0b.total(b.l0b.align), b.l0b.size) << what;
      EXPECT_LE(p.l0c.total(b.l0c.align), b.l0c.size) << what;
      EXPECT_LE(p.ub.total(b.ub.align), b.ub.size) << what;
    }
  }
}

TEST(MatmulTiling, NoTileThatFitsIsAnErrorNamingTheChip) {
  try {
    plan_tiling(shape(256, 256, 256), 2, chip("910b", {"buffers.l0a.size=512B"}));
    FAIL() << "planned a tile with a 512 B L0A";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("matmul: no tile fits the L0/L1 buffers of chip 910b"), std::string::npos)
        << e.what();
  }
}

// The kernels allocate exactly the buffers the tiling counted: after a block set up its buffers, what it took of
// each space is its plan's total (split chips: L1, L0 and the bias table on the AIC, the epilogue's UB on each
// AIV; coupled chips: all on the one core). Each case is one block of one mix launch (one simulation per
// process); a case without an epilogue leaves its AIVs idle, as a cube launch would.
using testing::OpCase;

void expect_kernels_allocate_their_plans(const char* chip_name, const std::vector<OpCase>& cases) {
  const config::ChipConfig c = chip(chip_name);
  const OpDef* op = find_op("matmul");
  ASSERT_NE(op, nullptr);
  std::vector<std::string> what;
  std::vector<MatmulBuffers> plans;
  std::vector<bool> epilogue;
  std::vector<std::function<void()>> kernels;
  for (std::size_t i = 0; i < cases.size(); ++i) {
    const Params& p = cases[i].params;
    const MatmulShape s =
        shape(param_uint(p, "M", 0, 65535), param_uint(p, "N", 0, 65535), param_uint(p, "K", 0, 65535),
              param_uint(p, "bias", 0, 1), p.count("act") ? Activation::kGeluErf : Activation::kNone);
    const MatmulTiling t = plan_tiling(s, 2, c);
    ASSERT_GE(t.tiles_m * t.tiles_n, cases.size());
    plans.push_back(matmul_buffers(s, t, 2));
    epilogue.push_back(t.vector_epilogue);
    what.push_back("case " + std::to_string(i) + ": " + std::to_string(s.M) + "x" + std::to_string(s.N) + "x" +
                   std::to_string(s.K) + (s.bias ? " bias" : "") + (t.vector_epilogue ? " epilogue" : "") + " tile " +
                   std::to_string(t.base_m) + "x" + std::to_string(t.base_n));
    kernels.push_back(testing::op_kernel(*op, p, cases[i].dtype, c, i));
  }
  const std::vector<testing::BlockPeaks> seen =
      testing::run_recording_peaks(c, c.split() ? fw::kernel::KernelType::kMix : fw::kernel::KernelType::kCube, kernels,
                                   [&](std::size_t block) { return !epilogue[block]; });
  const auto& b = c.buffers;
  for (std::size_t i = 0; i < seen.size(); ++i) {
    const MatmulBuffers& plan = plans[i];
    EXPECT_EQ(plan.ub.total(b.ub.align) > 0, static_cast<bool>(epilogue[i])) << what[i];
    testing::expect_block_took(seen[i],
                               {{hw::isa::Space::kL1, plan.l1.total(b.l1.align)},
                                {hw::isa::Space::kL0A, plan.l0a.total(b.l0a.align)},
                                {hw::isa::Space::kL0B, plan.l0b.total(b.l0b.align)},
                                {hw::isa::Space::kL0C, plan.l0c.total(b.l0c.align)},
                                {hw::isa::Space::kBiasTable, plan.bias_table.total(b.bias_table.align)}},
                               plan.ub.total(b.ub.align), c.split(), what[i]);
  }
}

std::vector<OpCase> alloc_cases() {
  auto mm = [](const std::string& M, const std::string& N, const std::string& K, Params extra = {}) {
    Params p = {{"M", M}, {"N", N}, {"K", K}};
    p.insert(extra.begin(), extra.end());
    return OpCase{p};
  };
  std::vector<OpCase> cases = {mm("1024", "1024", "1024"), mm("1024", "1024", "512", {{"bias", "1"}}),
                               mm("1024", "1000", "300", {{"act", "gelu"}}),
                               mm("2048", "512", "96", {{"act", "gelu"}, {"bias", "1"}}), mm("2048", "2048", "1024")};
  cases.push_back(mm("1024", "2048", "256", {{"act", "gelu"}}));
  cases.back().dtype = hw::isa::DType::kBf16;
  return cases;
}

TEST(MatmulTiling, SplitKernelsAllocateExactlyThePlannedBuffers) {
  expect_kernels_allocate_their_plans("910b", alloc_cases());
}

TEST(MatmulTiling, CoupledKernelAllocatesExactlyThePlannedBuffers) {
  expect_kernels_allocate_their_plans("910", alloc_cases());
}

}  // namespace
}  // namespace npusim::stack::ops::matmul
