#include "traces/overlap.hpp"

#include <algorithm>

namespace npusim::traces {

std::uint64_t overlap_length(const Intervals& a, const Intervals& b) {
  std::uint64_t total = 0;
  std::size_t i = 0, j = 0;
  while (i < a.size() && j < b.size()) {
    const std::uint64_t lo = std::max(a[i].first, b[j].first), hi = std::min(a[i].second, b[j].second);
    if (lo < hi) total += hi - lo;
    if (a[i].second < b[j].second) ++i;
    else ++j;
  }
  return total;
}

}  // namespace npusim::traces
