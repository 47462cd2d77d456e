// The row ops' tiling (stack/ops/rows/row_tiling.cpp), called directly: a tile is the most rows whose buffers fit
// the UB (each buffer of RowKernel counted), rows too long for a tile go to the chunked path with the largest chunk
// that fits, and bad chunks are refused by name. Whether the kernels' buffers really fit is checked by running them
// (tests/cli/op_vector_test.cpp; the simulator refuses a UB overflow).
#include <gtest/gtest.h>

#include "common/config/loader.hpp"
#include "common/util/error.hpp"
#include "stack/ops/rows/row_ops.hpp"

namespace npusim::stack::ops::rows {
namespace {

config::ChipConfig chip(const char* name, const std::vector<std::string>& set = {}) {
  return config::load_config(name, set).chip;
}

RowProblem problem(RowKind kind, std::uint64_t rows, std::uint64_t h, std::uint64_t es = 2) {
  RowProblem p;
  p.kind = kind;
  p.rows = rows;
  p.h = h;
  p.es = es;
  return p;
}

// The short path takes as many rows as fit (at most 255 and the core's share), and not one more.
TEST(RowTiling, ATileIsTheMostRowsThatFitTheUb) {
  const config::ChipConfig c = chip("910b");
  for (RowKind kind :
       {RowKind::kSoftmax, RowKind::kLayerNorm, RowKind::kRmsNorm, RowKind::kSwiGlu, RowKind::kRopeHalf}) {
    for (std::uint64_t h : {128, 1000, 4096}) {
      const RowProblem p = problem(kind, 1 << 16, h);
      const RowTiling t = plan_rows(p, c, "op");
      ASSERT_EQ(t.chunk, 0u) << h;
      std::uint64_t per_row = 0, fixed = 0;
      short_path_bytes(kind, h, p.es, false, false, &per_row, &fixed);
      EXPECT_LE(fixed + t.tile * per_row, c.buffers.ub.size) << h;
      EXPECT_TRUE(t.tile == 255 || t.tile == t.per_block || fixed + (t.tile + 1) * per_row > c.buffers.ub.size) << h;
      EXPECT_EQ(t.per_block, (p.rows + c.vector_units() - 1) / c.vector_units());
    }
  }
}

// Half the UB: fewer rows per tile (a bandwidth-bound op then runs more, smaller tiles).
TEST(RowTiling, ASmallerUbGivesSmallerTiles) {
  const RowProblem p = problem(RowKind::kLayerNorm, 1 << 16, 4096);
  const RowTiling big = plan_rows(p, chip("910b"), "layernorm");
  const RowTiling small =
      plan_rows(p, chip("910b", {"buffers.ub.size=96KiB", "buffers.ub.bank_groups=8"}), "layernorm");
  EXPECT_LT(small.tile, big.tile);
  EXPECT_GT(small.tile, 0u);
}

// A row over 255 repeats of 64 lanes (or over the UB) is streamed in chunks: the largest multiple of 64 that fits.
TEST(RowTiling, LongRowsTakeTheLargestChunkThatFits) {
  const config::ChipConfig c = chip("910b");
  for (RowKind kind : {RowKind::kSoftmax, RowKind::kLogSoftmax, RowKind::kLayerNorm, RowKind::kRmsNorm}) {
    const RowProblem p = problem(kind, 64, 40000, 4);
    const RowTiling t = plan_rows(p, c, "op");
    ASSERT_GT(t.chunk, 0u);
    EXPECT_EQ(t.chunk % 64, 0u);
    EXPECT_LE(t.chunk, 16320u);
    EXPECT_LE(long_row_bytes(kind, t.chunk, 4, false, false), c.buffers.ub.size);
    EXPECT_TRUE(t.chunk == 16320 || long_row_bytes(kind, t.chunk + 64, 4, false, false) > c.buffers.ub.size);
    EXPECT_EQ(t.tile, 1u);
  }
}

TEST(RowTiling, BadChunksAndRowsThatCannotFitAreRefusedByName) {
  const config::ChipConfig c = chip("910b");
  RowProblem p = problem(RowKind::kSoftmax, 64, 4096);
  p.chunk = 100;
  EXPECT_THROW(
      try { plan_rows(p, c, "softmax"); } catch (const InputError& e) {
        EXPECT_NE(std::string(e.what()).find("softmax: chunk=100 is not a multiple of 64"), std::string::npos)
            << e.what();
        throw;
      },
      InputError);
  p.chunk = 16384;
  EXPECT_THROW(plan_rows(p, c, "softmax"), InputError);
  // SwiGLU has no chunked path: a row over the UB cannot run.
  EXPECT_THROW(
      try { plan_rows(problem(RowKind::kSwiGlu, 4, 400000), c, "swiglu"); } catch (const InputError& e) {
        EXPECT_NE(std::string(e.what()).find("swiglu: a row of 400000 elements does not fit the UB"), std::string::npos)
            << e.what();
        throw;
      },
      InputError);
}

// RoPE in BSND: a tile and a core's share hold whole positions (all N heads of a position share its table row).
TEST(RowTiling, RopeTilesHoldWholePositions) {
  RowProblem p = problem(RowKind::kRopeHalf, 2 * 64 * 12, 128);
  p.heads = 12;
  const RowTiling t = plan_rows(p, chip("910b"), "rope");
  EXPECT_EQ(t.tile % 12, 0u);
  EXPECT_EQ(t.per_block % 12, 0u);
  EXPECT_GT(t.tile, 0u);
}

}  // namespace
}  // namespace npusim::stack::ops::rows
