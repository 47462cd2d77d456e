// A log-linear histogram of a non-negative quantity (a latency): 16 buckets per power of two, so a bucket spans at
// most 1/16 of its lower edge (6.25 %), and [0, 1) is one bucket. It keeps the exact count, sum, min and max
// beside the buckets, and the largest sample of each bucket. A percentile is the largest sample of the bucket
// holding that rank: never below the exact value, at most 6.25 % above it, and exact when the bucket holds one
// value (as DRAM latencies, a few discrete sums of timings, mostly do). Two histograms subtract bucket by bucket,
// so a report can cover only what came after a snapshot.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <vector>

namespace npusim::traces {

class Histogram {
 public:
  static constexpr int kBucketsPerOctave = 16;

  void sample(double v);

  std::uint64_t count() const { return count_; }
  double sum() const { return sum_; }
  double mean() const { return count_ ? sum_ / static_cast<double>(count_) : 0.0; }
  double min() const { return count_ ? min_ : 0.0; }
  double max() const { return count_ ? max_ : 0.0; }
  // The value below which a fraction p (0 < p <= 1) of the samples lie, as above; 0 when empty.
  double percentile(double p) const;
  // Buckets with samples, in order: each one's upper edge and count.
  struct Bucket {
    double upper;
    std::uint64_t count;
  };
  std::vector<Bucket> buckets() const;

  // What was sampled after `earlier` (a copy of this histogram taken before): counts, sum and buckets subtract.
  // When `earlier` was not empty, a bucket's largest sample (and so percentiles and max) is over both, and min is
  // the lower edge of the first bucket with samples, at least the overall min.
  Histogram since(const Histogram& earlier) const;

  static std::size_t bucket_of(double v);
  static double lower_edge(std::size_t bucket);
  static double upper_edge(std::size_t bucket);

 private:
  std::vector<std::uint64_t> counts_;  // by bucket; grows to the highest bucket sampled
  std::vector<double> top_;            // the largest sample of each bucket
  std::uint64_t count_ = 0;
  double sum_ = 0;
  double min_ = std::numeric_limits<double>::infinity();
  double max_ = -std::numeric_limits<double>::infinity();
};

}  // namespace npusim::traces
