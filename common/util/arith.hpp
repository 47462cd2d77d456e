// Integer helpers every layer uses, defined once: division rounding up, rounding up to a multiple, and checked
// narrowing (a value converted to a smaller integer type must fit: no silent wrap).
#pragma once

#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>
#include <type_traits>

namespace npusim {

// ceil(a / b) for b > 0.
constexpr std::uint64_t ceil_div(std::uint64_t a, std::uint64_t b) { return (a + b - 1) / b; }

// The smallest multiple of m that is at least v, for m > 0.
constexpr std::uint64_t ceil_to(std::uint64_t v, std::uint64_t m) { return ceil_div(v, m) * m; }

// Whether the integer v is a value of the integer type To (comparisons across signedness done right).
template <class To, class From>
constexpr bool fits(From v) {
  static_assert(std::is_integral_v<To> && std::is_integral_v<From>, "fits: integer types only");
  using Lim = std::numeric_limits<To>;
  if constexpr (std::is_signed_v<From> && !std::is_signed_v<To>) {
    return v >= 0 && static_cast<std::make_unsigned_t<From>>(v) <= Lim::max();
  } else if constexpr (!std::is_signed_v<From> && std::is_signed_v<To>) {
    return v <= static_cast<std::make_unsigned_t<To>>(Lim::max());
  } else {
    return v >= Lim::min() && v <= Lim::max();
  }
}

// v converted to the integer type To, checked: a value To cannot hold throws std::range_error naming the value and
// the type, where static_cast would wrap silently (a count or size from a shape or tiling that an instruction field
// cannot encode is a bug to report, not a wrong result).
template <class To, class From>
constexpr To narrow(From v) {
  if (!fits<To>(v)) {
    throw std::range_error(
        "the value " + std::to_string(v) + " does not fit in a" + (std::is_signed_v<To> ? " signed " : "n unsigned ") +
        std::to_string(std::numeric_limits<To>::digits + (std::is_signed_v<To> ? 1 : 0)) + "-bit field");
  }
  return static_cast<To>(v);
}

// The instruction fields' widths (repeat counts, block counts, lengths), checked.
template <class From>
constexpr std::uint8_t u8(From v) {
  return narrow<std::uint8_t>(v);
}
template <class From>
constexpr std::uint16_t u16(From v) {
  return narrow<std::uint16_t>(v);
}
template <class From>
constexpr std::uint32_t u32(From v) {
  return narrow<std::uint32_t>(v);
}

}  // namespace npusim
