// What the task scheduler needs to put a kernel's blocks on cores: the core slots of each kernel type, the program a
// core runs for one block, and the record a finished block leaves.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "firmware/kernel/launch_spec.hpp"
#include "hw/chip/chip.hpp"

namespace npusim::fw::ts {

// The cores that run one block of a kernel of `type`, with each core's sub-block index (AIV within a group): an
// AIV (or AI core on coupled chips) for vector kernels, an AIC (or AI core) for cube kernels, and for mix kernels
// 1 AIC + its cores.aiv_per_aic AIVs on split chips, one AI core on coupled chips.
struct BlockSlot {
  hw::core::AiCore* core;
  std::uint32_t sub_idx, sub_num;
};
std::vector<std::vector<BlockSlot>> block_slots(hw::chip::Chip& chip, kernel::KernelType type);

// What a core runs for one block: sets up the kernel context, spends `init_cycles` of scalar time (kernel software
// init: arguments, tiling data), then runs the body.
hw::core::Program block_program(std::function<void()> body, std::uint32_t block, std::uint32_t block_dim,
                                std::uint32_t sub_idx, std::uint32_t sub_num, std::uint64_t init_cycles = 0);

// What a finished block left on its core's engine.
kernel::CoreRun core_run(const hw::core::CoreEngine& e);

}  // namespace npusim::fw::ts
