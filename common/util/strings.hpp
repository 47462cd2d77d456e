// Small string helpers C++17's std::string lacks.
#pragma once

#include <string_view>

namespace npusim {

// Whether `s` ends with `suffix` (std::string::ends_with is C++20).
inline bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace npusim
