// Physical units of config values and their parsing.
//
// Every value is stored in one base unit per kind, so the rest of the simulator never converts:
//   bytes           -> bytes (integer)       "192KiB", "1MiB", "512B", "512"
//   frequency       -> Hz (double)           "1.8GHz", "800MHz"              (suffix required)
//   bandwidth       -> bytes per second      "1.6TB/s", "64GB/s", "25.6GiB/s" (suffix required)
//   bit rate        -> bits per second       "3.2Gbps", "3.2Gb/s"             (suffix required)
//   time            -> nanoseconds (double)  "150ns", "1us", "3.9us", "0"      (suffix required unless 0)
//   cycles          -> cycles (integer)      "50", "50cycles"
//   bytes per cycle -> B/cycle (double)      "110", "110B/cycle"
//   count, number   -> plain integer / plain real
// Decimal prefixes (K, M, G, T) are powers of 1000, binary ones (Ki, Mi, Gi, Ti) powers of 1024.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace npusim::config {

enum class Unit {
  kCount,          // integer, no unit
  kNumber,         // real, no unit
  kBytes,          // integer bytes
  kCycles,         // integer cycles of the clock the key belongs to
  kBytesPerCycle,  // real
  kFrequency,      // Hz
  kBandwidth,      // B/s
  kBitRate,        // bit/s
  kTime,           // ns
};

// Short name used in documentation ("bytes", "Hz", ...).
std::string_view unit_name(Unit unit);
// Example spelling for documentation and error messages ("192KiB", "1.8GHz", ...).
std::string_view unit_example(Unit unit);
// True for the kinds stored as integers.
bool unit_is_integer(Unit unit);

// Parses text in the given unit into its base unit. Throws std::invalid_argument with a message saying what was
// expected (the caller adds file, line and key).
double parse_real(std::string_view text, Unit unit);
std::uint64_t parse_integer(std::string_view text, Unit unit);
bool parse_bool(std::string_view text);

// Formats a base-unit value the way a user would write it ("192KiB", "1.8GHz", "150ns").
std::string format_value(double value, Unit unit);

}  // namespace npusim::config
