#include "common/config/units.hpp"

#include <array>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <stdexcept>
#include <utility>

namespace npusim::config {
namespace {

struct Suffix {
  std::string_view text;
  double factor;
};

// Suffix tables per unit kind. Matching is exact (case-sensitive) so "Mb" and "MB" cannot be confused.
constexpr std::array kByteSuffixes{
    Suffix{"B", 1.0},           Suffix{"KiB", 1024.0},      Suffix{"MiB", 1048576.0},
    Suffix{"GiB", 1073741824.0}, Suffix{"TiB", 1099511627776.0}, Suffix{"KB", 1e3},
    Suffix{"kB", 1e3},          Suffix{"MB", 1e6},          Suffix{"GB", 1e9},
    Suffix{"TB", 1e12},
};
constexpr std::array kFrequencySuffixes{
    Suffix{"Hz", 1.0}, Suffix{"kHz", 1e3}, Suffix{"KHz", 1e3}, Suffix{"MHz", 1e6}, Suffix{"GHz", 1e9},
};
constexpr std::array kBandwidthSuffixes{
    Suffix{"B/s", 1.0},           Suffix{"KB/s", 1e3},          Suffix{"kB/s", 1e3},
    Suffix{"MB/s", 1e6},          Suffix{"GB/s", 1e9},          Suffix{"TB/s", 1e12},
    Suffix{"KiB/s", 1024.0},      Suffix{"MiB/s", 1048576.0},   Suffix{"GiB/s", 1073741824.0},
    Suffix{"TiB/s", 1099511627776.0},
};
constexpr std::array kBitRateSuffixes{
    Suffix{"bps", 1.0},  Suffix{"Kbps", 1e3}, Suffix{"Mbps", 1e6}, Suffix{"Gbps", 1e9},
    Suffix{"b/s", 1.0},  Suffix{"Kb/s", 1e3}, Suffix{"Mb/s", 1e6}, Suffix{"Gb/s", 1e9},
};
constexpr std::array kTimeSuffixes{
    Suffix{"ps", 1e-3}, Suffix{"ns", 1.0}, Suffix{"us", 1e3}, Suffix{"ms", 1e6}, Suffix{"s", 1e9},
};
constexpr std::array kCycleSuffixes{Suffix{"cycles", 1.0}, Suffix{"cycle", 1.0}};
constexpr std::array kBytesPerCycleSuffixes{Suffix{"B/cycle", 1.0}};

template <std::size_t N>
std::string suffix_list(const std::array<Suffix, N>& table) {
  std::string out;
  for (const auto& s : table) {
    if (!out.empty()) out += ", ";
    out += s.text;
  }
  return out;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

// Splits "1.8 GHz" into its number and its suffix; throws when there is no number.
std::pair<double, std::string_view> split_number(std::string_view text) {
  text = trim(text);
  std::string buf(text);
  const char* begin = buf.c_str();
  char* end = nullptr;
  errno = 0;
  double v = std::strtod(begin, &end);
  if (end == begin || buf.empty() || !std::isfinite(v) || errno == ERANGE) {
    throw std::invalid_argument("'" + buf + "' is not a number");
  }
  // strtod accepts hex floats and "inf"; only plain decimal notation is meaningful here.
  for (const char* p = begin; p != end; ++p) {
    if (std::isalpha(static_cast<unsigned char>(*p)) && *p != 'e' && *p != 'E') {
      throw std::invalid_argument("'" + buf + "' is not a decimal number");
    }
  }
  std::string_view suffix = trim(text.substr(static_cast<std::size_t>(end - begin)));
  return {v, suffix};
}

template <std::size_t N>
double apply_suffix(double number, std::string_view suffix, const std::array<Suffix, N>& table, bool required,
                    Unit unit, std::string_view original) {
  if (suffix.empty()) {
    if (required && number != 0.0) {
      throw std::invalid_argument("'" + std::string(original) + "' needs a unit (one of " + suffix_list(table) +
                                  "), e.g. " + std::string(unit_example(unit)));
    }
    return number;
  }
  for (const auto& s : table) {
    if (s.text == suffix) return number * s.factor;
  }
  throw std::invalid_argument("unknown unit '" + std::string(suffix) + "' in '" + std::string(original) +
                              "'; expected one of " + suffix_list(table));
}

}  // namespace

std::string_view unit_name(Unit unit) {
  switch (unit) {
    case Unit::kCount: return "count";
    case Unit::kNumber: return "number";
    case Unit::kBytes: return "bytes";
    case Unit::kCycles: return "cycles";
    case Unit::kBytesPerCycle: return "B/cycle";
    case Unit::kFrequency: return "Hz";
    case Unit::kBandwidth: return "B/s";
    case Unit::kBitRate: return "bit/s";
    case Unit::kTime: return "ns";
  }
  return "?";
}

std::string_view unit_example(Unit unit) {
  switch (unit) {
    case Unit::kCount: return "4";
    case Unit::kNumber: return "0.5";
    case Unit::kBytes: return "192KiB";
    case Unit::kCycles: return "50";
    case Unit::kBytesPerCycle: return "64";
    case Unit::kFrequency: return "1.8GHz";
    case Unit::kBandwidth: return "1.6TB/s";
    case Unit::kBitRate: return "3.2Gbps";
    case Unit::kTime: return "150ns";
  }
  return "?";
}

bool unit_is_integer(Unit unit) {
  return unit == Unit::kCount || unit == Unit::kBytes || unit == Unit::kCycles;
}

double parse_real(std::string_view text, Unit unit) {
  auto [number, suffix] = split_number(text);
  double value = 0.0;
  switch (unit) {
    case Unit::kCount:
    case Unit::kNumber:
      if (!suffix.empty()) {
        throw std::invalid_argument("'" + std::string(trim(text)) + "' must be a plain number without a unit");
      }
      value = number;
      break;
    case Unit::kBytes: value = apply_suffix(number, suffix, kByteSuffixes, false, unit, text); break;
    case Unit::kCycles: value = apply_suffix(number, suffix, kCycleSuffixes, false, unit, text); break;
    case Unit::kBytesPerCycle:
      value = apply_suffix(number, suffix, kBytesPerCycleSuffixes, false, unit, text);
      break;
    case Unit::kFrequency: value = apply_suffix(number, suffix, kFrequencySuffixes, true, unit, text); break;
    case Unit::kBandwidth: value = apply_suffix(number, suffix, kBandwidthSuffixes, true, unit, text); break;
    case Unit::kBitRate: value = apply_suffix(number, suffix, kBitRateSuffixes, true, unit, text); break;
    case Unit::kTime: value = apply_suffix(number, suffix, kTimeSuffixes, true, unit, text); break;
  }
  if (value < 0.0) throw std::invalid_argument("'" + std::string(trim(text)) + "' must not be negative");
  return value;
}

std::uint64_t parse_integer(std::string_view text, Unit unit) {
  double v = parse_real(text, unit);
  if (v != std::floor(v)) {
    throw std::invalid_argument("'" + std::string(trim(text)) + "' must be a whole number of " +
                                std::string(unit_name(unit)));
  }
  if (v > 9.0e18) throw std::invalid_argument("'" + std::string(trim(text)) + "' is too large");
  return static_cast<std::uint64_t>(v);
}

bool parse_bool(std::string_view text) {
  std::string_view t = trim(text);
  if (t == "true" || t == "yes" || t == "on" || t == "1") return true;
  if (t == "false" || t == "no" || t == "off" || t == "0") return false;
  throw std::invalid_argument("'" + std::string(t) + "' is not a boolean (true/false)");
}

namespace {
std::string compact(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.10g", v);
  return buf;
}

template <std::size_t N>
std::string largest_exact(double value, const std::array<Suffix, N>& table) {
  // Picks the largest suffix that prints the value in at most 4 significant digits.
  const Suffix* best = &table[0];
  for (const auto& s : table) {
    double scaled = value / s.factor;
    if (scaled >= 1.0 && s.factor > best->factor) {
      double r = std::round(scaled * 1000.0) / 1000.0;
      if (std::fabs(r - scaled) < 1e-9 * scaled) best = &s;
    }
  }
  return compact(value / best->factor) + std::string(best->text);
}
}  // namespace

std::string format_value(double value, Unit unit) {
  switch (unit) {
    case Unit::kCount:
    case Unit::kNumber:
    case Unit::kCycles:
    case Unit::kBytesPerCycle: return compact(value);
    case Unit::kBytes: {
      constexpr std::array binary{Suffix{"B", 1.0}, Suffix{"KiB", 1024.0}, Suffix{"MiB", 1048576.0},
                                  Suffix{"GiB", 1073741824.0}, Suffix{"TiB", 1099511627776.0}};
      return value == 0 ? "0" : largest_exact(value, binary);
    }
    case Unit::kFrequency: return value == 0 ? "0" : largest_exact(value, kFrequencySuffixes);
    case Unit::kBandwidth: {
      constexpr std::array dec{Suffix{"B/s", 1.0}, Suffix{"KB/s", 1e3}, Suffix{"MB/s", 1e6},
                               Suffix{"GB/s", 1e9}, Suffix{"TB/s", 1e12}};
      return value == 0 ? "0" : largest_exact(value, dec);
    }
    case Unit::kBitRate: {
      constexpr std::array dec{Suffix{"bps", 1.0}, Suffix{"Kbps", 1e3}, Suffix{"Mbps", 1e6},
                               Suffix{"Gbps", 1e9}};
      return value == 0 ? "0" : largest_exact(value, dec);
    }
    case Unit::kTime: {
      constexpr std::array t{Suffix{"ps", 1e-3}, Suffix{"ns", 1.0}, Suffix{"us", 1e3}, Suffix{"ms", 1e6}};
      return value == 0 ? "0" : largest_exact(value, t);
    }
  }
  return compact(value);
}

}  // namespace npusim::config
