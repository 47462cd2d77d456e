// The runtime's device-memory allocator: alignment, best fit, coalescing, fragmentation, clear errors.
#include <gtest/gtest.h>

#include <random>
#include <set>

#include "common/util/error.hpp"
#include "stack/runtime/device_allocator.hpp"

namespace npusim::stack::runtime {
namespace {

TEST(DeviceAllocator, AlignsRoundsAndReusesFreedSpace) {
  DeviceAllocator a(0, 1 << 20, 512);
  const auto x = a.allocate(1);
  const auto y = a.allocate(600);
  EXPECT_EQ(x % 512, 0u);
  EXPECT_EQ(y % 512, 0u);
  EXPECT_EQ(a.block_size(x), 512u);
  EXPECT_EQ(a.block_size(y), 1024u);
  EXPECT_EQ(a.stats().used, 1536u);
  a.free(x);
  EXPECT_EQ(a.allocate(512), x);  // best fit takes the hole
}

TEST(DeviceAllocator, CoalescesNeighboursSoFragmentationHeals) {
  DeviceAllocator a(4096, 8 * 4096, 4096);
  std::uint64_t b[8];
  for (auto& p : b) p = a.allocate(4096);
  EXPECT_THROW(a.allocate(1), InputError);
  for (int i : {1, 3, 5}) a.free(b[i]);
  // Three separate 4 KiB holes: 8 KiB does not fit although 12 KiB are free.
  try {
    a.allocate(8192);
    FAIL();
  } catch (const InputError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("out of device memory: cannot allocate 8192 B (12288 B free, largest free block 4096 B"),
              std::string::npos)
        << msg;
  }
  a.free(b[4]);  // joins 3, 4 and 5
  EXPECT_EQ(a.stats().largest_free, 3u * 4096);
  EXPECT_EQ(a.allocate(12288), b[3]);
}

TEST(DeviceAllocator, BadFreesAreErrors) {
  DeviceAllocator a(0, 1 << 16);
  const auto x = a.allocate(1024);
  EXPECT_THROW(a.free(x + 512), InputError);
  a.free(x);
  EXPECT_THROW(a.free(x), InputError);
}

TEST(DeviceAllocator, RandomWorkloadKeepsBlocksDisjointAndAccountsExactly) {
  DeviceAllocator a(0, 1 << 24, 512);
  std::mt19937_64 rng(3);
  std::map<std::uint64_t, std::uint64_t> live;
  for (int step = 0; step < 20000; ++step) {
    if (live.empty() || rng() % 3) {
      const std::uint64_t bytes = rng() % 65536 + 1;
      try {
        const auto p = a.allocate(bytes);
        live[p] = a.block_size(p);
      } catch (const InputError&) {
      }
    } else {
      auto it = live.begin();
      std::advance(it, static_cast<long>(rng() % live.size()));
      a.free(it->first);
      live.erase(it);
    }
  }
  std::uint64_t used = 0, end = 0;
  for (const auto& [p, n] : live) {
    EXPECT_GE(p, end);  // disjoint, in address order
    end = p + n;
    used += n;
  }
  EXPECT_EQ(a.stats().used, used);
  for (const auto& [p, n] : live) a.free(p);
  EXPECT_EQ(a.stats().largest_free, 1u << 24);  // everything coalesced back into one block
  EXPECT_EQ(a.stats().free_blocks, 1u);
}

}  // namespace
}  // namespace npusim::stack::runtime
