// Integer helpers every layer uses, defined once: division rounding up, and rounding up to a multiple.
#pragma once

#include <cstdint>

namespace npusim {

// ceil(a / b) for b > 0.
constexpr std::uint64_t ceil_div(std::uint64_t a, std::uint64_t b) { return (a + b - 1) / b; }

// The smallest multiple of m that is at least v, for m > 0.
constexpr std::uint64_t ceil_to(std::uint64_t v, std::uint64_t m) { return ceil_div(v, m) * m; }

}  // namespace npusim
