// Hierarchical statistics: typed stats named by their place in the hierarchy ("chip.aiv3.mte2.bytes"), registered
// in one registry and dumped as nested JSON. A component either asks the registry for a stat it then updates through
// a reference, or registers a counter it keeps itself (a plain class that unit tests drive without a registry), as
// gem5's stat groups do; either way the hot path pays no lookup. Reports read values by path, and a snapshot of the
// counters lets a report count only what came after it.
#pragma once

#include <cstdint>
#include <deque>
#include <limits>
#include <map>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <variant>

#include "traces/histogram.hpp"

namespace npusim::traces {

struct Counter {
  std::uint64_t value = 0;
  void add(std::uint64_t n = 1) { value += n; }
};

struct Scalar {
  double value = 0;
  void set(double v) { value = v; }
};

// Count, sum, min and max of a sampled quantity (mean = sum / count).
struct Distribution {
  std::uint64_t count = 0;
  double sum = 0;
  double min = std::numeric_limits<double>::infinity();
  double max = -std::numeric_limits<double>::infinity();
  void sample(double v) {
    ++count;
    sum += v;
    if (v < min) min = v;
    if (v > max) max = v;
  }
  double mean() const { return count ? sum / static_cast<double>(count) : 0.0; }
};

// {"count", "mean", "p50", "p90", "p99", "max"}, and with `buckets` also "min" and "buckets": [[upper edge,
// count], ...] (the buckets with samples).
nlohmann::json histogram_json(const Histogram& h, bool buckets = true);
// {"reads": [[upper edge, count], ...], "writes": [...]}: the buckets with samples of two histograms.
nlohmann::json buckets_json(const Histogram& reads, const Histogram& writes);

class StatsRegistry;
// Writes {"config": config, "stats": the registry's values nested, "units": each path's unit and doc} to `path`;
// std::runtime_error naming the path when it cannot be written.
void write_stats_file(const std::string& path, const std::string& config, const StatsRegistry& reg);

class StatsRegistry {
 public:
  // Each registers a stat at a dotted path, with its unit and one line of doc. A path registered twice, or a path
  // that is both a stat and a group ("a.b" and "a.b.c"), throws std::logic_error. References stay valid for the
  // registry's lifetime.
  Counter& counter(const std::string& path, const std::string& unit, const std::string& doc);
  Scalar& scalar(const std::string& path, const std::string& unit, const std::string& doc);
  Distribution& distribution(const std::string& path, const std::string& unit, const std::string& doc);
  // A counter or an accumulated quantity the component owns; it must outlive every read of the registry.
  void bind(const std::string& path, const std::uint64_t& value, const std::string& unit, const std::string& doc);
  void bind(const std::string& path, const double& value, const std::string& unit, const std::string& doc);
  void bind(const std::string& path, const Histogram& value, const std::string& unit, const std::string& doc);

  bool has(const std::string& path) const { return entries_.count(path) != 0; }
  // The value of the counter (registered or bound) at `path`; std::out_of_range naming it when there is none.
  std::uint64_t count(const std::string& path) const;
  // The value of a scalar or bound double (or a counter, converted) at `path`.
  double real(const std::string& path) const;
  // The histogram bound at `path`; std::out_of_range naming it when there is none.
  const Histogram& histogram(const std::string& path) const;

  // Every counter's, scalar's and histogram's value at one moment (distributions are left out).
  class Snapshot {
   public:
    std::uint64_t count(const std::string& path) const;  // 0 for a path not registered then
    double real(const std::string& path) const;
    const Histogram& histogram(const std::string& path) const;  // empty for a path not registered then

   private:
    friend class StatsRegistry;
    std::map<std::string, std::uint64_t> counts_;
    std::map<std::string, double> reals_;
    std::map<std::string, Histogram> histograms_;
  };
  Snapshot snapshot() const;

  // {"chip": {"aiv3": {"mte2": {"bytes": 123}}}}; distributions as {"count","sum","mean","min","max"}; histograms
  // as histogram_json gives them.
  nlohmann::json to_json() const;
  // Every stat's path, unit and doc: {"chip.aiv3.mte2.bytes": {"unit": "bytes", "doc": "..."}}.
  nlohmann::json describe() const;
  std::size_t size() const { return entries_.size(); }

 private:
  using Stat = std::variant<Counter*, Scalar*, Distribution*, const std::uint64_t*, const double*, const Histogram*>;
  struct Entry {
    Stat stat;
    std::string unit;
    std::string doc;
  };
  const Entry& entry(const std::string& path) const;
  // A counter's (registered or bound) value, a scalar's or bound double's; null for the other kinds.
  static const std::uint64_t* counter_value(const Stat& stat);
  static const double* real_value(const Stat& stat);
  void add(const std::string& path, Stat stat, const std::string& unit, const std::string& doc);

  std::deque<Counter> counters_;
  std::deque<Scalar> scalars_;
  std::deque<Distribution> distributions_;
  std::map<std::string, Entry> entries_;
};

}  // namespace npusim::traces
