// The driver <-> task-scheduler ABI: descriptors round-trip through device memory; rings wrap, fill and empty.
#include <gtest/gtest.h>

#include "common/util/error.hpp"
#include "firmware/ts/task_ring.hpp"

namespace npusim::fw::ts {
namespace {

TEST(TaskRing, DescriptorsRoundTripThroughDeviceMemoryAndTheRingWraps) {
  hw::mem::DeviceMemory mem(1 << 20);
  TaskRing sq = TaskRing::create(mem, 0x1000, 4);
  TaskRing fw_view = TaskRing::attach(mem, 0x1000);  // the firmware side sees only device memory
  EXPECT_EQ(fw_view.entries(), 4u);
  for (std::uint32_t round = 0; round < 3; ++round) {
    for (std::uint32_t i = 0; i < 4; ++i) {
      TaskDescriptor d;
      d.type = i % 2 ? TaskType::kMemcpy : TaskType::kKernel;
      d.stream = 7;
      d.task_id = round * 4 + i;
      d.block_dim = 48;
      d.args = 0xdeadbeef00ULL + i;
      d.copy = CopyKind::kHostToDevice;
      d.src = 1ULL << 40;
      d.bytes = 12345;
      sq.push(d);
    }
    EXPECT_TRUE(fw_view.full());
    EXPECT_THROW(sq.push(TaskDescriptor{}), std::logic_error);
    for (std::uint32_t i = 0; i < 4; ++i) {
      const TaskDescriptor d = fw_view.pop();
      EXPECT_EQ(d.task_id, round * 4 + i);
      EXPECT_EQ(d.type, i % 2 ? TaskType::kMemcpy : TaskType::kKernel);
      EXPECT_EQ(d.stream, 7);
      EXPECT_EQ(d.block_dim, 48u);
      EXPECT_EQ(d.args, 0xdeadbeef00ULL + i);
      EXPECT_EQ(d.src, 1ULL << 40);
      EXPECT_EQ(d.bytes, 12345u);
    }
    EXPECT_TRUE(sq.empty());
  }
  EXPECT_THROW(fw_view.pop(), std::logic_error);
}

TEST(TaskRing, GarbageIsAClearError) {
  hw::mem::DeviceMemory mem(1 << 20);
  EXPECT_THROW(TaskRing::attach(mem, 0x2000), InputError);
  TaskRing r = TaskRing::create(mem, 0, 2);
  const std::uint8_t junk[kDescriptorBytes] = {9};
  mem.write(kRingHeaderBytes, junk, sizeof junk);
  const std::uint64_t tail = 1;
  mem.write(16, &tail, 8);
  try {
    r.pop();
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("unknown type 9"), std::string::npos);
  }
}

}  // namespace
}  // namespace npusim::fw::ts
