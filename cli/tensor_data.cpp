#include "cli/tensor_data.hpp"

#include <cstring>

namespace npusim::cli {

namespace ops = stack::ops;
using hw::isa::DType;

// Random inputs in the op's range (default [-1, 1)), rounded to the dtype; returns the device bytes and the fp32 values the reference uses.
void random_tensor(const ops::TensorDesc& t, std::pair<float, float> range, std::mt19937_64& rng,
                   std::vector<std::uint8_t>& bytes, ops::HostTensor& values) {
  const std::uint64_t n = ops::elements(t.shape);
  std::uniform_real_distribution<float> d(range.first, range.second);
  bytes.resize(t.bytes());
  values.resize(n);
  for (std::uint64_t i = 0; i < n; ++i) {
    float v = d(rng);
    if (t.dtype == DType::kFp16) {
      const hw::isa::Half h = hw::isa::to_half(v);
      std::memcpy(&bytes[i * 2], &h.bits, 2);
      v = hw::isa::to_float(h);
    } else if (t.dtype == DType::kBf16) {
      const hw::isa::BFloat16 b = hw::isa::to_bf16(v);
      std::memcpy(&bytes[i * 2], &b.bits, 2);
      v = hw::isa::to_float(b);
    } else {
      std::memcpy(&bytes[i * 4], &v, 4);
    }
    values[i] = v;
  }
}

float element(const std::vector<std::uint8_t>& bytes, DType t, std::uint64_t i) {
  if (t == DType::kFp16) {
    hw::isa::Half h;
    std::memcpy(&h.bits, &bytes[i * 2], 2);
    return hw::isa::to_float(h);
  }
  if (t == DType::kBf16) {
    hw::isa::BFloat16 b;
    std::memcpy(&b.bits, &bytes[i * 2], 2);
    return hw::isa::to_float(b);
  }
  float f;
  std::memcpy(&f, &bytes[i * 4], 4);
  return f;
}

}  // namespace npusim::cli
