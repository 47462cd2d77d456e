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

Intervals union_of(const std::vector<const Intervals*>& lists) {
  Intervals all;
  for (const Intervals* l : lists) all.insert(all.end(), l->begin(), l->end());
  std::sort(all.begin(), all.end());
  Intervals out;
  for (const auto& iv : all) {
    if (!out.empty() && iv.first <= out.back().second) out.back().second = std::max(out.back().second, iv.second);
    else out.push_back(iv);
  }
  return out;
}

std::uint64_t total_length(const Intervals& a) {
  std::uint64_t total = 0;
  for (const auto& iv : a) total += iv.second - iv.first;
  return total;
}

}  // namespace npusim::traces
