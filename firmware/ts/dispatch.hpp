// What the task scheduler needs to put a kernel's blocks on cores: the core slots of each kernel type, the program a
// core runs for one block, and the record a finished block leaves.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
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

// The scalar cycles a block spends starting before its kernel body runs: the core's start-up and the kernel's
// initialisation (launch.core_startup + launch.kernel_init), in core cycles.
std::uint64_t block_init_cycles(const config::ChipConfig& chip);

// What a core runs for one block: sets up the kernel context, spends `init_cycles` of scalar time (kernel software
// init: arguments, tiling data), then runs the body, its instructions counted against the launch's `budget` (shared
// by its blocks; null: no limit).
hw::core::Program block_program(std::function<void()> body, std::uint32_t block, std::uint32_t block_dim,
                                std::uint32_t sub_idx, std::uint32_t sub_num, std::uint64_t init_cycles = 0,
                                std::shared_ptr<hw::core::InstructionBudget> budget = nullptr);

// The order in which the task scheduler hands free block slots to the kernels in flight (launch.dispatch_order),
// a policy made by name in one place (make_dispatch_order). The scheduler asks `pick` for the next kernel to offer a
// free slot to, among those that still have blocks and found a free slot last time they were asked, until none is
// left:
//   fifo  the oldest kernel takes every slot it can use, then the next (a later kernel's blocks wait for the older
//         one's waves while it has blocks left)
//   fair  each free slot goes to the kernel running the fewest blocks, the oldest on a tie (kernels of several
//         streams share the cores)
struct DispatchCandidate {
  bool eligible = false;      // blocks left, and a slot of its type was free when last asked
  std::uint32_t running = 0;  // blocks dispatched and not finished
};
class DispatchOrder {
 public:
  static constexpr std::size_t kNone = static_cast<std::size_t>(-1);
  virtual ~DispatchOrder() = default;
  // The index (0 = the oldest kernel) of the kernel to offer a slot to, or kNone.
  virtual std::size_t pick(const std::vector<DispatchCandidate>& kernels) const = 0;
};
// InputError naming launch.dispatch_order and the choices for an unknown name.
std::unique_ptr<DispatchOrder> make_dispatch_order(const std::string& name);

// What a finished block left on its core's engine.
kernel::CoreRun core_run(const hw::core::CoreEngine& e);

}  // namespace npusim::fw::ts
