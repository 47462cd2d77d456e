// FlashAttention's tiling (stack/ops/attention/flash_attention.cpp, plan_fa), called directly: the largest blocks
// whose buffers fit, smaller for short sequences and smaller buffers, and an error naming the chip when none fits.
// Measured block sizes are in docs/ops.md (910b, D = 64: 128 x 128; D = 256: 64 x 64).
#include <gtest/gtest.h>

#include "common/config/loader.hpp"
#include "common/util/error.hpp"
#include "stack/ops/attention/fa_common.hpp"

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
  const FaTiling t64 = plan_fa(shape(4096, 64), 2, chip("910b"));
  EXPECT_EQ(t64.bq, 128u);
  EXPECT_EQ(t64.bk, 128u);
  const FaTiling t256 = plan_fa(shape(4096, 256), 2, chip("910b"));
  EXPECT_EQ(t256.bq, 64u);
  EXPECT_EQ(t256.bk, 64u);
  // One block per cube core at most, and no more blocks than units (B N ceil(S / Bq)).
  EXPECT_EQ(t64.block_dim, chip("910b").cube_cores());
  EXPECT_EQ(plan_fa(shape(128, 64), 2, chip("910b")).block_dim, 8u);
}

// A short sequence gets a block no larger than it needs (and a small workspace).
TEST(FaTiling, ShortSequencesGetSmallBlocks) {
  const FaTiling t = plan_fa(shape(16, 64), 2, chip("910b"));
  EXPECT_EQ(t.bq, 16u);
  EXPECT_EQ(t.bk, 16u);
  EXPECT_LT(t.slot_bytes, plan_fa(shape(4096, 64), 2, chip("910b")).slot_bytes);
}

// Half the UB (and a mask's buffers on top) never gives larger blocks; L0 too small for any block is an error.
TEST(FaTiling, SmallerBuffersGiveSmallerBlocksOrAnError) {
  const FaTiling full = plan_fa(shape(4096, 128), 2, chip("910b"));
  const FaTiling half =
      plan_fa(shape(4096, 128, true), 2, chip("910b", {"buffers.ub.size=96KiB", "buffers.ub.bank_groups=8"}));
  EXPECT_LE(static_cast<std::uint64_t>(half.bq) * half.bk, static_cast<std::uint64_t>(full.bq) * full.bk);
  EXPECT_LT(static_cast<std::uint64_t>(half.bq) * half.bk, static_cast<std::uint64_t>(full.bq) * full.bk);
  try {
    plan_fa(shape(4096, 256), 2, chip("910b", {"buffers.l0b.size=8KiB"}));
    FAIL() << "planned D=256 with an 8 KiB L0B";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("no block of D=256 fits the buffers of chip"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace npusim::stack::ops::attention
