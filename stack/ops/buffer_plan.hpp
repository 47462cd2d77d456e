// A kernel's local buffers as its tiling planned them: each buffer named, with its bytes per slot and its slots (a
// queue's depth). The tiling sizes its tiles so that the plan's total fits the buffer; the kernel allocates exactly
// the plan's entries (TPipe::InitBuffer with their bytes and slots). Both read one plan, computed by one function,
// so the budget the tiling counts and what the kernel takes cannot drift apart.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "common/util/arith.hpp"

namespace npusim::stack::ops {

// Bytes a buffer is shifted by so that its blocks fall in other UB bank groups than a buffer of the same alignment
// read by the same instruction: 8 blocks of 32 B, half of 910B's 16 bank groups (docs/hw.md, UB bank conflicts).
constexpr std::uint64_t kBankSkew = 256;

class BufferPlan {
 public:
  struct Buffer {
    std::string name;
    std::uint64_t bytes = 0;  // per slot
    std::uint32_t slots = 1;
  };

  // A buffer of `bytes` per slot; names are unique within a plan.
  void add(const std::string& name, std::uint64_t bytes, std::uint32_t slots = 1) {
    if (has(name)) throw std::logic_error("buffer plan: '" + name + "' planned twice");
    buffers_.push_back({name, bytes, slots});
  }
  bool has(const std::string& name) const {
    for (const Buffer& b : buffers_)
      if (b.name == name) return true;
    return false;
  }
  // The planned buffer; std::logic_error for a name the plan does not hold (a kernel asking for what its tiling
  // did not count).
  const Buffer& operator[](const std::string& name) const {
    for (const Buffer& b : buffers_)
      if (b.name == name) return b;
    throw std::logic_error("buffer plan: no buffer '" + name + "' was planned");
  }
  // Bytes the buffers take when each slot starts on an `align`-byte boundary (as TPipe allocates them; 0 is no
  // alignment).
  std::uint64_t total(std::uint64_t align) const {
    const std::uint64_t a = align ? align : 1;
    std::uint64_t sum = 0;
    for (const Buffer& b : buffers_) sum += b.slots * ceil_to(b.bytes, a);
    return sum;
  }
  const std::vector<Buffer>& buffers() const { return buffers_; }

 private:
  std::vector<Buffer> buffers_;
};

}  // namespace npusim::stack::ops
