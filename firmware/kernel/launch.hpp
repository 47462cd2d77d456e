// A minimal launcher (the runtime and task-scheduler issue replace it): runs `block_dim` blocks of a kernel on the
// chip's cores of the kernel's type, in waves when there are more blocks than cores, and collects per-core results.
// One launch per process: SystemC elaborates once.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "hw/chip/chip.hpp"

namespace npusim::fw::kernel {

// vector: AIV (or AI cores on coupled chips); cube: AIC (or AI cores); mix: 1 AIC + its AIV per block on split
// chips, one AI core per block on coupled chips.
enum class KernelType : std::uint8_t { kVector, kCube, kMix };

struct LaunchSpec {
  std::string name;
  KernelType type = KernelType::kVector;
  std::uint32_t block_dim = 1;
  std::function<void()> body;  // the kernel, run on every core of every block
};

struct CoreRun {
  std::string core;
  std::uint32_t core_index = 0;  // the core's index in the chip
  hw::core::CoreKind kind;
  std::uint32_t block = 0;
  std::uint64_t start = 0, end = 0;  // core cycles
  std::array<hw::core::PipeStats, hw::isa::kPipeCount> pipes;
  std::uint64_t instructions = 0;
};

// What a finished block left on its core's engine.
CoreRun core_run(const hw::core::CoreEngine& e);

struct LaunchResult {
  std::uint64_t start = 0, end = 0;  // core cycles, first block start to last block end
  std::vector<CoreRun> runs;         // one per block per core
  std::uint32_t cores_used = 0;
  std::uint64_t instructions = 0;
  double wall_seconds = 0;
};

// The cores that run one block of a kernel of `type`, with each core's sub-block index (AIV within a group).
struct BlockSlot {
  hw::core::AiCore* core;
  std::uint32_t sub_idx, sub_num;
};
std::vector<std::vector<BlockSlot>> block_slots(hw::chip::Chip& chip, KernelType type);

// What a core runs for one block: sets up the kernel context, spends `init_cycles` of scalar time (kernel software
// init: arguments, tiling data), then runs the body.
hw::core::Program block_program(std::function<void()> body, std::uint32_t block, std::uint32_t block_dim,
                                std::uint32_t sub_idx, std::uint32_t sub_num, std::uint64_t init_cycles = 0);

// Throws hw::core::KernelError for a kernel's misuse (including deadlocks between cores) and InputError for a
// launch the chip cannot run.
LaunchResult launch(hw::chip::Chip& chip, const LaunchSpec& spec);

}  // namespace npusim::fw::kernel
