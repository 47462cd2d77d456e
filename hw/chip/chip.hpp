// The chip: every core of the config, GM behind the GmPort interface (the detailed memory system or the simple
// model), the device-memory backing store, SDMA engines, the host link, the control CPU's slot and, on split
// chips, the cross-core flag hub. Core names and groups follow the hardware: split chips have aic0..aicN-1 and
// aiv0..aivM-1 with aic i grouped with aiv i*k .. i*k+k-1 (k = cores.aiv_per_aic); coupled chips have core0..N-1
// (plus vec0.. for vector-only cores).
#pragma once

#include <systemc>

#include <functional>
#include <memory>
#include <vector>

#include "common/config/chip_config.hpp"
#include "hw/chip/control_cpu.hpp"
#include "hw/core/ai_core.hpp"
#include "hw/mem/device_memory.hpp"
#include "hw/mem/dma.hpp"
#include "hw/mem/gm_port.hpp"
#include "hw/mem/memory_system.hpp"
#include "hw/sim/clock.hpp"
#include "traces/stats.hpp"

namespace npusim::hw::chip {

// One core of a config: its kind, name and group (the cube core and vector cores that run one mixed block), in the
// chip's index order.
struct CoreSlot {
  core::CoreKind kind;
  std::string name;
  std::uint32_t group;
};
std::vector<CoreSlot> core_slots(const config::ChipConfig& cfg);

class Chip {
 public:
  using TraceFactory = std::function<core::TraceSink*(const core::CoreIdentity&)>;
  // Elaborates the cores (call before sc_start). `trace` may return null for untraced cores.
  Chip(const config::ChipConfig& cfg, core::Mode mode, const TraceFactory& trace = {});
  ~Chip();

  const config::ChipConfig& config() const { return cfg_; }
  const Clock& clock() const { return clock_; }
  core::Mode mode() const { return mode_; }
  mem::DeviceMemory& memory() { return memory_; }
  const mem::GmPort& gm() const { return *gm_; }
  // The detailed memory system, or null when sim.memory_model is simple.
  const mem::MemorySystem* memory_system() const { return memory_system_; }
  mem::MemorySystem* memory_system() { return memory_system_; }
  mem::SdmaEngines& sdma() { return sdma_; }
  mem::HostLink& host_link() { return host_link_; }
  ControlCpu& control_cpu() { return *control_cpu_; }
  // Every component's statistics (docs/metrics.md, "Statistics"): chip.<core>.*, chip.gm.*, chip.l2.*, chip.hbm.*,
  // chip.sdma.*, chip.host_link.*; the firmware adds its own (the task scheduler chip.ts.*).
  traces::StatsRegistry& stats() { return stats_; }
  const traces::StatsRegistry& stats() const { return stats_; }

  std::size_t core_count() const { return cores_.size(); }
  core::AiCore& core(std::size_t i) { return *cores_.at(i); }
  // Cores of one kind in index order (AIC, AIV, or coupled AI cores).
  std::vector<core::AiCore*> cores_of(core::CoreKind kind);

 private:
  config::ChipConfig cfg_;
  core::Mode mode_;
  traces::StatsRegistry stats_;  // before the components: they register into it
  Clock clock_;
  mem::DeviceMemory memory_;
  std::unique_ptr<mem::GmPort> gm_;
  mem::MemorySystem* memory_system_ = nullptr;
  std::unique_ptr<core::CrossCoreHub> hub_;
  std::vector<std::unique_ptr<core::AiCore>> cores_;
  mem::SdmaEngines sdma_;
  mem::HostLink host_link_;
  std::unique_ptr<ControlCpu> control_cpu_;
};

}  // namespace npusim::hw::chip
