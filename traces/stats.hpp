// Hierarchical statistics: typed stats named by their place in the hierarchy ("chip.aiv3.mte2.bytes"), owned by
// one registry and dumped as nested JSON. Components keep a reference to their stat and update it directly, so the
// hot path pays no lookup.
#pragma once

#include <cstdint>
#include <deque>
#include <limits>
#include <map>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <variant>

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

class StatsRegistry {
 public:
  // Each registers a stat at a dotted path, with its unit and one line of doc. A path registered twice, or a path
  // that is both a stat and a group ("a.b" and "a.b.c"), throws std::logic_error. References stay valid for the
  // registry's lifetime.
  Counter& counter(const std::string& path, const std::string& unit, const std::string& doc);
  Scalar& scalar(const std::string& path, const std::string& unit, const std::string& doc);
  Distribution& distribution(const std::string& path, const std::string& unit, const std::string& doc);

  // {"chip": {"aiv3": {"mte2": {"bytes": 123}}}}; distributions as {"count","sum","mean","min","max"}.
  nlohmann::json to_json() const;
  // Every stat's path, unit and doc: {"chip.aiv3.mte2.bytes": {"unit": "bytes", "doc": "..."}}.
  nlohmann::json describe() const;
  std::size_t size() const { return entries_.size(); }

 private:
  using Stat = std::variant<Counter*, Scalar*, Distribution*>;
  struct Entry {
    Stat stat;
    std::string unit;
    std::string doc;
  };
  void add(const std::string& path, Stat stat, const std::string& unit, const std::string& doc);

  std::deque<Counter> counters_;
  std::deque<Scalar> scalars_;
  std::deque<Distribution> distributions_;
  std::map<std::string, Entry> entries_;
};

}  // namespace npusim::traces
