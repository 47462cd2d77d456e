// Device-memory allocation for the runtime (aclrtMalloc-like): a best-fit free list over [base, base + size) with
// coalescing of neighbours on free, every block aligned to `alignment` (512 B by default, the GM full-bandwidth
// alignment). Plain C++; the runtime owns one per device.
#pragma once

#include <cstdint>
#include <map>
#include <string>

namespace npusim::stack::runtime {

struct AllocatorStats {
  std::uint64_t capacity = 0;
  std::uint64_t used = 0;       // bytes in live blocks (rounded to the alignment)
  std::uint64_t peak_used = 0;
  std::uint64_t largest_free = 0;
  std::uint64_t free_blocks = 0;
  std::uint64_t live_blocks = 0;
};

class DeviceAllocator {
 public:
  DeviceAllocator(std::uint64_t base, std::uint64_t size, std::uint64_t alignment = 512);

  // Returns the address of a block of at least `bytes` bytes. Throws InputError ("out of device memory") naming the
  // request, the free bytes and the largest free block when no free block is large enough.
  std::uint64_t allocate(std::uint64_t bytes);
  // Frees a block returned by allocate(). Throws InputError for an address that is not a live block (double free,
  // a pointer into a block, or never allocated).
  void free(std::uint64_t addr);
  // Size of the live block at addr (0 if none).
  std::uint64_t block_size(std::uint64_t addr) const;
  AllocatorStats stats() const;

 private:
  std::uint64_t base_, size_, align_;
  std::map<std::uint64_t, std::uint64_t> free_;  // address -> size, disjoint and never adjacent
  std::map<std::uint64_t, std::uint64_t> live_;  // address -> size
  std::uint64_t used_ = 0, peak_ = 0;
};

}  // namespace npusim::stack::runtime
