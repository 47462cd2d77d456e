// The chip: every core of the config, device memory addressing the whole capacity lazily, the control CPU's slot.
#include <gtest/gtest.h>

#include <cstring>

#include "common/config/loader.hpp"
#include "hw/chip/chip.hpp"

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

}  // namespace
}  // namespace npusim::hw::chip
