#include "traces/histogram.hpp"

#include <algorithm>
#include <cmath>

namespace npusim::traces {

// Bucket 0 is [0, 1); bucket 1 + 16 e + m is [2^e (1 + m/16), 2^e (1 + (m+1)/16)) for e >= 0, m in 0..15.
std::size_t Histogram::bucket_of(double v) {
  if (!(v >= 1.0)) return 0;  // below 1, negative and NaN
  int exp = 0;
  const double frac = std::frexp(v, &exp);  // v = frac x 2^exp, frac in [0.5, 1)
  const auto m = static_cast<std::size_t>((frac * 2.0 - 1.0) * kBucketsPerOctave);
  return 1 + static_cast<std::size_t>(exp - 1) * kBucketsPerOctave + std::min<std::size_t>(m, kBucketsPerOctave - 1);
}

double Histogram::lower_edge(std::size_t bucket) {
  if (bucket == 0) return 0.0;
  const std::size_t e = (bucket - 1) / kBucketsPerOctave, m = (bucket - 1) % kBucketsPerOctave;
  return std::ldexp(1.0 + static_cast<double>(m) / kBucketsPerOctave, static_cast<int>(e));
}

double Histogram::upper_edge(std::size_t bucket) {
  if (bucket == 0) return 1.0;
  const std::size_t e = (bucket - 1) / kBucketsPerOctave, m = (bucket - 1) % kBucketsPerOctave;
  return std::ldexp(1.0 + static_cast<double>(m + 1) / kBucketsPerOctave, static_cast<int>(e));
}

void Histogram::sample(double v) {
  const std::size_t b = bucket_of(v);
  if (b >= counts_.size()) {
    counts_.resize(b + 1, 0);
    top_.resize(b + 1, 0.0);
  }
  top_[b] = counts_[b] ? std::max(top_[b], v) : v;
  ++counts_[b];
  ++count_;
  sum_ += v;
  min_ = std::min(min_, v);
  max_ = std::max(max_, v);
}

double Histogram::percentile(double p) const {
  if (count_ == 0) return 0.0;
  const auto rank = std::max<std::uint64_t>(
      1, std::min<std::uint64_t>(count_, static_cast<std::uint64_t>(std::ceil(p * static_cast<double>(count_)))));
  std::uint64_t seen = 0;
  for (std::size_t b = 0; b < counts_.size(); ++b) {
    seen += counts_[b];
    if (seen >= rank) return top_[b];
  }
  return max_;
}

std::vector<Histogram::Bucket> Histogram::buckets() const {
  std::vector<Bucket> out;
  for (std::size_t b = 0; b < counts_.size(); ++b)
    if (counts_[b]) out.push_back({upper_edge(b), counts_[b]});  // NOLINT(modernize-use-emplace): aggregate
  return out;
}

Histogram Histogram::since(const Histogram& earlier) const {
  if (earlier.count_ == 0) return *this;
  Histogram d;
  d.counts_ = counts_;
  for (std::size_t b = 0; b < earlier.counts_.size() && b < d.counts_.size(); ++b) d.counts_[b] -= earlier.counts_[b];
  d.count_ = count_ - earlier.count_;
  d.sum_ = sum_ - earlier.sum_;
  if (d.count_ == 0) return Histogram{};
  std::size_t lo = 0, hi = d.counts_.size() - 1;
  while (d.counts_[lo] == 0) ++lo;
  while (d.counts_[hi] == 0) --hi;
  d.top_ = top_;
  d.min_ = std::max(lower_edge(lo), min_);
  d.max_ = top_[hi];
  return d;
}

}  // namespace npusim::traces
