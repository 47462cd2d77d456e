// FlashAttention's tiling (stack/ops/attention/flash_attention.cpp, plan_fa), called directly: the largest blocks
// whose buffers fit, smaller for short sequences and smaller buffers, and an error naming the chip when none fits;
// and its buffer plans (fa_buffers), which the kernels allocate exactly.
// Measured block sizes are in docs/ops.md (910b, D = 64: 128 x 128; D = 256: 64 x 64).
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <functional>

#include "common/config/loader.hpp"
#include "common/util/error.hpp"
#include "stack/ops/attention/fa_common.hpp"
#include "tests/stack/ops/kernel_peaks.hpp"

namespace npusim::stack::ops::attention {
namespace {

config::ChipConfig chip(const char* name, const std::vector<std::string>& set = {}) {
  return config::load_config(name, set).chip;
}

FaShape shape(std::uint32_t S, std::uint32_t D, bool mask = false) {
  FlashAttentionCall c;
  c.B = 1;
  c.N = 8;
  c.KVN = 8;
  c.S = S;
  c.SK = S;
  c.D = D;
  c.mask = mask;
  return resolve(c);
}

TEST(FaTiling, BlocksOfTheDocumentedSizeOn910b) {
  // docs/ops.md: D = 64 and 128 take 128 x 256 blocks through L0 in 128-key passes, D = 256 64 x 128 in 64-key
  // passes (L0A holds Q, L0B a pass of K); the AIVs stream the scores in row chunks the UB holds, the fastest by
  // the estimate (32 rows for D = 64, where 40 would fit; 24, the most that fits, for D = 128).
  const FaTiling t64 = plan_fa(shape(4096, 64), 2, chip("910b"));
  EXPECT_EQ(t64.bq, 128u);
  EXPECT_EQ(t64.bk, 256u);
  EXPECT_EQ(t64.ck, 128u);
  EXPECT_EQ(t64.rc, 32u);
  const FaTiling t128 = plan_fa(shape(4096, 128), 2, chip("910b"));
  EXPECT_EQ(t128.bk, 256u);
  EXPECT_EQ(t128.ck, 128u);
  EXPECT_EQ(t128.rc, 24u);
  const FaTiling t256 = plan_fa(shape(4096, 256), 2, chip("910b"));
  EXPECT_EQ(t256.bq, 64u);
  EXPECT_EQ(t256.bk, 128u);
  EXPECT_EQ(t256.ck, 64u);
  // Coupled chips keep a block whole: one pass, no row chunks.
  const FaTiling coupled = plan_fa(shape(4096, 64), 2, chip("910"));
  EXPECT_EQ(coupled.ck, coupled.bk);
  EXPECT_EQ(coupled.rc, 0u);
  // One block per cube core at most; rows are cut finer than Bq when that spreads them over more cores (8 heads
  // of 128 rows over 24 cores), but never finer than a fractal of 16 rows (8 heads of 16 rows: 8 blocks).
  EXPECT_EQ(t64.block_dim, chip("910b").cube_cores());
  const FaTiling spread = plan_fa(shape(128, 64), 2, chip("910b"));
  EXPECT_EQ(spread.block_dim, 24u);  // 64 fractals in ranges of 2 and 3
  EXPECT_EQ(spread.bq, 48u);         // blocks no taller than the longest range: smaller buffers and workspace
  EXPECT_EQ(plan_fa(shape(16, 64), 2, chip("910b")).block_dim, 8u);
}

// The blocks' row ranges (balance_rows): every query row of every head in exactly one unit, units of at most Bq
// rows that start on a fractal and end on one or at the head's end, on every chip kind, causal or not.
TEST(FaTiling, RowRangesCoverEveryRowOnce) {
  struct Case {
    const char* chip;
    std::uint32_t B, N, S, D;
    bool causal;
  };
  for (const Case& k :
       {Case{"910b", 1, 1, 8192, 128, false}, Case{"910b", 1, 1, 8192, 128, true}, Case{"910b", 2, 5, 1000, 64, true},
        Case{"910b", 3, 7, 37, 256, false}, Case{"910", 1, 3, 200, 64, true}, Case{"tiny", 2, 2, 333, 32, false}}) {
    FlashAttentionCall c;
    c.B = k.B;
    c.N = k.N;
    c.S = k.S;
    c.D = k.D;
    c.causal = k.causal;
    const FaShape s = resolve(c);
    const config::ChipConfig ch = chip(k.chip);
    const FaTiling t = plan_fa(s, 2, ch);
    const std::string what = std::string(k.chip) + " B=" + std::to_string(k.B) + " N=" + std::to_string(k.N) +
                             " S=" + std::to_string(k.S) + (k.causal ? " causal" : "");
    ASSERT_EQ(t.first.size(), t.block_dim + 1u) << what;
    EXPECT_LE(t.block_dim, ch.cube_cores()) << what;
    std::vector<int> seen(static_cast<std::size_t>(k.B) * k.N * k.S, 0);
    for (std::uint32_t blk = 0; blk < t.block_dim; ++blk) {
      const std::vector<FaUnit> units = units_of(s, t, blk);
      EXPECT_FALSE(units.empty()) << what << " block " << blk;
      for (const FaUnit& u : units) {
        EXPECT_EQ(u.q0 % 16, 0u) << what;
        EXPECT_GE(u.qr, 1u) << what;
        EXPECT_LE(u.qr, t.bq) << what;
        EXPECT_TRUE(u.qr % 16 == 0 || u.q0 + u.qr == s.S) << what;
        for (std::uint32_t r = u.q0; r < u.q0 + u.qr; ++r) ++seen[u.bn * s.S + r];
      }
    }
    EXPECT_EQ(std::count(seen.begin(), seen.end(), 1), static_cast<std::ptrdiff_t>(seen.size())) << what;
  }
}

// Non-causal rows cost the same, so the busiest block holds the fewest fractals any split can give it:
// ceil(fractals / cores) (8192 rows = 512 fractals over 24 cores: 22, i.e. 352 rows where whole 128-row blocks
// gave the busiest core 384).
TEST(FaTiling, EvenRowsGiveTheBusiestBlockTheFewestFractals) {
  const config::ChipConfig ch = chip("910b");
  for (std::uint32_t S : {8192u, 2048u, 4000u}) {
    const FaShape s = shape(S, 128);  // 8 heads
    const FaTiling t = plan_fa(s, 2, ch);
    const std::uint64_t fractals = 8 * ceil_div(S, 16);
    std::uint64_t busiest = 0;
    for (std::uint32_t blk = 0; blk < t.block_dim; ++blk) busiest = std::max(busiest, t.first[blk + 1] - t.first[blk]);
    EXPECT_EQ(busiest, ceil_div(fractals, ch.cube_cores())) << "S=" << S;
  }
}

// A short sequence gets a block no larger than it needs (and a small workspace).
TEST(FaTiling, ShortSequencesGetSmallBlocks) {
  const FaTiling t = plan_fa(shape(16, 64), 2, chip("910b"));
  EXPECT_EQ(t.bq, 16u);
  EXPECT_EQ(t.bk, 16u);
  EXPECT_LT(t.slot_bytes, plan_fa(shape(4096, 64), 2, chip("910b")).slot_bytes);
}

// Half the UB (and a mask's buffers on top) gives a smaller piece of scores per vector pass (rc x bk); L0 too small
// for any block is an error.
TEST(FaTiling, SmallerBuffersGiveSmallerBlocksOrAnError) {
  const FaTiling full = plan_fa(shape(4096, 128), 2, chip("910b"));
  const FaTiling half =
      plan_fa(shape(4096, 128, true), 2, chip("910b", {"buffers.ub.size=96KiB", "buffers.ub.bank_groups=8"}));
  EXPECT_LT(static_cast<std::uint64_t>(half.rc) * half.bk, static_cast<std::uint64_t>(full.rc) * full.bk);
  try {
    plan_fa(shape(4096, 256), 2, chip("910b", {"buffers.l0b.size=8KiB"}));
    FAIL() << "planned D=256 with an 8 KiB L0B";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("no block of D=256 fits the buffers of chip"), std::string::npos) << e.what();
  }
}

// The kernels allocate exactly the buffers the tiling counted: after a block set up its buffers, what it took of
// each space is its plan's total (split chips: L1 and L0 on the AIC, the UB on each AIV; coupled chips: all on the
// one core). A kernel allocating a buffer its plan lacks (or of another size) fails here; one asking for a name the
// plan lacks throws. Each case is one block of one launch (one simulation per process), running its share of the
// case's work (the case has a block i, so block i allocates).
using testing::OpCase;

void expect_kernels_allocate_their_plans(const char* chip_name, const std::vector<OpCase>& cases,
                                         const char* op_name = "flash_attention") {
  const config::ChipConfig c = chip(chip_name);
  const OpDef* op = find_op(op_name);
  ASSERT_NE(op, nullptr);
  const bool paged = std::string(op_name) == "paged_attention";
  std::vector<std::string> what;
  std::vector<FaBuffers> plans;
  std::vector<std::function<void()>> kernels;
  for (std::size_t i = 0; i < cases.size(); ++i) {
    const Call call = ops::parse_call(*op, cases[i].params);
    FaShape s;
    FaTiling t;
    if (paged) {
      const auto& pc = call_as<PagedAttentionCall>(call, op_name);
      s = resolve_paged(pc);
      t = plan_paged(s, pc, 2, c);
    } else {
      s = resolve(call_as<FlashAttentionCall>(call, op_name));
      t = plan_fa(s, 2, c);
    }
    ASSERT_GT(t.block_dim, i) << "case " << i << " has no block " << i;
    plans.push_back(fa_buffers(s, t, 2, c.split()));
    what.push_back("case " + std::to_string(i) + ": D=" + std::to_string(s.D) + " S=" + std::to_string(s.S) +
                   (s.mask ? " mask" : "") + (s.causal ? " causal" : "") + " blocks " + std::to_string(t.bq) + "x" +
                   std::to_string(t.bk));
    kernels.push_back(testing::op_kernel(*op, cases[i].params, cases[i].dtype, c, i));
  }
  const std::vector<testing::BlockPeaks> seen = testing::run_recording_peaks(c, fw::kernel::KernelType::kMix, kernels);
  const auto& b = c.buffers;
  for (std::size_t i = 0; i < seen.size(); ++i) {
    const FaBuffers& plan = plans[i];
    EXPECT_LE(plan.ub.total(b.ub.align), b.ub.size) << what[i];
    testing::expect_block_took(seen[i],
                               {{hw::isa::Space::kL1, plan.l1.total(b.l1.align)},
                                {hw::isa::Space::kL0A, plan.l0a.total(b.l0a.align)},
                                {hw::isa::Space::kL0B, plan.l0b.total(b.l0b.align)},
                                {hw::isa::Space::kL0C, plan.l0c.total(b.l0c.align)}},
                               plan.ub.total(b.ub.align), c.split(), what[i]);
  }
}

std::vector<OpCase> alloc_cases() {
  auto fa = [](const std::string& D, const std::string& S, Params extra = {}) {
    Params p = {{"B", "1"}, {"N", "16"}, {"D", D}, {"S", S}};
    p.insert(extra.begin(), extra.end());
    return OpCase{p};
  };
  std::vector<OpCase> cases = {fa("64", "512"),
                               fa("128", "512", {{"causal", "1"}}),
                               fa("128", "256", {{"mask", "1"}}),
                               fa("256", "256"),
                               fa("80", "200", {{"mask", "1"}, {"mask_shape", "1,1,1"}}),
                               fa("64", "16"),
                               fa("128", "40")};
  cases.push_back(fa("128", "512"));
  cases.back().dtype = hw::isa::DType::kBf16;
  return cases;
}

TEST(FaTiling, SplitKernelsAllocateExactlyThePlannedBuffers) {
  expect_kernels_allocate_their_plans("910b", alloc_cases());
}

TEST(FaTiling, CoupledKernelAllocatesExactlyThePlannedBuffers) {
  expect_kernels_allocate_their_plans("310p", alloc_cases());
}

// paged_attention on the same kernels: packed heads and pages, and the UB a split chip's AIVs reserve for split
// keys (partials out, the combine). One unit per head (splits=1): the harness runs one block per case, and split
// keys end in a barrier of every AIV of the chip (their results: tests/cli/op_decode_test.cpp).
std::vector<OpCase> paged_cases() {
  auto pa = [](const std::string& D, const std::string& len, Params extra = {}) {
    Params p = {{"B", "1"}, {"N", "32"}, {"KVN", "8"}, {"D", D}, {"kv_len", len}, {"page", "64"}, {"splits", "1"}};
    p.insert(extra.begin(), extra.end());
    return OpCase{p};
  };
  return {pa("128", "4096"), pa("64", "700"), pa("256", "300"), pa("128", "1000", {{"S", "3"}})};
}

TEST(FaTiling, PagedAttentionOnSplitChipsAllocatesExactlyThePlannedBuffers) {
  expect_kernels_allocate_their_plans("910b", paged_cases(), "paged_attention");
}

}  // namespace
}  // namespace npusim::stack::ops::attention
