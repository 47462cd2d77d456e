#include "stack/runtime/device_allocator.hpp"

#include <algorithm>

#include "common/util/arith.hpp"
#include "common/util/error.hpp"

namespace npusim::stack::runtime {

DeviceAllocator::DeviceAllocator(std::uint64_t base, std::uint64_t size, std::uint64_t alignment)
    : base_(base), size_(size), align_(alignment) {
  if (alignment == 0 || (alignment & (alignment - 1)) != 0) throw InputError("allocator alignment must be a power of two");
  const std::uint64_t first = ceil_to(base, align_);
  if (first < base + size) free_[first] = (base + size - first) / align_ * align_;
}

std::uint64_t DeviceAllocator::allocate(std::uint64_t bytes) {
  const std::uint64_t need = std::max<std::uint64_t>(1, ceil_div(bytes, align_)) * align_;
  // Best fit: the smallest free block that holds the request; ties go to the lowest address.
  auto best = free_.end();
  for (auto it = free_.begin(); it != free_.end(); ++it)
    if (it->second >= need && (best == free_.end() || it->second < best->second)) best = it;
  if (best == free_.end()) {
    const AllocatorStats s = stats();
    throw InputError("out of device memory: cannot allocate " + std::to_string(bytes) + " B (" +
                     std::to_string(size_ - used_) + " B free, largest free block " +
                     std::to_string(s.largest_free) + " B, " + std::to_string(s.live_blocks) + " blocks live)");
  }
  const std::uint64_t addr = best->first, have = best->second;
  free_.erase(best);
  if (have > need) free_[addr + need] = have - need;
  live_[addr] = need;
  used_ += need;
  peak_ = std::max(peak_, used_);
  return addr;
}

void DeviceAllocator::free(std::uint64_t addr) {
  const auto it = live_.find(addr);
  if (it == live_.end()) {
    throw InputError("free of device address " + std::to_string(addr) +
                     ", which is not a live allocation (double free or not returned by malloc)");
  }
  std::uint64_t start = addr, size = it->second;
  used_ -= size;
  live_.erase(it);
  // Coalesce with the free neighbours on both sides.
  auto next = free_.lower_bound(start);
  if (next != free_.end() && next->first == start + size) {
    size += next->second;
    next = free_.erase(next);
  }
  if (next != free_.begin()) {
    auto prev = std::prev(next);
    if (prev->first + prev->second == start) {
      start = prev->first;
      size += prev->second;
      free_.erase(prev);
    }
  }
  free_[start] = size;
}

std::uint64_t DeviceAllocator::block_size(std::uint64_t addr) const {
  const auto it = live_.find(addr);
  return it == live_.end() ? 0 : it->second;
}

AllocatorStats DeviceAllocator::stats() const {
  AllocatorStats s;
  s.capacity = size_;
  s.used = used_;
  s.peak_used = peak_;
  s.free_blocks = free_.size();
  s.live_blocks = live_.size();
  for (const auto& [a, n] : free_) s.largest_free = std::max(s.largest_free, n);
  return s;
}

}  // namespace npusim::stack::runtime
