#include "firmware/kernel/launch.hpp"

#include <chrono>
#include <deque>
#include <memory>

#include "firmware/kernel/context.hpp"

namespace npusim::fw::kernel {

using hw::core::AiCore;
using hw::core::CoreKind;

using Slot = BlockSlot;

std::vector<std::vector<BlockSlot>> block_slots(hw::chip::Chip& chip, KernelType type) {
  std::vector<std::vector<Slot>> out;
  const bool split = chip.config().split();
  if (!split) {
    for (AiCore* c : chip.cores_of(CoreKind::kCoupled)) out.push_back({{c, 0, 1}});
    if (type == KernelType::kVector)
      for (AiCore* c : chip.cores_of(CoreKind::kVector)) out.push_back({{c, 0, 1}});
    return out;
  }
  const auto aic = chip.cores_of(CoreKind::kCube), aiv = chip.cores_of(CoreKind::kVector);
  if (type == KernelType::kVector) {
    for (AiCore* c : aiv) out.push_back({{c, 0, 1}});
  } else if (type == KernelType::kCube) {
    for (AiCore* c : aic) out.push_back({{c, 0, 1}});
  } else {
    const std::uint32_t k = static_cast<std::uint32_t>(std::max<std::uint64_t>(chip.config().cores.aiv_per_aic, 1));
    for (std::size_t g = 0; g < aic.size(); ++g) {
      std::vector<Slot> group{{aic[g], 0, 1}};
      for (std::uint32_t j = 0; j < k && g * k + j < aiv.size(); ++j) group.push_back({aiv[g * k + j], j, k});
      out.push_back(group);
    }
  }
  return out;
}

hw::core::Program block_program(std::function<void()> body, std::uint32_t block, std::uint32_t block_dim,
                                std::uint32_t sub_idx, std::uint32_t sub_num, std::uint64_t init_cycles) {
  return [body = std::move(body), block, block_dim, sub_idx, sub_num, init_cycles](hw::core::CoreEngine& engine) {
    KernelContext kc;
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

CoreRun core_run(const hw::core::CoreEngine& e) {
  CoreRun run;
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

LaunchResult launch(hw::chip::Chip& chip, const LaunchSpec& spec) {
  if (spec.block_dim == 0) throw InputError("kernel " + spec.name + ": block_dim must be at least 1");
  const auto slots = block_slots(chip, spec.type);
  if (slots.empty()) throw InputError("kernel " + spec.name + ": the chip has no cores of the kernel's type");

  LaunchResult result;
  // Blocks are dealt to block slots round-robin; each core runs its blocks one after another (waves).
  struct Work {
    std::uint32_t block;
    std::uint32_t sub_idx, sub_num;
  };
  std::vector<std::deque<Work>> per_core(chip.core_count());
  for (std::uint32_t b = 0; b < spec.block_dim; ++b)
    for (const Slot& s : slots[b % slots.size()])
      per_core[s.core->identity().index].push_back(Work{b, s.sub_idx, s.sub_num});

  std::vector<std::unique_ptr<KernelContext>> contexts;
  std::function<void(std::uint32_t)> start_next = [&](std::uint32_t core_index) {
    auto& q = per_core[core_index];
    if (q.empty()) return;
    const Work w = q.front();
    q.pop_front();
    AiCore& core = chip.core(core_index);
    core.start(
        block_program(spec.body, w.block, spec.block_dim, w.sub_idx, w.sub_num),
        w.block,
        [&, core_index](const hw::core::CoreEngine& e) {
          result.runs.push_back(core_run(e));
          start_next(core_index);
        });
  };
  for (std::uint32_t c = 0; c < chip.core_count(); ++c) {
    if (!per_core[c].empty()) ++result.cores_used;
    start_next(c);
  }

  sc_core::sc_report_handler::set_actions(sc_core::SC_INFO, sc_core::SC_DO_NOTHING);
  const auto t0 = std::chrono::steady_clock::now();
  sc_core::sc_start();
  result.wall_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  for (std::uint32_t c = 0; c < chip.core_count(); ++c)
    if (chip.core(c).error()) std::rethrow_exception(chip.core(c).error());
  // Out of events while cores still wait: a deadlock between cores (cross-core flags nobody sets).
  std::string stuck;
  for (std::uint32_t c = 0; c < chip.core_count(); ++c) {
    const AiCore& core = chip.core(c);
    if (!core.busy()) continue;
    const hw::core::CoreEngine* e = core.engine();
    stuck += (stuck.empty() ? "" : "; ") + core.identity().name + " (block " +
             std::to_string(e ? e->identity().block : 0) + "): " + (e ? e->describe_blocked() : std::string("?"));
  }
  if (!stuck.empty()) {
    // Unwind the stuck kernels' stacks (their objects are destroyed) from a process, where kills are allowed.
    sc_core::sc_spawn([&chip] {
      for (std::uint32_t c = 0; c < chip.core_count(); ++c)
        if (chip.core(c).busy()) chip.core(c).abandon();
    });
    sc_core::sc_start();
    throw hw::core::KernelError("deadlock: no core can make progress: " + stuck);
  }

  result.start = UINT64_MAX;
  for (const CoreRun& r : result.runs) {
    result.start = std::min(result.start, r.start);
    result.end = std::max(result.end, r.end);
    result.instructions += r.instructions;
  }
  if (result.runs.empty()) result.start = 0;
  return result;
}

}  // namespace npusim::fw::kernel
