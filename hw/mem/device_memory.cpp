#include "hw/mem/device_memory.hpp"

#include <sys/mman.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "common/util/error.hpp"

namespace npusim::hw::mem {

DeviceMemory::DeviceMemory(std::uint64_t capacity) : capacity_(capacity) {
  if (capacity_ == 0) return;
  void* p = mmap(nullptr, capacity_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) {
    throw InputError("cannot reserve " + std::to_string(capacity_) + " B of host address space for the device memory (" +
                     std::strerror(errno) + "); lower hbm.capacity");
  }
  base_ = static_cast<std::uint8_t*>(p);
  written_.assign((capacity_ + kPageBytes - 1) / kPageBytes, false);
}

DeviceMemory::~DeviceMemory() {
  if (base_) munmap(base_, capacity_);
}

void DeviceMemory::check(std::uint64_t addr, std::uint64_t bytes) const {
  if (addr > capacity_ || bytes > capacity_ - addr) {
    throw InputError("device memory access [" + std::to_string(addr) + ", +" + std::to_string(bytes) +
                     ") is outside the " + std::to_string(capacity_) + " B of device memory");
  }
}

void DeviceMemory::read(std::uint64_t addr, void* out, std::uint64_t bytes) const {
  check(addr, bytes);
  if (bytes) std::memcpy(out, base_ + addr, bytes);
}

void DeviceMemory::write(std::uint64_t addr, const void* in, std::uint64_t bytes) {
  check(addr, bytes);
  if (!bytes) return;
  std::memcpy(base_ + addr, in, bytes);
  for (std::uint64_t page = addr / kPageBytes, last = (addr + bytes - 1) / kPageBytes; page <= last; ++page) {
    if (!written_[page]) {
      written_[page] = true;
      ++written_pages_;
    }
  }
}

bool DeviceMemory::device_address(const void* p, std::uint64_t bytes, std::uint64_t& addr) const {
  const auto u = reinterpret_cast<std::uintptr_t>(p), b = reinterpret_cast<std::uintptr_t>(base_);
  if (!base_ || u < b || u - b > capacity_ || bytes > capacity_ - (u - b)) return false;
  addr = u - b;
  return true;
}

}  // namespace npusim::hw::mem
