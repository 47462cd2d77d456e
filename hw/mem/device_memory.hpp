// The device-memory backing store: the whole configured capacity (64 GiB on 910b) as one reserved range of the host's
// address space (mmap with MAP_NORESERVE), so the host's pages are taken only where something is written and
// untouched memory reads as zero. Being one range, device address A is host address base() + A: a user kernel
// compiled against the SDK receives its GM_ADDR arguments as such pointers and may dereference them on its scalar
// unit, as Ascend C kernels do with their tiling data.
#pragma once

#include <cstdint>
#include <vector>

namespace npusim::hw::mem {

class DeviceMemory {
 public:
  // Throws InputError when the host cannot reserve `capacity` bytes of address space.
  explicit DeviceMemory(std::uint64_t capacity);
  ~DeviceMemory();
  DeviceMemory(const DeviceMemory&) = delete;
  DeviceMemory& operator=(const DeviceMemory&) = delete;

  std::uint64_t capacity() const { return capacity_; }
  // Throws InputError when [addr, addr + bytes) is outside the capacity.
  void read(std::uint64_t addr, void* out, std::uint64_t bytes) const;
  void write(std::uint64_t addr, const void* in, std::uint64_t bytes);
  // Bytes of the kPageBytes pages written through write() (what the store holds beyond zeros).
  std::uint64_t resident_bytes() const { return written_pages_ * kPageBytes; }

  // The host view: device address A is at base() + A.
  std::uint8_t* base() const { return base_; }
  // The device address of a host pointer into the view, or false when `p` (with `bytes` after it) is outside it.
  bool device_address(const void* p, std::uint64_t bytes, std::uint64_t& addr) const;

  static constexpr std::uint64_t kPageBytes = 64 * 1024;

 private:
  void check(std::uint64_t addr, std::uint64_t bytes) const;
  std::uint64_t capacity_;
  std::uint8_t* base_ = nullptr;
  std::vector<bool> written_;
  std::uint64_t written_pages_ = 0;
};

}  // namespace npusim::hw::mem
