// The cost formulas against hand-computed values from their documented formulas, on two configs.
#include "hw/core/cost_model.hpp"

#include <gtest/gtest.h>

#include "common/config/loader.hpp"

namespace npusim::hw::core {
namespace {

TEST(CostModel, MmadIsFractalStepsPlusLatency) {
  const config::ChipConfig c = config::load_config("910b").chip;
  // 128x64x256 fp16: 8 x 16 x 4 = 512 steps of 1 cycle + 16 latency.
  EXPECT_EQ(mmad_cycles(c.cube, c.cube.fp16, 128, 64, 256), 512u + 16u);
  // Partial fractals round up: 17x17x17 -> 2 x 2 x 2 steps.
  EXPECT_EQ(mmad_cycles(c.cube, c.cube.fp16, 17, 17, 17), 8u + 16u);
  // int8 has K0 = 32: 16x64x16 -> 1 x 1 x 2 steps.
  EXPECT_EQ(mmad_cycles(c.cube, c.cube.int8, 16, 64, 16), 2u + 16u);
  // fp32: K0 = 8 at 2 cycles per step: 16x16x16 -> 2 steps x 2 cycles.
  EXPECT_EQ(mmad_cycles(c.cube, c.cube.fp32, 16, 16, 16), 4u + 16u);
  EXPECT_EQ(mmad_cycles(c.cube, c.cube.fp16, 0, 16, 16), 0u);
}

TEST(CostModel, MmadFollowsTheConfig) {
  const config::ChipConfig c = config::load_config("tiny", {"cube.latency=3", "cube.fp16.cycles=2"}).chip;
  EXPECT_EQ(mmad_cycles(c.cube, c.cube.fp16, 32, 32, 32), 8u * 2u + 3u);
}

TEST(CostModel, VectorIsVendorFormula) {
  const config::ChipConfig c = config::load_config("910b").chip;
  // HARDWARE.md: cycles = latency + 2 x repeats - 1; vadd latency 6, vexp 12.
  EXPECT_EQ(vector_cycles(c.vector, c.vector.latency.add, 1), 6u + 2u - 1u);
  EXPECT_EQ(vector_cycles(c.vector, c.vector.latency.add, 255), 6u + 510u - 1u);
  EXPECT_EQ(vector_cycles(c.vector, c.vector.latency.exp, 8), 12u + 16u - 1u);
  EXPECT_EQ(vector_cycles(c.vector, c.vector.latency.add, 0), 0u);
  const config::ChipConfig d = config::load_config("910b", {"vector.cycles_per_repeat=1"}).chip;
  EXPECT_EQ(vector_cycles(d.vector, d.vector.latency.add, 100), 6u + 100u - 1u);
}

TEST(CostModel, VectorDatapathWidthScalesTheRepeats) {
  // A 256 B repeat through a datapath of W bytes per 2 cycles: ceil(2 x r x 256 / W) cycles for r repeats.
  const config::ChipConfig wide = config::load_config("910b", {"vector.bytes_per_repeat=512"}).chip;
  EXPECT_EQ(vector_cycles(wide.vector, 6, 255), 6u + 255u - 1u);
  const config::ChipConfig narrow = config::load_config("910b", {"vector.bytes_per_repeat=128"}).chip;
  EXPECT_EQ(vector_cycles(narrow.vector, 6, 255), 6u + 1020u - 1u);
  const config::ChipConfig odd = config::load_config("910b", {"vector.bytes_per_repeat=96"}).chip;
  EXPECT_EQ(vector_cycles(odd.vector, 6, 7), 6u + 38u - 1u);  // ceil(2 x 7 x 256 / 96) = ceil(37.33)
  const config::ChipConfig fast = config::load_config("910b", {"vector.bytes_per_repeat=1024", "vector.cycles_per_repeat=1"}).chip;
  EXPECT_EQ(vector_cycles(fast.vector, 6, 3), 6u + 1u - 1u);  // ceil(3 / 4): a quarter cycle per repeat
}

TEST(CostModel, CopyIsSetupPlusBytesOverRate) {
  const config::ChipConfig c = config::load_config("910b").chip;
  // GM -> UB: 30 setup + 32 KiB / 110 B per cycle = 30 + ceil(297.9) = 328.
  EXPECT_EQ(copy_cycles(c.mte.gm_to_ub, 32768), 30u + 298u);
  // L1 -> L0A at 512 B/cycle: 4 + 64 KiB / 512 = 4 + 128.
  EXPECT_EQ(copy_cycles(c.mte.l1_to_l0a, 65536), 4u + 128u);
  EXPECT_EQ(copy_cycles(c.mte.ub_to_gm, 1), 30u + 1u);
  EXPECT_EQ(copy_cycles(c.mte.ub_to_gm, 0), 0u);
}

// Load3D (img2col) moves its destination's bytes over the L1 -> L0A path, as a LoadData of the same bytes does
// (the PTO-ISA A2/A3 cost model charges both by bytes at one rate): 20 rows round up to 32, x 48 fp16 columns.
TEST(CostModel, Img2colCostsTheBytesItWritesAtTheLoadRate) {
  const config::ChipConfig c = config::load_config("910b").chip;
  isa::Instr in;
  in.op = isa::Op::kLoad3d;
  in.dtype = isa::DType::kFp16;
  in.src_space = isa::Space::kL1;
  in.dst_space = isa::Space::kL0A;
  in.img2col.m_ext = 20;
  in.img2col.k_ext = 48;
  EXPECT_EQ(instr_cost(c, in).cycles, copy_cycles(c.mte.l1_to_l0a, 32u * 48u * 2u));
  isa::Instr ld;
  ld.op = isa::Op::kLoad2d;
  ld.dst_space = isa::Space::kL0A;
  ld.copy.repeat = 32 * 48 / 256;  // the same bytes as fractals
  EXPECT_EQ(instr_cost(c, in).cycles, instr_cost(c, ld).cycles);
}

// Property: doubling a path's rate halves the bandwidth-bound part of a large copy (exactly, for divisible sizes).
TEST(CostModel, DoublingARateHalvesTheTransferPart) {
  const config::ChipConfig a = config::load_config("910b", {"mte.ub_to_gm.bytes_per_cycle=64"}).chip;
  const config::ChipConfig b = config::load_config("910b", {"mte.ub_to_gm.bytes_per_cycle=128"}).chip;
  const std::uint64_t bytes = 1 << 20;
  EXPECT_EQ(copy_cycles(a.mte.ub_to_gm, bytes) - a.mte.ub_to_gm.setup_cycles,
            2 * (copy_cycles(b.mte.ub_to_gm, bytes) - b.mte.ub_to_gm.setup_cycles));
}

TEST(CostModel, Scalar) {
  const config::ChipConfig c = config::load_config("910b", {"scalar.cycles_per_instruction=3"}).chip;
  EXPECT_EQ(scalar_cycles(c.scalar, 10), 30u);
}

}  // namespace
}  // namespace npusim::hw::core
