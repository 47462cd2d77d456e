// Tensor bytes on the host side of the CLI: seeded random inputs rounded to their dtype, and elements read back.
#pragma once

#include <cstdint>
#include <random>
#include <utility>
#include <vector>

#include "stack/ops/op.hpp"

namespace npusim::cli {

// Random values in `range`, rounded to the tensor's dtype: the device bytes and the fp32 values a reference uses.
// With `distinct`, the tensor (of integers) gets distinct values of [range]; InputError when the range holds fewer
// integers than the tensor has elements.
void random_tensor(const stack::ops::TensorDesc& t, std::pair<float, float> range, std::mt19937_64& rng,
                   std::vector<std::uint8_t>& bytes, stack::ops::HostTensor& values, bool distinct = false);
// Tolerances of a --check per output dtype: |out - ref| <= atol + rtol |ref|. One rounding to the dtype is 2^-11
// (fp16), 2^-8 (bf16) relative; integers compare exactly.
std::pair<double, double> default_tolerance(hw::isa::DType t);
// Element i of fp16/bf16/fp32 bytes as a float.
float element(const std::vector<std::uint8_t>& bytes, hw::isa::DType t, std::uint64_t i);

}  // namespace npusim::cli
