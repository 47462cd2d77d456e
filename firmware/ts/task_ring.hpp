// The task-queue ABI between the driver (stack/driver, the producer) and the task-scheduler firmware (the
// consumer): fixed-size task descriptors in rings that live in device memory. A ring is a header (magic, entries,
// head, tail) followed by `entries` slots of kDescriptorBytes; the producer writes a slot and then the tail (the
// doorbell), the consumer reads the slot and then the head. Everything is little-endian bytes in device memory,
// read and written through hw::mem::DeviceMemory, so both sides see only what was really written there.
#pragma once

#include <cstdint>

#include "hw/mem/device_memory.hpp"

namespace npusim::fw::ts {

enum class TaskType : std::uint8_t { kKernel = 1, kMemcpy = 2, kEventRecord = 3, kEventWait = 4, kCompletion = 5 };
enum class CopyKind : std::uint8_t { kHostToDevice = 1, kDeviceToHost = 2, kDeviceToDevice = 3 };

struct TaskDescriptor {
  TaskType type = TaskType::kKernel;
  std::uint16_t stream = 0;
  std::uint32_t task_id = 0;
  // kernel
  std::uint32_t kernel = 0;     // index into the launch table
  std::uint32_t block_dim = 0;
  std::uint64_t args = 0;       // device address of the argument block
  // memcpy
  CopyKind copy = CopyKind::kDeviceToDevice;
  std::uint64_t src = 0, dst = 0, bytes = 0;
  // events
  std::uint32_t event = 0;
  // completion entries (CQ): the status of task_id
  std::uint32_t status = 0;
};

constexpr std::uint64_t kDescriptorBytes = 64;
constexpr std::uint64_t kRingHeaderBytes = 64;
constexpr std::uint32_t kRingMagic = 0x4e505154;  // "NPQT"

// Encodes into / decodes from exactly kDescriptorBytes. decode() throws InputError for bytes that are not a valid
// descriptor (unknown type), naming the slot address.
void encode(const TaskDescriptor& d, std::uint8_t out[kDescriptorBytes]);
TaskDescriptor decode(const std::uint8_t in[kDescriptorBytes], std::uint64_t where);

class TaskRing {
 public:
  static std::uint64_t footprint(std::uint32_t entries) { return kRingHeaderBytes + entries * kDescriptorBytes; }
  // Writes a fresh header at `base` (the driver creates the ring).
  static TaskRing create(hw::mem::DeviceMemory& memory, std::uint64_t base, std::uint32_t entries);
  // Attaches to an existing ring (the firmware finds it); throws InputError when there is no valid header.
  static TaskRing attach(hw::mem::DeviceMemory& memory, std::uint64_t base);

  std::uint32_t entries() const { return entries_; }
  std::uint64_t base() const { return base_; }
  std::uint32_t size() const;  // descriptors written and not yet consumed
  bool empty() const { return size() == 0; }
  bool full() const { return size() == entries_; }
  // Producer: writes the descriptor into the tail slot, then advances the tail (the doorbell write). Throws
  // std::logic_error when full (the driver checks first).
  void push(const TaskDescriptor& d);
  // Consumer: reads the head slot and advances the head. Throws std::logic_error when empty.
  TaskDescriptor pop();

 private:
  TaskRing(hw::mem::DeviceMemory& m, std::uint64_t base, std::uint32_t entries) : m_(&m), base_(base), entries_(entries) {}
  std::uint64_t read_u64(std::uint64_t offset) const;
  void write_u64(std::uint64_t offset, std::uint64_t v);
  hw::mem::DeviceMemory* m_;
  std::uint64_t base_;
  std::uint32_t entries_;
};

}  // namespace npusim::fw::ts
