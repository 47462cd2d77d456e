// A stable fingerprint of text: 64-bit FNV-1a, the same on every machine and build (std::hash is not), for names
// that outlive a process (a sweep's config and workload hashes).
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>

namespace npusim {

inline std::uint64_t fnv1a(std::string_view text) {
  std::uint64_t h = 14695981039346656037ull;
  for (unsigned char c : text) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

// The same as 16 hex digits.
inline std::string fnv1a_hex(std::string_view text) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(fnv1a(text)));
  return buf;
}

}  // namespace npusim
