#include "cli/tensor_data.hpp"

#include <cmath>
#include <cstring>

#include "common/util/error.hpp"

namespace npusim::cli {

namespace ops = stack::ops;
using hw::isa::DType;

// Random inputs in the op's range (default [-1, 1)), rounded to the dtype; returns the device bytes and the fp32 values the reference uses.
void random_tensor(const ops::TensorDesc& t, std::pair<float, float> range, std::mt19937_64& rng,
                   std::vector<std::uint8_t>& bytes, ops::HostTensor& values, bool distinct) {
  const std::uint64_t n = ops::elements(t.shape);
  std::uniform_real_distribution<float> d(range.first, range.second);
  bytes.resize(t.bytes());
  values.resize(n);
  const std::uint32_t es = hw::isa::dtype_bytes(t.dtype);
  std::vector<float> pool;  // distinct: the range's integers, the first n shuffled into place
  if (distinct) {
    for (auto v = static_cast<std::int64_t>(std::ceil(range.first));
         v <= static_cast<std::int64_t>(std::floor(range.second)); ++v)
      pool.push_back(static_cast<float>(v));
    if (pool.size() < n)
      throw InputError("cannot draw " + std::to_string(n) + " distinct values from " + std::to_string(pool.size()) +
                       " integers");
    for (std::uint64_t i = 0; i < n; ++i) std::swap(pool[i], pool[i + rng() % (pool.size() - i)]);
  }
  for (std::uint64_t i = 0; i < n; ++i) {
    hw::isa::store_float(&bytes[i * es], t.dtype, distinct ? pool[i] : d(rng));
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
