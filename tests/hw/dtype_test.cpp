// Conversions between fp32, fp16, bf16 and integers, checked bit-exactly against two independent references:
// the compiler's IEEE binary16 (_Float16, round to nearest even) and a search over all finite fp16/bf16 values
// that picks the neighbour each rounding mode asks for.
#include "hw/isa/dtype.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

namespace npusim::hw::isa {
namespace {

constexpr Round kModes[] = {Round::kNearestEven, Round::kNearestAway, Round::kFloor, Round::kCeil,
                            Round::kTowardZero};

// All finite values of a 16-bit format with their encodings, sorted by value (-0 before +0).
struct Table {
  std::vector<std::pair<double, std::uint16_t>> values;
  template <typename Widen>
  explicit Table(Widen widen) {
    for (std::uint32_t b = 0; b < 0x10000u; ++b) {
      const float f = widen(static_cast<std::uint16_t>(b));
      if (std::isfinite(f)) values.emplace_back(static_cast<double>(f), static_cast<std::uint16_t>(b));
    }
    std::sort(values.begin(), values.end(), [](const auto& a, const auto& b) {
      if (a.first != b.first) return a.first < b.first;
      return (a.second & 0x8000u) > (b.second & 0x8000u);
    });
  }
  // The reference narrowing: neighbours below and above, then the rounding rule. `inf_bits` is the +inf encoding.
  std::uint16_t narrow(float f, Round mode, std::uint16_t inf_bits) const {
    const double v = f;
    const bool neg = std::signbit(f);
    const std::uint16_t sign = neg ? 0x8000u : 0;
    if (v == 0.0) return sign;
    const double max = values.back().first;
    auto enc = [&](double x) {
      auto it = std::lower_bound(values.begin(), values.end(), x,
                                 [](const auto& p, double y) { return p.first < y; });
      if (x == 0.0) return sign;  // keep the sign of a zero result
      return it->second;
    };
    if (std::fabs(v) > max) {
      // Beyond the largest finite value: rounding direction decides between max and infinity, except that nearest
      // rounding keeps max when v is below the midpoint to the next power (max + ulp/2).
      const double ulp = max - std::prev(values.end(), 2)->first;
      bool to_inf = false;
      switch (mode) {
        case Round::kNearestEven:
        case Round::kNearestAway: to_inf = std::fabs(v) >= max + ulp / 2; break;
        case Round::kFloor: to_inf = neg; break;
        case Round::kCeil: to_inf = !neg; break;
        case Round::kTowardZero: to_inf = false; break;
      }
      if (to_inf) return static_cast<std::uint16_t>(sign | inf_bits);
      return enc(neg ? -max : max);
    }
    auto hi_it = std::lower_bound(values.begin(), values.end(), v, [](const auto& p, double y) { return p.first < y; });
    const double hi = hi_it->first;
    if (hi == v) return enc(v);
    const double lo = std::prev(hi_it)->first;
    const double mid = lo + (hi - lo) / 2;
    double pick = 0;
    switch (mode) {
      case Round::kFloor: pick = lo; break;
      case Round::kCeil: pick = hi; break;
      case Round::kTowardZero: pick = neg ? hi : lo; break;
      case Round::kNearestAway:
        pick = v < mid ? lo : v > mid ? hi : (neg ? lo : hi);
        break;
      case Round::kNearestEven: {
        if (v != mid) {
          pick = v < mid ? lo : hi;
        } else {
          const std::uint16_t lo_bits = enc(lo);
          pick = (lo_bits & 1u) == 0 ? lo : hi;
        }
        break;
      }
    }
    return enc(pick);
  }
};

const Table& half_table() {
  static const Table t([](std::uint16_t b) { return to_float(Half{b}); });
  return t;
}
const Table& bf16_table() {
  static const Table t([](std::uint16_t b) { return to_float(BFloat16{b}); });
  return t;
}

// Floats around every 16-bit value: the value, the midpoints to its neighbours, and one float ulp either side.
std::vector<float> probes(const Table& t) {
  std::vector<float> out;
  for (std::size_t i = 0; i + 1 < t.values.size(); ++i) {
    const float a = static_cast<float>(t.values[i].first);
    const float mid = static_cast<float>((t.values[i].first + t.values[i + 1].first) / 2);
    for (float f : {a, mid, std::nextafter(mid, -INFINITY), std::nextafter(mid, INFINITY)}) out.push_back(f);
  }
  std::mt19937 rng(42);
  for (int i = 0; i < 200000; ++i) {
    const float f = bits_float(rng());
    if (std::isfinite(f)) out.push_back(f);
  }
  for (float f : {65504.0f, 65519.99f, 65520.0f, 1e10f, 3.4e38f, 1e-10f, 1e-45f, 5.9604645e-08f, 2.9802322e-08f,
                  2.9802326e-08f}) {
    out.push_back(f);
    out.push_back(-f);
  }
  return out;
}

TEST(DType, HalfWideningIsExactForAllEncodings) {
  for (std::uint32_t b = 0; b < 0x10000u; ++b) {
    _Float16 ref;
    const std::uint16_t bits = static_cast<std::uint16_t>(b);
    std::memcpy(&ref, &bits, 2);
    const float mine = to_float(Half{bits});
    if (std::isnan(static_cast<float>(ref))) {
      EXPECT_TRUE(std::isnan(mine)) << b;
    } else {
      EXPECT_EQ(float_bits(mine), float_bits(static_cast<float>(ref))) << std::hex << b;
    }
  }
}

TEST(DType, HalfNearestEvenMatchesTheCompiler) {
  for (float f : probes(half_table())) {
    const _Float16 ref = static_cast<_Float16>(f);
    std::uint16_t ref_bits;
    std::memcpy(&ref_bits, &ref, 2);
    ASSERT_EQ(to_half(f).bits, ref_bits) << "f=" << f << " bits=" << std::hex << float_bits(f);
  }
}

TEST(DType, HalfEveryRoundingModeMatchesTheReference) {
  const Table& t = half_table();
  for (float f : probes(t)) {
    for (Round m : kModes) {
      ASSERT_EQ(to_half(f, m).bits, t.narrow(f, m, 0x7c00u))
          << "f=" << f << " mode=" << static_cast<int>(m) << " bits=" << std::hex << float_bits(f);
    }
  }
}

TEST(DType, Bf16EveryRoundingModeMatchesTheReference) {
  const Table& t = bf16_table();
  std::mt19937 rng(7);
  std::vector<float> fs;
  for (int i = 0; i < 300000; ++i) {
    const float f = bits_float(rng());
    if (std::isfinite(f)) fs.push_back(f);
  }
  for (std::size_t i = 0; i + 1 < t.values.size(); i += 7) {
    fs.push_back(static_cast<float>((t.values[i].first + t.values[i + 1].first) / 2));
  }
  for (float f : fs) {
    for (Round m : kModes) {
      ASSERT_EQ(to_bf16(f, m).bits, t.narrow(f, m, 0x7f80u)) << "f=" << f << " mode=" << static_cast<int>(m);
    }
  }
}

TEST(DType, SpecialValues) {
  EXPECT_EQ(to_half(INFINITY).bits, 0x7c00u);
  EXPECT_EQ(to_half(-INFINITY).bits, 0xfc00u);
  EXPECT_TRUE(std::isnan(to_float(to_half(NAN))));
  EXPECT_TRUE(std::isnan(to_float(to_bf16(NAN))));
  EXPECT_EQ(to_half(-0.0f).bits, 0x8000u);
  EXPECT_EQ(to_half(1e6f, Round::kTowardZero).bits, 0x7bffu);  // overflow toward zero: largest finite
  EXPECT_EQ(to_bf16(1.0f).bits, 0x3f80u);
  EXPECT_EQ(dtype_bytes(DType::kFp16), 2u);
  EXPECT_EQ(dtype_name(DType::kBf16), "bf16");
}

TEST(DType, IntegerCastsRoundAndSaturate) {
  EXPECT_EQ(to_int32(2.5f, Round::kNearestEven), 2);
  EXPECT_EQ(to_int32(2.5f, Round::kNearestAway), 3);
  EXPECT_EQ(to_int32(-2.5f, Round::kNearestAway), -3);
  EXPECT_EQ(to_int32(-2.5f, Round::kFloor), -3);
  EXPECT_EQ(to_int32(-2.5f, Round::kCeil), -2);
  EXPECT_EQ(to_int32(-2.7f, Round::kTowardZero), -2);
  EXPECT_EQ(to_int32(3e9f, Round::kNearestEven), 2147483647);
  EXPECT_EQ(to_int32(-3e9f, Round::kNearestEven), -2147483647 - 1);
  EXPECT_EQ(to_int32(NAN, Round::kNearestEven), 0);
  EXPECT_EQ(to_int8(300.0f, Round::kNearestEven), 127);
  EXPECT_EQ(to_int8(-300.0f, Round::kNearestEven), -128);
  EXPECT_EQ(to_int8(-1.5f, Round::kNearestEven), -2);
}

}  // namespace
}  // namespace npusim::hw::isa
