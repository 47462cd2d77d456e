// The test side of the buffer plans (stack/ops/buffer_plan.hpp): runs one op call per block of one launch (one
// simulation per process) and records what each core of each block took of each buffer space, as the kernel
// context's peak over the block's TPipes. The tiling tests compare these with the plans' totals.
#pragma once

#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "firmware/kernel/context.hpp"
#include "firmware/kernel/launch_spec.hpp"
#include "firmware/platform/platform.hpp"
#include "stack/ops/op.hpp"

namespace npusim::stack::ops::testing {

using Peaks = std::array<std::uint64_t, hw::isa::kSpaceCount>;

// One op call of a test: its text form and its dtype.
struct OpCase {
  Params params;
  hw::isa::DType dtype = hw::isa::DType::kFp16;
};

struct BlockPeaks {
  Peaks cube{};  // the block's AIC on a split chip, its one core on a coupled chip
  Peaks aiv[2]{};
  bool ran = false;  // the cube side (or the one core) ran its kernel
};

// The kernel of an op call, its operands and workspace at addresses of their own (16 MiB apart, case `index` in
// its own 128 MiB).
inline std::function<void()> op_kernel(const OpDef& op, const Params& params, hw::isa::DType dtype,
                                       const config::ChipConfig& chip, std::size_t index) {
  const std::vector<TensorDesc> in = op.inputs(params, dtype);
  const OpPlan plan = op.plan(in, parse_call(op, params), chip);
  std::vector<std::uint64_t> buffers;
  for (std::size_t b = 0; b < in.size() + plan.outputs.size() + 1; ++b) buffers.push_back((index * 8 + b) << 24);
  return plan.kernel(buffers);
}

// Runs kernels[b] as block b of one launch of `type` and returns each block's peaks. On a split chip the AIVs of a
// block with vector_idle(b) do nothing (a cube-only kernel inside a mix launch).
inline std::vector<BlockPeaks> run_recording_peaks(const config::ChipConfig& chip, fw::kernel::KernelType type,
                                                   const std::vector<std::function<void()>>& kernels,
                                                   const std::function<bool(std::size_t)>& vector_idle = {}) {
  std::vector<BlockPeaks> seen(kernels.size());
  fw::Platform platform(chip, hw::core::Mode::kTimingOnly);
  const fw::kernel::LaunchSpec spec{"peaks", type, static_cast<std::uint32_t>(kernels.size()), [&] {
                                      const std::uint32_t block = fw::kernel::GetBlockIdx();
                                      const bool aiv = chip.split() && fw::kernel::IsAiv();
                                      if (aiv && vector_idle && vector_idle(block)) return;
                                      kernels[block]();
                                      BlockPeaks& s = seen[block];
                                      if (aiv) {
                                        s.aiv[fw::kernel::GetSubBlockIdx() % 2] = fw::kernel::ctx().peak;
                                      } else {
                                        s.cube = fw::kernel::ctx().peak;
                                        s.ran = true;
                                      }
                                    }};
  platform.run_kernel(spec);
  return seen;
}

// One block took exactly what its tiling planned: `cube` (space, bytes) on its AIC, or its one core on a coupled
// chip; `ub` bytes of UB on each of its AIVs (and none on the AIC), or on the one core.
inline void expect_block_took(const BlockPeaks& s, const std::vector<std::pair<hw::isa::Space, std::uint64_t>>& cube,
                              std::uint64_t ub, bool split, const std::string& what) {
  ASSERT_TRUE(s.ran) << what;
  for (const auto& [space, bytes] : cube)
    EXPECT_EQ(s.cube[static_cast<int>(space)], bytes) << what << " " << hw::isa::space_name(space);
  const int k_ub = static_cast<int>(hw::isa::Space::kUb);
  if (split) {
    EXPECT_EQ(s.cube[k_ub], 0u) << what;
    EXPECT_EQ(s.aiv[0][k_ub], ub) << what;
    EXPECT_EQ(s.aiv[1][k_ub], ub) << what;
  } else {
    EXPECT_EQ(s.cube[k_ub], ub) << what;
  }
}

}  // namespace npusim::stack::ops::testing
