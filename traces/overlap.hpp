// Overlap of busy intervals: the measure behind the `overlap` --json key (docs/metrics.md).
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

namespace npusim::traces {

using Intervals = std::vector<std::pair<std::uint64_t, std::uint64_t>>;  // sorted, disjoint [start, end)

// Total length of the intersection of two sorted, disjoint interval lists.
std::uint64_t overlap_length(const Intervals& a, const Intervals& b);

// The union of several sorted, disjoint lists, itself sorted and disjoint.
Intervals union_of(const std::vector<const Intervals*>& lists);

// Total length of a sorted, disjoint list.
std::uint64_t total_length(const Intervals& a);

}  // namespace npusim::traces
