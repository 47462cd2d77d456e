#include "hw/chip/chip.hpp"

#include <algorithm>
#include <string>

#include "common/util/arith.hpp"

namespace npusim::hw::chip {

using core::CoreKind;

std::vector<CoreSlot> core_slots(const config::ChipConfig& cfg) {
  std::vector<CoreSlot> slots;
  if (cfg.split()) {
    const std::uint64_t k = std::max<std::uint64_t>(cfg.cores.aiv_per_aic, 1);
    for (std::uint64_t i = 0; i < cfg.cores.aic; ++i)
      slots.push_back({CoreKind::kCube, "aic" + std::to_string(i), narrow<std::uint32_t>(i)});
    for (std::uint64_t i = 0; i < cfg.cores.aiv; ++i)
      slots.push_back({CoreKind::kVector, "aiv" + std::to_string(i), narrow<std::uint32_t>(i / k)});
  } else {
    for (std::uint64_t i = 0; i < cfg.cores.ai_cores; ++i)
      slots.push_back({CoreKind::kCoupled, "core" + std::to_string(i), narrow<std::uint32_t>(i)});
    for (std::uint64_t i = 0; i < cfg.cores.vector_cores; ++i)
      slots.push_back({CoreKind::kVector, "vec" + std::to_string(i), narrow<std::uint32_t>(cfg.cores.ai_cores + i)});
  }
  return slots;
}

Chip::Chip(const config::ChipConfig& cfg, core::Mode mode, const TraceFactory& trace)
    : cfg_(cfg),
      mode_(mode),
      clock_(cfg.clock.core_hz),
      memory_(cfg.hbm.capacity),
      sdma_(cfg.sdma),
      host_link_(cfg.host_link),
      control_cpu_(std::make_unique<ControlCpu>("control_cpu", cfg.clock.control_cpu_hz)) {
  const std::vector<CoreSlot> slots = core_slots(cfg_);
  if (cfg_.sim.memory_model == "simple") {
    gm_ = std::make_unique<mem::SimpleGm>(cfg_.simple_gm, narrow<std::uint32_t>(slots.size()));
  } else {
    auto ms = std::make_unique<mem::MemorySystem>(cfg_, narrow<std::uint32_t>(slots.size()));
    memory_system_ = ms.get();
    gm_ = std::move(ms);
  }
  gm_->register_stats(stats_, "chip");
  sdma_.register_stats(stats_, "chip.sdma");
  host_link_.register_stats(stats_, "chip.host_link");
  if (cfg_.split()) {
    std::vector<core::CrossCoreHub::Member> members;
    members.reserve(slots.size());
    for (const CoreSlot& s : slots) members.push_back({s.kind, s.group});
    hub_ = std::make_unique<core::CrossCoreHub>(members, narrow<std::uint32_t>(cfg_.flags.cross_core_ids),
                                                narrow<std::uint32_t>(cfg_.flags.cross_core_max_pending),
                                                cfg_.flags.cross_core_latency,
                                                [this](std::uint32_t c) { cores_.at(c)->notify_cross(); });
  }
  for (std::size_t i = 0; i < slots.size(); ++i) {
    core::CoreIdentity id{static_cast<std::uint32_t>(i), slots[i].kind, slots[i].name, 0};
    core::AiCore::Env env{&cfg_, &clock_, gm_.get(), &memory_, hub_.get(), mode_, trace ? trace(id) : nullptr, &stats_};
    cores_.push_back(std::make_unique<core::AiCore>(slots[i].name.c_str(), id, env));
  }
}

Chip::~Chip() = default;

std::vector<core::AiCore*> Chip::cores_of(CoreKind kind) {
  std::vector<core::AiCore*> out;
  for (auto& c : cores_)
    if (c->identity().kind == kind) out.push_back(c.get());
  return out;
}

}  // namespace npusim::hw::chip
