// The row ops' tiling (stack/ops/rows/row_tiling.cpp), called directly: a tile is the most rows whose buffer plan
// (row_layout: the buffers RowKernel allocates, each 32 B-aligned) fits the UB, rows too long for a tile go to the
// chunked path with the largest chunk that fits, and bad chunks are refused by name. That the kernels allocate
// exactly the plan is checked by running them at the edge (RowTiling.KernelsAllocateExactlyThePlan; the simulator
// refuses a UB overflow).
#include <gtest/gtest.h>

#include "common/config/loader.hpp"
#include "common/util/error.hpp"
#include "firmware/kernel/context.hpp"
#include "firmware/kernel/launch_spec.hpp"
#include "firmware/platform/platform.hpp"
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
      const auto bytes = [&](std::uint64_t tile) {
        return row_layout(kind, h, p.es, false, false, tile).buffers.total(c.buffers.ub.align);
      };
      EXPECT_LE(bytes(t.tile), c.buffers.ub.size) << h;
      EXPECT_TRUE(t.tile == 255 || t.tile == t.per_block || bytes(t.tile + 1) > c.buffers.ub.size) << h;
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
    const auto bytes = [&](std::uint64_t chunk) {
      return long_row_buffers(kind, chunk, 4, false, false).total(c.buffers.ub.align);
    };
    EXPECT_LE(bytes(t.chunk), c.buffers.ub.size);
    EXPECT_TRUE(t.chunk == 16320 || bytes(t.chunk + 64) > c.buffers.ub.size);
    EXPECT_EQ(t.tile, 1u);
  }
}

// The kernels allocate exactly the buffers the tiling counted: after a row kernel set up its buffers, the UB it took
// is its plan's total, on both paths, for every kind, element size and option. A kernel allocating a buffer the
// plan lacks (or of another size) fails here, or at the UB limit; one asking for a name the plan lacks throws.
TEST(RowTiling, KernelsAllocateExactlyThePlannedBuffers) {
  const config::ChipConfig c = chip("910b");
  struct Case {
    RowKind kind;
    std::uint64_t h;
    bool add = false, stats = false;
  };
  const std::vector<Case> cases = {{RowKind::kSoftmax, 4096},
                                   {RowKind::kLogSoftmax, 1000},
                                   {RowKind::kLayerNorm, 4096, true, true},
                                   {RowKind::kLayerNorm, 3000},
                                   {RowKind::kRmsNorm, 2048},
                                   {RowKind::kSwiGlu, 8192},
                                   {RowKind::kRopeHalf, 128},
                                   {RowKind::kRopeInterleaved, 128},
                                   {RowKind::kSoftmax, 40000},
                                   {RowKind::kLayerNorm, 40000, true, true}};
  struct Seen {
    std::string what;
    std::uint64_t allocated = 0, planned = 0;
  };
  // One block per case and element size (a block's queues end with their free flags set: one kernel per block).
  std::vector<Seen> seen(2 * cases.size());
  fw::Platform platform(c, hw::core::Mode::kTimingOnly);
  fw::kernel::LaunchSpec spec{
      "rows", fw::kernel::KernelType::kVector, static_cast<std::uint32_t>(seen.size()), [&] {
        const std::uint32_t block = fw::kernel::GetBlockIdx();
        {
          {
            const Case& k = cases[block / 2];
            const std::uint64_t es = block % 2 ? 4 : 2;
            RowProblem p = problem(k.kind, 1 << 16, k.h, es);
            p.add = k.add;
            p.stats = k.stats;
            const RowTiling t = plan_rows(p, c, "op");
            RowArgs a;
            a.kind = k.kind;
            a.x = 0;
            a.p1 = 1ULL << 26;
            a.p2 = 2ULL << 26;
            a.out = 3ULL << 26;
            a.res = 4ULL << 26;
            a.sum = k.add ? 5ULL << 26 : 0;
            a.mean = 6ULL << 26;
            a.rstd = 7ULL << 26;
            a.add = k.add;
            a.stats = k.stats;
            a.h = k.h;
            a.ho = k.kind == RowKind::kSwiGlu ? k.h / 2 : k.h;
            a.seq = 1024;
            // This block's share: one tile (or one chunked row) of the planned size.
            a.per_block = a.tile = t.chunk ? 1 : t.tile;
            a.rows = (block + 1) * a.per_block;
            a.chunk = t.chunk;
            if (t.chunk) {
              es == 2 ? long_row_kernel<half>(a) : long_row_kernel<float>(a);
            } else {
              es == 2 ? row_kernel<half>(a) : row_kernel<float>(a);
            }
            const std::uint64_t planned =
                t.chunk ? long_row_buffers(k.kind, t.chunk, es, k.add, k.stats).total(c.buffers.ub.align)
                        : row_layout(k.kind, k.h, es, k.add, k.stats, t.tile).buffers.total(c.buffers.ub.align);
            seen[block] = {"kind " + std::to_string(static_cast<int>(k.kind)) + " h=" + std::to_string(k.h) +
                               " es=" + std::to_string(es) + (t.chunk ? " chunked" : " tile=" + std::to_string(t.tile)),
                           fw::kernel::ctx().next_free[static_cast<int>(hw::isa::Space::kUb)], planned};
          }
        }
      }};
  platform.run_kernel(spec);
  for (const Seen& s : seen) {
    EXPECT_FALSE(s.what.empty());
    EXPECT_EQ(s.allocated, s.planned) << s.what;
    EXPECT_LE(s.planned, c.buffers.ub.size) << s.what;
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
