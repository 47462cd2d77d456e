// The cores' GM port in front of the memory system (hw/mem/memory_system.hpp): the window of requests in flight
// counts requests of noc.request_bytes, so a copy of B bytes holds ceil(B / request_bytes) of the
// noc.core_outstanding slots, whatever the size of the kernel's copies.
#include <gtest/gtest.h>

#include <cmath>

#include "common/config/loader.hpp"
#include "hw/mem/memory_system.hpp"

namespace npusim::hw::mem {
namespace {

config::ChipConfig chip(std::uint64_t outstanding) {
  return config::load_config("910b", {"noc.core_outstanding=" + std::to_string(outstanding)}).chip;
}

// A 2048 B read is four 512 B requests. With a window of 4 it fills the window, so a 512 B read behind it starts
// only when it is done; with a window of 5 the second read streams right behind the first at the port's rate
// (110 B/cycle: accepted at ceil((2048 + 512) / 110) = 24).
TEST(MemorySystem, RequestsInFlightAreCountedInLinesNotCopies) {
  for (std::uint64_t window : {4, 5}) {
    const config::ChipConfig cfg = chip(window);
    ASSERT_EQ(cfg.noc.request_bytes, 512u);
    MemorySystem m(cfg, 1);
    m.preload(0, 1 << 20);  // L2 hits: no HBM timing in the way
    const GmAccess big = m.access(GmRequest{0, false, 0, 2048, 0});
    const GmAccess small = m.access(GmRequest{0, false, 4096, 512, 0});
    if (window == 4) {
      EXPECT_GE(small.accepted, big.done) << "the window was full";
    } else {
      EXPECT_EQ(small.accepted, static_cast<std::uint64_t>(std::ceil((2048.0 + 512.0) / 110.0)));
      EXPECT_LT(small.accepted, big.done);
    }
  }
}

// A copy of more requests than the window holds takes all of it (and is not refused): the next read waits for it.
TEST(MemorySystem, ACopyLargerThanTheWindowTakesTheWholeWindow) {
  MemorySystem m(chip(4), 1);
  m.preload(0, 1 << 20);
  const GmAccess huge = m.access(GmRequest{0, false, 0, 8192, 0});  // 16 requests' worth: the whole window
  const GmAccess next = m.access(GmRequest{0, false, 16384, 512, 0});
  EXPECT_GE(next.accepted, huge.done);
}

// The trace's counter bins are kept where traffic was, not for every bin up to the last request: a read at cycle
// 10^12 (10^9 bins of 1 us at 1 GHz) costs a bin or two. A vector of every bin took 3 GB at cycle 10^11 and threw
// bad_alloc at 10^15 (issue 23).
TEST(MemorySystem, CounterBinsAreKeptOnlyWhereTrafficWas) {
  const config::ChipConfig cfg = config::load_config("tiny").chip;
  MemorySystem m(cfg, 1);
  m.access(GmRequest{0, false, 0, 512, 0});
  const std::uint64_t far = 1'000'000'000'000;
  m.access(GmRequest{0, false, 1 << 20, 512, far});
  ASSERT_EQ(m.bin_cycles(), 1000u);  // sim.counter_interval 1 us at 1 GHz
  EXPECT_LE(m.bins().size(), 4u);
  EXPECT_EQ(m.bins().begin()->first, 0u);
  EXPECT_GE(m.bins().rbegin()->first, far / m.bin_cycles());
  std::uint64_t hbm = 0;
  for (const auto& [i, b] : m.bins()) hbm += b.hbm_bytes;
  EXPECT_EQ(hbm, m.hbm().stats().read_bytes);  // every HBM byte is in some bin
}

}  // namespace
}  // namespace npusim::hw::mem
