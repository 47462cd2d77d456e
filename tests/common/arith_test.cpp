// The integer helpers of common/util/arith.hpp: rounding up, and narrowing that refuses a value the smaller type
// cannot hold instead of wrapping it.
#include "common/util/arith.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>

namespace npusim {
namespace {

TEST(Arith, CeilDivAndCeilToRoundUp) {
  EXPECT_EQ(ceil_div(0, 16), 0u);
  EXPECT_EQ(ceil_div(1, 16), 1u);
  EXPECT_EQ(ceil_div(16, 16), 1u);
  EXPECT_EQ(ceil_div(17, 16), 2u);
  EXPECT_EQ(ceil_to(17, 16), 32u);
  EXPECT_EQ(ceil_to(32, 16), 32u);
}

TEST(Arith, FitsComparesAcrossSignedness) {
  EXPECT_TRUE(fits<std::uint8_t>(255));
  EXPECT_FALSE(fits<std::uint8_t>(256));
  EXPECT_FALSE(fits<std::uint32_t>(-1));                     // a negative value is no unsigned value
  EXPECT_FALSE(fits<std::int32_t>(std::uint64_t{1} << 31));  // one past INT32_MAX
  EXPECT_TRUE(fits<std::int32_t>(std::int64_t{-2147483648LL}));
  EXPECT_FALSE(fits<std::int32_t>(std::int64_t{-2147483649LL}));
  EXPECT_TRUE(fits<std::uint64_t>(std::numeric_limits<std::int64_t>::max()));
  EXPECT_FALSE(fits<std::int64_t>(std::numeric_limits<std::uint64_t>::max()));
}

TEST(Arith, NarrowKeepsFittingValuesAndNamesTheOnesThatDoNot) {
  EXPECT_EQ(u16(std::uint64_t{65535}), 65535u);
  EXPECT_EQ(u8(200), 200u);
  EXPECT_EQ(narrow<std::int32_t>(std::uint64_t{12345}), 12345);
  try {
    u16(std::uint64_t{65536});  // static_cast would give 0
    FAIL() << "no error";
  } catch (const std::range_error& e) {
    EXPECT_EQ(std::string(e.what()), "the value 65536 does not fit in an unsigned 16-bit field");
  }
  try {
    narrow<std::int32_t>(std::int64_t{-3000000000LL});
    FAIL() << "no error";
  } catch (const std::range_error& e) {
    EXPECT_EQ(std::string(e.what()), "the value -3000000000 does not fit in a signed 32-bit field");
  }
  EXPECT_THROW(u32(std::uint64_t{1} << 32), std::range_error);
  EXPECT_THROW(u8(-1), std::range_error);
}

}  // namespace
}  // namespace npusim
