// The per-core context of a running kernel block: which core, which block, and the state the kernel API keeps
// for it (buffer allocation, event ids). Found through the core whose SystemC thread is running.
#pragma once

#include <array>
#include <cstdint>

#include "hw/core/ai_core.hpp"
#include "hw/core/core_engine.hpp"
#include "hw/mem/device_memory.hpp"

namespace npusim::fw::kernel {

struct KernelContext {
  hw::core::CoreEngine* engine = nullptr;
  std::uint32_t block_idx = 0;
  std::uint32_t block_num = 1;
  std::uint32_t sub_block_idx = 0;  // AIV index inside its 1:n group; 0 elsewhere
  std::uint32_t sub_block_num = 1;
  // The device memory whose host view SDK kernels receive their GM_ADDR arguments in (null for built-in kernels,
  // which get device addresses).
  const hw::mem::DeviceMemory* gm_view = nullptr;
  // TPipe state: next free byte per space and next free event id per (src, dst) pipe pair.
  std::array<std::uint64_t, hw::isa::kSpaceCount> next_free{};
  // The most bytes of each space any TPipe of this block had allocated at once (a kernel may build one TPipe after
  // another, e.g. a coupled MatMul's cube side then its epilogue).
  std::array<std::uint64_t, hw::isa::kSpaceCount> peak{};
  std::array<std::uint32_t, hw::isa::kPipeCount * hw::isa::kPipeCount> next_event{};
};

// The context of the block running on the current core. Throws std::logic_error outside a kernel.
KernelContext& ctx();

}  // namespace npusim::fw::kernel
