#include "firmware/ts/dispatch.hpp"

#include <algorithm>
#include <cmath>

#include "common/util/error.hpp"
#include "firmware/kernel/context.hpp"

namespace npusim::fw::ts {

using hw::core::AiCore;
using hw::core::CoreKind;

std::vector<std::vector<BlockSlot>> block_slots(hw::chip::Chip& chip, kernel::KernelType type) {
  std::vector<std::vector<BlockSlot>> out;
  const bool split = chip.config().split();
  if (!split) {
    for (AiCore* c : chip.cores_of(CoreKind::kCoupled)) out.push_back({{c, 0, 1}});
    if (type == kernel::KernelType::kVector)
      for (AiCore* c : chip.cores_of(CoreKind::kVector)) out.push_back({{c, 0, 1}});
    return out;
  }
  const auto aic = chip.cores_of(CoreKind::kCube), aiv = chip.cores_of(CoreKind::kVector);
  if (type == kernel::KernelType::kVector) {
    for (AiCore* c : aiv) out.push_back({{c, 0, 1}});
  } else if (type == kernel::KernelType::kCube) {
    for (AiCore* c : aic) out.push_back({{c, 0, 1}});
  } else {
    const std::uint32_t k = static_cast<std::uint32_t>(std::max<std::uint64_t>(chip.config().cores.aiv_per_aic, 1));
    for (std::size_t g = 0; g < aic.size(); ++g) {
      std::vector<BlockSlot> group{{aic[g], 0, 1}};
      for (std::uint32_t j = 0; j < k && g * k + j < aiv.size(); ++j) group.push_back({aiv[g * k + j], j, k});
      out.push_back(group);
    }
  }
  return out;
}

hw::core::Program block_program(std::function<void()> body, std::uint32_t block, std::uint32_t block_dim,
                                std::uint32_t sub_idx, std::uint32_t sub_num, std::uint64_t init_cycles,
                                std::shared_ptr<hw::core::InstructionBudget> budget) {
  return [body = std::move(body), block, block_dim, sub_idx, sub_num, init_cycles,
          budget = std::move(budget)](hw::core::CoreEngine& engine) {
    engine.set_budget(budget.get());
    kernel::KernelContext kc;
    kc.engine = &engine;
    kc.block_idx = block;
    kc.block_num = block_dim;
    kc.sub_block_idx = sub_idx;
    kc.sub_block_num = sub_num;
    engine.set_user_context(&kc);
    if (init_cycles) engine.scalar_work(init_cycles);
    body();
    engine.set_user_context(nullptr);
  };
}

std::uint64_t block_init_cycles(const config::ChipConfig& chip) {
  return static_cast<std::uint64_t>(
      std::llround((chip.launch.core_startup + chip.launch.kernel_init) * 1e-9 * chip.clock.core_hz));
}

kernel::CoreRun core_run(const hw::core::CoreEngine& e) {
  kernel::CoreRun run;
  run.core = e.identity().name;
  run.core_index = e.identity().index;
  run.kind = e.identity().kind;
  run.block = e.identity().block;
  run.start = e.start_cycle();
  run.end = e.end_cycle();
  for (int p = 0; p < hw::isa::kPipeCount; ++p) run.pipes[p] = e.pipe_stats(static_cast<hw::isa::Pipe>(p));
  run.instructions = e.instructions();
  return run;
}

namespace {

class Fifo : public DispatchOrder {
 public:
  std::size_t pick(const std::vector<DispatchCandidate>& kernels) const override {
    for (std::size_t k = 0; k < kernels.size(); ++k)
      if (kernels[k].eligible) return k;
    return kNone;
  }
};

class Fair : public DispatchOrder {
 public:
  std::size_t pick(const std::vector<DispatchCandidate>& kernels) const override {
    std::size_t best = kNone;
    for (std::size_t k = 0; k < kernels.size(); ++k)
      if (kernels[k].eligible && (best == kNone || kernels[k].running < kernels[best].running)) best = k;
    return best;
  }
};

}  // namespace

std::unique_ptr<DispatchOrder> make_dispatch_order(const std::string& name) {
  if (name == "fifo") return std::make_unique<Fifo>();
  if (name == "fair") return std::make_unique<Fair>();
  throw InputError("launch.dispatch_order: unknown policy '" + name + "' (fifo, fair)");
}

}  // namespace npusim::fw::ts
