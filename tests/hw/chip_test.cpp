// The chip: every core of the config, device memory addressing the whole capacity lazily, the control CPU's slot.
#include <gtest/gtest.h>

#include <cstring>

#include "common/config/loader.hpp"
#include "hw/chip/chip.hpp"

#include <nlohmann/json.hpp>

namespace npusim::hw::chip {
namespace {

TEST(Chip, HasEveryCoreOfTheConfigAndTheWholeDeviceMemory) {
  const auto cfg = config::load_config("910b", {}).chip;
  Chip chip(cfg, core::Mode::kFunctional);
  EXPECT_EQ(chip.core_count(), 72u);
  EXPECT_EQ(chip.cores_of(core::CoreKind::kCube).size(), 24u);
  EXPECT_EQ(chip.cores_of(core::CoreKind::kVector).size(), 48u);
  EXPECT_EQ(chip.core(24).identity().name, "aiv0");
  ASSERT_NE(chip.memory_system(), nullptr);
  // 64 GiB addressable; only the touched page is allocated.
  EXPECT_EQ(chip.memory().capacity(), 64ULL << 30);
  const std::uint64_t top = (64ULL << 30) - 8;
  const std::uint64_t v = 0x1122334455667788ULL;
  chip.memory().write(top, &v, 8);
  std::uint64_t back = 0;
  chip.memory().read(top, &back, 8);
  EXPECT_EQ(back, v);
  EXPECT_EQ(chip.memory().resident_bytes(), mem::DeviceMemory::kPageBytes);
  EXPECT_THROW(chip.memory().read(top, &back, 16), InputError);
  // The host view: device address A is base() + A, and only pointers inside it map back.
  std::uint64_t from_view = 0;
  EXPECT_EQ(std::memcmp(chip.memory().base() + top, &v, 8), 0);
  ASSERT_TRUE(chip.memory().device_address(chip.memory().base() + top, 8, from_view));
  EXPECT_EQ(from_view, top);
  EXPECT_FALSE(chip.memory().device_address(chip.memory().base() + top, 16, from_view));
  EXPECT_FALSE(chip.memory().device_address(&back, 8, from_view));
}

TEST(Chip, ControlCpuRunsAProgramOnItsOwnClock) {
  const auto cfg = config::load_config("910b", {"clock.control_cpu=500MHz"}).chip;
  Chip chip(cfg, core::Mode::kTimingOnly);
  double end_ns = 0;
  chip.control_cpu().start([&](ControlCpu& cpu) {
    cpu.busy(1000);  // 1000 cycles at 500 MHz
    end_ns = sc_core::sc_time_stamp().to_seconds() * 1e9;
  });
  sc_core::sc_start();
  EXPECT_DOUBLE_EQ(end_ns, 2000.0);
  EXPECT_FALSE(chip.control_cpu().running());
}

TEST(Chip, CoupledChipsHaveAiCoresAndNoCrossCoreHub) {
  const auto cfg = config::load_config("310p", {}).chip;
  Chip chip(cfg, core::Mode::kTimingOnly);
  EXPECT_EQ(chip.cores_of(core::CoreKind::kCoupled).size(), cfg.cores.ai_cores);
  EXPECT_EQ(chip.cores_of(core::CoreKind::kVector).size(), cfg.cores.vector_cores);
}

TEST(Chip, EveryComponentRegistersItsStats) {
  const auto cfg = config::load_config("910b", {}).chip;
  Chip chip(cfg, core::Mode::kTimingOnly);
  const traces::StatsRegistry& s = chip.stats();
  // Cores: their pipes only (an AIC has no Vector unit, an AIV no Cube), bytes on the data-moving pipes.
  for (const char* path : {"chip.aic0.blocks", "chip.aic0.cube.busy_cycles", "chip.aic0.mte1.bytes",
                           "chip.aic23.fixpipe.bytes", "chip.aiv47.mte2.bytes", "chip.aiv0.mte3.instructions",
                           "chip.aiv0.vector.busy_cycles", "chip.aiv0.scalar.instructions"})
    EXPECT_TRUE(s.has(path)) << path;
  for (const char* path : {"chip.aic0.vector.busy_cycles", "chip.aiv0.cube.busy_cycles", "chip.aiv0.vector.bytes",
                           "chip.aic24.blocks", "chip.aiv48.blocks"})
    EXPECT_FALSE(s.has(path)) << path;
  // The memory system: one entry per L2 slice of the config, the HBM, the cores' GM traffic; SDMA and host link.
  EXPECT_TRUE(s.has("chip.l2.slice" + std::to_string(cfg.l2.slices - 1) + ".hits"));
  EXPECT_FALSE(s.has("chip.l2.slice" + std::to_string(cfg.l2.slices) + ".hits"));
  for (const char* path : {"chip.hbm.read_bytes", "chip.hbm.activates", "chip.gm.reads", "chip.gm.read_latency_cycles",
                           "chip.sdma.bytes", "chip.host_link.h2d_bytes"})
    EXPECT_TRUE(s.has(path)) << path;
  // Every stat has a unit and a doc line.
  const nlohmann::json described = s.describe();
  for (const auto& [path, d] : described.items()) {
    EXPECT_FALSE(d["unit"].get<std::string>().empty()) << path;
    EXPECT_FALSE(d["doc"].get<std::string>().empty()) << path;
  }
}

TEST(Chip, TheSimpleMemoryModelCountsOnlyGmBytes) {
  const auto cfg = config::load_config("910b", {"sim.memory_model=simple"}).chip;
  Chip chip(cfg, core::Mode::kTimingOnly);
  EXPECT_TRUE(chip.stats().has("chip.gm.read_bytes"));
  EXPECT_FALSE(chip.stats().has("chip.hbm.read_bytes"));
  EXPECT_FALSE(chip.stats().has("chip.l2.slice0.hits"));
}

TEST(Chip, MemoryStatsCountLinesAndBytesAsTheyMove) {
  const auto cfg = config::load_config("910b", {}).chip;
  Chip chip(cfg, core::Mode::kTimingOnly);
  mem::MemorySystem& ms = *chip.memory_system();
  const traces::StatsRegistry& s = chip.stats();
  const std::uint64_t line = cfg.l2.line_bytes, lines = 64;
  // A cold read of 64 whole lines: every line misses once and is filled from HBM.
  ms.access_direct(0, lines * line, false, 0, true);
  std::uint64_t misses = 0, hits = 0;
  for (std::uint64_t i = 0; i < cfg.l2.slices; ++i) {
    misses += s.count("chip.l2.slice" + std::to_string(i) + ".misses");
    hits += s.count("chip.l2.slice" + std::to_string(i) + ".hits");
  }
  EXPECT_EQ(misses, lines);
  EXPECT_EQ(hits, 0u);
  EXPECT_EQ(s.count("chip.hbm.read_bytes"), lines * line);
  EXPECT_EQ(s.count("chip.gm.read_bytes"), lines * line);
  EXPECT_EQ(s.count("chip.gm.reads"), 1u);
  // preload() zeroes the L2's counters in place: they stay registered and count the hits that follow.
  ms.preload(1 << 20, 4 * line);
  ms.access_direct(1 << 20, 4 * line, false, 1e6, true);
  hits = 0;
  for (std::uint64_t i = 0; i < cfg.l2.slices; ++i) hits += s.count("chip.l2.slice" + std::to_string(i) + ".hits");
  EXPECT_EQ(hits, 4u);
}

}  // namespace
}  // namespace npusim::hw::chip
