// Unit parsing: every spelling documented in units.hpp, and the errors for wrong or missing units.
#include "common/config/units.hpp"

#include <gtest/gtest.h>

#include <stdexcept>

namespace npusim::config {
namespace {

TEST(Units, Bytes) {
  EXPECT_EQ(parse_integer("512", Unit::kBytes), 512u);
  EXPECT_EQ(parse_integer("512B", Unit::kBytes), 512u);
  EXPECT_EQ(parse_integer("192KiB", Unit::kBytes), 192u * 1024);
  EXPECT_EQ(parse_integer("1MiB", Unit::kBytes), 1u << 20);
  EXPECT_EQ(parse_integer("64GiB", Unit::kBytes), 64ull << 30);
  EXPECT_EQ(parse_integer("1.5KiB", Unit::kBytes), 1536u);
  EXPECT_EQ(parse_integer("2KB", Unit::kBytes), 2000u);
  EXPECT_EQ(parse_integer(" 4 KiB ", Unit::kBytes), 4096u);
}

TEST(Units, Frequency) {
  EXPECT_DOUBLE_EQ(parse_real("1.8GHz", Unit::kFrequency), 1.8e9);
  EXPECT_DOUBLE_EQ(parse_real("800MHz", Unit::kFrequency), 8e8);
  EXPECT_THROW(parse_real("1.8", Unit::kFrequency), std::invalid_argument);  // unit required
  EXPECT_THROW(parse_real("1.8GB", Unit::kFrequency), std::invalid_argument);
}

TEST(Units, BandwidthAndBitRate) {
  EXPECT_DOUBLE_EQ(parse_real("1.6TB/s", Unit::kBandwidth), 1.6e12);
  EXPECT_DOUBLE_EQ(parse_real("64GB/s", Unit::kBandwidth), 64e9);
  EXPECT_DOUBLE_EQ(parse_real("1GiB/s", Unit::kBandwidth), 1073741824.0);
  EXPECT_DOUBLE_EQ(parse_real("3.2Gbps", Unit::kBitRate), 3.2e9);
  EXPECT_DOUBLE_EQ(parse_real("3.2Gb/s", Unit::kBitRate), 3.2e9);
  EXPECT_THROW(parse_real("3.2GB/s", Unit::kBitRate), std::invalid_argument);
}

TEST(Units, Time) {
  EXPECT_DOUBLE_EQ(parse_real("150ns", Unit::kTime), 150.0);
  EXPECT_DOUBLE_EQ(parse_real("1us", Unit::kTime), 1000.0);
  EXPECT_DOUBLE_EQ(parse_real("3.9us", Unit::kTime), 3900.0);
  EXPECT_DOUBLE_EQ(parse_real("500ps", Unit::kTime), 0.5);
  EXPECT_DOUBLE_EQ(parse_real("0", Unit::kTime), 0.0);  // zero needs no unit
  EXPECT_THROW(parse_real("150", Unit::kTime), std::invalid_argument);
}

TEST(Units, CyclesAndCounts) {
  EXPECT_EQ(parse_integer("50", Unit::kCycles), 50u);
  EXPECT_EQ(parse_integer("50cycles", Unit::kCycles), 50u);
  EXPECT_DOUBLE_EQ(parse_real("110B/cycle", Unit::kBytesPerCycle), 110.0);
  EXPECT_EQ(parse_integer("24", Unit::kCount), 24u);
  EXPECT_THROW(parse_integer("24KiB", Unit::kCount), std::invalid_argument);
  EXPECT_THROW(parse_integer("2.5", Unit::kCount), std::invalid_argument);  // not whole
  EXPECT_THROW(parse_integer("-1", Unit::kCount), std::invalid_argument);
}

TEST(Units, Garbage) {
  EXPECT_THROW(parse_real("", Unit::kBytes), std::invalid_argument);
  EXPECT_THROW(parse_real("fast", Unit::kFrequency), std::invalid_argument);
  EXPECT_THROW(parse_real("0x10", Unit::kBytes), std::invalid_argument);
  EXPECT_THROW(parse_real("inf", Unit::kNumber), std::invalid_argument);
  EXPECT_THROW(parse_real("12 parsecs", Unit::kTime), std::invalid_argument);
  EXPECT_THROW(parse_bool("maybe"), std::invalid_argument);
  EXPECT_TRUE(parse_bool("true"));
  EXPECT_FALSE(parse_bool("off"));
}

TEST(Units, ErrorMessageSaysWhatWasExpected) {
  try {
    parse_real("1.8", Unit::kFrequency);
    FAIL();
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("GHz"), std::string::npos) << e.what();
  }
}

TEST(Units, FormatRoundTrips) {
  EXPECT_EQ(format_value(192 * 1024, Unit::kBytes), "192KiB");
  EXPECT_EQ(format_value(64.0 * (1ull << 30), Unit::kBytes), "64GiB");
  EXPECT_EQ(format_value(1.8e9, Unit::kFrequency), "1.8GHz");
  EXPECT_EQ(format_value(150, Unit::kTime), "150ns");
  EXPECT_EQ(format_value(3900, Unit::kTime), "3.9us");
  for (const char* s : {"192KiB", "1.5KiB", "512B", "7KiB"}) {
    EXPECT_EQ(format_value(static_cast<double>(parse_integer(s, Unit::kBytes)), Unit::kBytes), s);
  }
}

}  // namespace
}  // namespace npusim::config
