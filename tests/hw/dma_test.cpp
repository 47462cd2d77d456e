// SDMA engines and the host link against their formulas (hw/mem/dma.hpp).
#include <gtest/gtest.h>

#include "common/config/loader.hpp"
#include "hw/mem/dma.hpp"

namespace npusim::hw::mem {
namespace {

TEST(Sdma, CopiesTakeTheFirstFreeEngineAndCostLatencyPlusBytesOverBandwidth) {
  const auto cfg = config::load_config("910b", {"sdma.engines=2", "sdma.bandwidth=100GB/s", "sdma.latency=1us"}).chip;
  SdmaEngines sdma(cfg.sdma);
  // 1 MB at 100 GB/s = 10 us, plus 1 us.
  const Transfer a = sdma.copy(1000000, 0);
  EXPECT_DOUBLE_EQ(a.done_ns, 11000.0);
  const Transfer b = sdma.copy(1000000, 0);  // the second engine, in parallel
  EXPECT_EQ(b.engine, 1u);
  EXPECT_DOUBLE_EQ(b.done_ns, 11000.0);
  const Transfer c = sdma.copy(500000, 100);  // both busy: waits for the first to finish
  EXPECT_DOUBLE_EQ(c.start_ns, 11000.0);
  EXPECT_DOUBLE_EQ(c.done_ns, 11000.0 + 1000.0 + 5000.0);
  EXPECT_EQ(sdma.bytes(), 2500000u);
}

TEST(HostLink, DirectionsAreIndependentAndBackToBackTransfersStream) {
  const auto cfg = config::load_config("910b", {"host_link.bandwidth=32GB/s", "host_link.latency=2us"}).chip;
  HostLink link(cfg.host_link);
  const Transfer h2d = link.transfer(true, 32000000, 0);  // 1 ms of data
  EXPECT_DOUBLE_EQ(h2d.done_ns, 2000.0 + 1e6);
  const Transfer d2h = link.transfer(false, 32000000, 0);  // the other direction, in parallel
  EXPECT_DOUBLE_EQ(d2h.done_ns, 2000.0 + 1e6);
  const Transfer next = link.transfer(true, 32000, 0);  // queued behind the first, latency overlapped
  EXPECT_DOUBLE_EQ(next.start_ns, 1e6);
  EXPECT_DOUBLE_EQ(next.done_ns, 1e6 + 2000.0 + 1000.0);
  EXPECT_EQ(link.bytes(true), 32032000u);
}

}  // namespace
}  // namespace npusim::hw::mem
