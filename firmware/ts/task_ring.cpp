#include "firmware/ts/task_ring.hpp"

#include <cstring>
#include <stdexcept>
#include <string>

#include "common/util/error.hpp"

namespace npusim::fw::ts {

namespace {
// Header layout: magic u32 @0, entries u32 @4, head u64 @8 (consumed count), tail u64 @16 (produced count).
constexpr std::uint64_t kHead = 8, kTail = 16;

template <class T>
void put(std::uint8_t* p, std::size_t off, T v) {
  std::memcpy(p + off, &v, sizeof v);
}
template <class T>
T get(const std::uint8_t* p, std::size_t off) {
  T v;
  std::memcpy(&v, p + off, sizeof v);
  return v;
}
}  // namespace

// Descriptor layout (64 B): type u8 @0, copy u8 @1, stream u16 @2, task_id u32 @4, kernel u32 @8, block_dim u32 @12,
// args u64 @16, src u64 @24, dst u64 @32, bytes u64 @40, event u32 @48, status u32 @52, reserved @56..63.
void encode(const TaskDescriptor& d, std::uint8_t out[kDescriptorBytes]) {
  std::memset(out, 0, kDescriptorBytes);
  put<std::uint8_t>(out, 0, static_cast<std::uint8_t>(d.type));
  put<std::uint8_t>(out, 1, static_cast<std::uint8_t>(d.copy));
  put<std::uint16_t>(out, 2, d.stream);
  put<std::uint32_t>(out, 4, d.task_id);
  put<std::uint32_t>(out, 8, d.kernel);
  put<std::uint32_t>(out, 12, d.block_dim);
  put<std::uint64_t>(out, 16, d.args);
  put<std::uint64_t>(out, 24, d.src);
  put<std::uint64_t>(out, 32, d.dst);
  put<std::uint64_t>(out, 40, d.bytes);
  put<std::uint32_t>(out, 48, d.event);
  put<std::uint32_t>(out, 52, d.status);
}

TaskDescriptor decode(const std::uint8_t in[kDescriptorBytes], std::uint64_t where) {
  TaskDescriptor d;
  const auto type = get<std::uint8_t>(in, 0);
  if (type < 1 || type > 5) {
    throw InputError("task descriptor at device address " + std::to_string(where) + " has an unknown type " +
                     std::to_string(type));
  }
  d.type = static_cast<TaskType>(type);
  d.copy = static_cast<CopyKind>(get<std::uint8_t>(in, 1));
  d.stream = get<std::uint16_t>(in, 2);
  d.task_id = get<std::uint32_t>(in, 4);
  d.kernel = get<std::uint32_t>(in, 8);
  d.block_dim = get<std::uint32_t>(in, 12);
  d.args = get<std::uint64_t>(in, 16);
  d.src = get<std::uint64_t>(in, 24);
  d.dst = get<std::uint64_t>(in, 32);
  d.bytes = get<std::uint64_t>(in, 40);
  d.event = get<std::uint32_t>(in, 48);
  d.status = get<std::uint32_t>(in, 52);
  return d;
}

TaskRing TaskRing::create(hw::mem::DeviceMemory& memory, std::uint64_t base, std::uint32_t entries) {
  if (entries == 0) throw InputError("a task ring needs at least one entry");
  std::uint8_t header[kRingHeaderBytes] = {};
  put<std::uint32_t>(header, 0, kRingMagic);
  put<std::uint32_t>(header, 4, entries);
  memory.write(base, header, sizeof header);
  return TaskRing(memory, base, entries);
}

TaskRing TaskRing::attach(hw::mem::DeviceMemory& memory, std::uint64_t base) {
  std::uint8_t header[kRingHeaderBytes];
  memory.read(base, header, sizeof header);
  if (get<std::uint32_t>(header, 0) != kRingMagic || get<std::uint32_t>(header, 4) == 0) {
    throw InputError("no task ring at device address " + std::to_string(base));
  }
  return TaskRing(memory, base, get<std::uint32_t>(header, 4));
}

std::uint64_t TaskRing::read_u64(std::uint64_t offset) const {
  std::uint64_t v;
  m_->read(base_ + offset, &v, 8);
  return v;
}

void TaskRing::write_u64(std::uint64_t offset, std::uint64_t v) { m_->write(base_ + offset, &v, 8); }

std::uint32_t TaskRing::size() const { return static_cast<std::uint32_t>(read_u64(kTail) - read_u64(kHead)); }

void TaskRing::push(const TaskDescriptor& d) {
  if (full()) throw std::logic_error("push on a full task ring");
  const std::uint64_t tail = read_u64(kTail);
  std::uint8_t slot[kDescriptorBytes];
  encode(d, slot);
  m_->write(base_ + kRingHeaderBytes + (tail % entries_) * kDescriptorBytes, slot, kDescriptorBytes);
  write_u64(kTail, tail + 1);  // the doorbell: the slot is visible before the tail moves
}

TaskDescriptor TaskRing::pop() {
  if (empty()) throw std::logic_error("pop on an empty task ring");
  const std::uint64_t head = read_u64(kHead);
  const std::uint64_t where = base_ + kRingHeaderBytes + (head % entries_) * kDescriptorBytes;
  std::uint8_t slot[kDescriptorBytes];
  m_->read(where, slot, kDescriptorBytes);
  const TaskDescriptor d = decode(slot, where);
  write_u64(kHead, head + 1);
  return d;
}

}  // namespace npusim::fw::ts
