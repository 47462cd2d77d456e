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
  const std::uint32_t es = hw::isa::dtype_bytes(t.dtype);
  for (std::uint64_t i = 0; i < n; ++i) {
    hw::isa::store_float(&bytes[i * es], t.dtype, d(rng));
    values[i] = hw::isa::load_float(&bytes[i * es], t.dtype);  // the value the device sees
  }
}

std::pair<double, double> default_tolerance(DType t) {
  if (t == DType::kFp16) return {1e-3, 2e-3};
  if (t == DType::kBf16) return {8e-3, 1.6e-2};
  if (t == DType::kInt32 || t == DType::kInt8) return {0, 0};
  return {1e-6, 1e-5};
}

float element(const std::vector<std::uint8_t>& bytes, DType t, std::uint64_t i) {
  return hw::isa::load_float(&bytes[i * hw::isa::dtype_bytes(t)], t);
}

}  // namespace npusim::cli
