// Element types of the AI core and their conversions (the functional semantics of casts). fp16 is IEEE 754
// binary16, bf16 the upper half of binary32. Conversions narrowing to fp16/bf16 take the rounding modes of the
// vector cast instruction; they are bit-exact against the hardware rules (tested against the compiler's _Float16).
#pragma once

#include <cstdint>
#include <cstring>
#include <string_view>

namespace npusim::hw::isa {

enum class DType : std::uint8_t { kFp16, kBf16, kFp32, kInt8, kInt32 };

constexpr std::uint32_t dtype_bytes(DType t) {
  switch (t) {
    case DType::kFp16:
    case DType::kBf16: return 2;
    case DType::kFp32:
    case DType::kInt32: return 4;
    case DType::kInt8: return 1;
  }
  return 0;
}
std::string_view dtype_name(DType t);
constexpr bool is_float(DType t) {
  return t == DType::kFp16 || t == DType::kBf16 || t == DType::kFp32;
}

// Rounding modes of Cast (Ascend C's RoundMode names in parentheses).
enum class Round : std::uint8_t {
  kNearestEven,    // CAST_RINT: to nearest, ties to even
  kNearestAway,    // CAST_ROUND: to nearest, ties away from zero
  kFloor,          // CAST_FLOOR: toward -inf
  kCeil,           // CAST_CEIL: toward +inf
  kTowardZero,     // CAST_TRUNC: toward zero
};

struct Half {
  std::uint16_t bits = 0;
};
struct BFloat16 {
  std::uint16_t bits = 0;
};

inline std::uint32_t float_bits(float f) {
  std::uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}
inline float bits_float(std::uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

// Exact widenings.
float to_float(Half h);
inline float to_float(BFloat16 b) { return bits_float(static_cast<std::uint32_t>(b.bits) << 16); }

// Narrowings with a rounding mode. NaN stays NaN (quiet); overflow follows the rounding direction (to infinity or
// to the largest finite value), as IEEE 754 specifies.
Half to_half(float f, Round mode = Round::kNearestEven);
BFloat16 to_bf16(float f, Round mode = Round::kNearestEven);

// float -> integer with a rounding mode, saturating at the type's range; NaN converts to 0.
std::int32_t to_int32(float f, Round mode);
std::int8_t to_int8(float f, Round mode);

// An element of type t at p as float (integers converted), and a float stored as type t (rounded with `mode`;
// integers saturate). The one place element bytes are read and written (kernels' semantics, host tensors).
float load_float(const std::uint8_t* p, DType t);
void store_float(std::uint8_t* p, DType t, float v, Round mode = Round::kNearestEven);

}  // namespace npusim::hw::isa
