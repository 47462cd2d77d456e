#include "hw/mem/device_memory.hpp"

#include <algorithm>
#include <cstring>
#include <string>

#include "common/util/error.hpp"

namespace npusim::hw::mem {

void DeviceMemory::check(std::uint64_t addr, std::uint64_t bytes) const {
  if (addr > capacity_ || bytes > capacity_ - addr) {
    throw InputError("device memory access [" + std::to_string(addr) + ", +" + std::to_string(bytes) +
                     ") is outside the " + std::to_string(capacity_) + " B of device memory");
  }
}

void DeviceMemory::read(std::uint64_t addr, void* out, std::uint64_t bytes) const {
  check(addr, bytes);
  auto* dst = static_cast<std::uint8_t*>(out);
  while (bytes) {
    const std::uint64_t page = addr / kPageBytes, off = addr % kPageBytes;
    const std::uint64_t n = std::min(bytes, kPageBytes - off);
    const auto it = pages_.find(page);
    if (it == pages_.end()) std::memset(dst, 0, n);
    else std::memcpy(dst, it->second.get() + off, n);
    dst += n;
    addr += n;
    bytes -= n;
  }
}

void DeviceMemory::write(std::uint64_t addr, const void* in, std::uint64_t bytes) {
  check(addr, bytes);
  const auto* src = static_cast<const std::uint8_t*>(in);
  while (bytes) {
    const std::uint64_t page = addr / kPageBytes, off = addr % kPageBytes;
    const std::uint64_t n = std::min(bytes, kPageBytes - off);
    auto& p = pages_[page];
    if (!p) {
      p = std::make_unique<std::uint8_t[]>(kPageBytes);
      std::memset(p.get(), 0, kPageBytes);
    }
    std::memcpy(p.get() + off, src, n);
    src += n;
    addr += n;
    bytes -= n;
  }
}

}  // namespace npusim::hw::mem
