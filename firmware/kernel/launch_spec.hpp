// What a kernel launch is (a kernel body, its type and block_dim) and what it leaves (per block and core: cycles,
// pipe statistics, instructions). The task scheduler (firmware/ts) dispatches the blocks; the runtime launches
// kernels through it, and firmware tests through fw::Platform::run_kernel.
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

struct LaunchResult {
  std::uint64_t start = 0, end = 0;  // core cycles, first block start to last block end
  std::vector<CoreRun> runs;         // one per block per core
  std::uint32_t cores_used = 0;
  std::uint64_t instructions = 0;
  double wall_seconds = 0;
};

}  // namespace npusim::fw::kernel
