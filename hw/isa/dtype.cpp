#include "hw/isa/dtype.hpp"

#include <cmath>
#include <cstring>
#include <limits>

namespace npusim::hw::isa {

std::string_view dtype_name(DType t) {
  switch (t) {
    case DType::kFp16: return "fp16";
    case DType::kBf16: return "bf16";
    case DType::kFp32: return "fp32";
    case DType::kInt8: return "int8";
    case DType::kInt32: return "int32";
  }
  return "?";
}

float to_float(Half h) {
  const std::uint32_t sign = static_cast<std::uint32_t>(h.bits & 0x8000u) << 16;
  const std::uint32_t exp = (h.bits >> 10) & 0x1fu;
  std::uint32_t man = h.bits & 0x3ffu;
  if (exp == 0x1f) return bits_float(sign | 0x7f800000u | (man << 13));  // inf / NaN (payload kept)
  if (exp != 0) return bits_float(sign | ((exp + 112) << 23) | (man << 13));
  if (man == 0) return bits_float(sign);
  // Subnormal half: value = man x 2^-24, exact in float.
  const float v = static_cast<float>(man) * 5.9604644775390625e-8f;
  return sign ? -v : v;
}

namespace {

// Decides whether to add one unit in the last place after truncating `dropped` low bits of a magnitude.
// `half` is the weight of the highest dropped bit; `lsb_odd` whether the kept value is odd.
bool round_up(std::uint32_t dropped, std::uint32_t half, bool lsb_odd, bool negative, Round mode) {
  if (dropped == 0) return false;
  switch (mode) {
    case Round::kNearestEven: return dropped > half || (dropped == half && lsb_odd);
    case Round::kNearestAway: return dropped >= half;
    case Round::kFloor: return negative;
    case Round::kCeil: return !negative;
    case Round::kTowardZero: return false;
  }
  return false;
}

// Whether an overflowing value goes to infinity (else to the largest finite value).
bool overflow_to_inf(bool negative, Round mode) {
  switch (mode) {
    case Round::kNearestEven:
    case Round::kNearestAway: return true;
    case Round::kFloor: return negative;
    case Round::kCeil: return !negative;
    case Round::kTowardZero: return false;
  }
  return true;
}

}  // namespace

Half to_half(float f, Round mode) {
  const std::uint32_t u = float_bits(f);
  const bool neg = (u >> 31) != 0;
  const std::uint16_t sign = neg ? 0x8000u : 0;
  const std::int32_t exp = static_cast<std::int32_t>((u >> 23) & 0xffu);
  const std::uint32_t man = u & 0x7fffffu;
  if (exp == 0xff) {
    if (man) return {static_cast<std::uint16_t>(sign | 0x7e00u | (man >> 13))};  // quiet NaN
    return {static_cast<std::uint16_t>(sign | 0x7c00u)};
  }
  const std::int32_t e = exp - 127 + 15;  // biased half exponent
  if (e >= 0x1f) {
    return {static_cast<std::uint16_t>(sign | (overflow_to_inf(neg, mode) ? 0x7c00u : 0x7bffu))};
  }
  std::uint32_t full = man | (exp ? 0x800000u : 0);  // 24-bit significand (float subnormals have no hidden bit)
  std::uint32_t shift;
  std::uint32_t base_exp;
  if (e >= 1) {
    shift = 13;
    base_exp = static_cast<std::uint32_t>(e);
  } else {
    // Half subnormal: the significand is shifted right by 14 - e (at least 14).
    const std::int32_t s = 14 - e;
    if (s > 31) {
      // Far below the smallest subnormal: only directed rounding can produce it.
      const bool up = full != 0 && round_up(1, 2, false, neg, mode);
      return {static_cast<std::uint16_t>(sign | (up ? 1u : 0u))};
    }
    shift = static_cast<std::uint32_t>(s);
    base_exp = 0;
  }
  std::uint32_t kept = full >> shift;
  const std::uint32_t dropped = full & ((1u << shift) - 1u);
  const std::uint32_t half = 1u << (shift - 1);
  if (round_up(dropped, half, (kept & 1u) != 0, neg, mode)) ++kept;
  std::uint32_t bits;
  if (base_exp == 0) {
    bits = kept;  // subnormal; a carry into bit 10 makes it the smallest normal, which is the right encoding
  } else {
    // kept includes the hidden bit at 10; a carry to bit 11 bumps the exponent.
    bits = ((base_exp - 1) << 10) + kept;
    if (bits >= 0x7c00u) {
      return {static_cast<std::uint16_t>(sign | (overflow_to_inf(neg, mode) ? 0x7c00u : 0x7bffu))};
    }
  }
  return {static_cast<std::uint16_t>(sign | bits)};
}

BFloat16 to_bf16(float f, Round mode) {
  const std::uint32_t u = float_bits(f);
  const bool neg = (u >> 31) != 0;
  if ((u & 0x7f800000u) == 0x7f800000u && (u & 0x7fffffu)) {
    return {static_cast<std::uint16_t>((u >> 16) | 0x0040u)};  // quiet NaN
  }
  const std::uint32_t mag = u & 0x7fffffffu;
  std::uint32_t kept = mag >> 16;
  if (round_up(mag & 0xffffu, 0x8000u, (kept & 1u) != 0, neg, mode)) ++kept;
  if (kept >= 0x7f80u && (mag & 0x7f800000u) != 0x7f800000u) {
    kept = overflow_to_inf(neg, mode) ? 0x7f80u : 0x7f7fu;
  }
  return {static_cast<std::uint16_t>((neg ? 0x8000u : 0) | kept)};
}

namespace {

double round_with(double v, Round mode) {
  switch (mode) {
    case Round::kNearestEven: return std::nearbyint(v);  // default FP environment rounds to nearest even
    case Round::kNearestAway: return std::round(v);
    case Round::kFloor: return std::floor(v);
    case Round::kCeil: return std::ceil(v);
    case Round::kTowardZero: return std::trunc(v);
  }
  return v;
}

template <typename Int>
Int saturate(float f, Round mode) {
  if (std::isnan(f)) return 0;
  const double r = round_with(static_cast<double>(f), mode);
  if (r <= static_cast<double>(std::numeric_limits<Int>::min())) return std::numeric_limits<Int>::min();
  if (r >= static_cast<double>(std::numeric_limits<Int>::max())) return std::numeric_limits<Int>::max();
  return static_cast<Int>(r);
}

}  // namespace

std::int32_t to_int32(float f, Round mode) { return saturate<std::int32_t>(f, mode); }
std::int8_t to_int8(float f, Round mode) { return saturate<std::int8_t>(f, mode); }

float load_float(const std::uint8_t* p, DType t) {
  switch (t) {
    case DType::kFp16: {
      Half h;
      std::memcpy(&h.bits, p, 2);
      return to_float(h);
    }
    case DType::kBf16: {
      BFloat16 b;
      std::memcpy(&b.bits, p, 2);
      return to_float(b);
    }
    case DType::kFp32: {
      float f;
      std::memcpy(&f, p, 4);
      return f;
    }
    case DType::kInt32: {
      std::int32_t i;
      std::memcpy(&i, p, 4);
      return static_cast<float>(i);
    }
    case DType::kInt8: return static_cast<float>(static_cast<std::int8_t>(*p));
  }
  return 0;
}

void store_float(std::uint8_t* p, DType t, float v, Round mode) {
  switch (t) {
    case DType::kFp16: {
      const Half h = to_half(v, mode);
      std::memcpy(p, &h.bits, 2);
      return;
    }
    case DType::kBf16: {
      const BFloat16 b = to_bf16(v, mode);
      std::memcpy(p, &b.bits, 2);
      return;
    }
    case DType::kFp32: std::memcpy(p, &v, 4); return;
    case DType::kInt32: {
      const std::int32_t i = to_int32(v, mode);
      std::memcpy(p, &i, 4);
      return;
    }
    case DType::kInt8: *p = static_cast<std::uint8_t>(to_int8(v, mode)); return;
  }
}

}  // namespace npusim::hw::isa
