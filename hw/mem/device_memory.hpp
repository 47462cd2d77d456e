// The device-memory backing store: addresses the whole configured capacity (64 GiB on 910b) but allocates only the
// 64 KiB pages that are written. Untouched memory reads as zero.
#pragma once

#include <cstdint>
#include <memory>
#include <unordered_map>

namespace npusim::hw::mem {

class DeviceMemory {
 public:
  explicit DeviceMemory(std::uint64_t capacity) : capacity_(capacity) {}

  std::uint64_t capacity() const { return capacity_; }
  // Throws InputError when [addr, addr + bytes) is outside the capacity.
  void read(std::uint64_t addr, void* out, std::uint64_t bytes) const;
  void write(std::uint64_t addr, const void* in, std::uint64_t bytes);
  std::uint64_t resident_bytes() const { return pages_.size() * kPageBytes; }

  static constexpr std::uint64_t kPageBytes = 64 * 1024;

 private:
  void check(std::uint64_t addr, std::uint64_t bytes) const;
  std::uint64_t capacity_;
  std::unordered_map<std::uint64_t, std::unique_ptr<std::uint8_t[]>> pages_;
};

}  // namespace npusim::hw::mem
