#include "traces/stats.hpp"

#include "common/util/atomic_file.hpp"

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>
#include <stdexcept>

namespace npusim::traces {

namespace {
nlohmann::json bucket_list(const Histogram& h) {
  nlohmann::json list = nlohmann::json::array();
  for (const Histogram::Bucket& b : h.buckets()) list.push_back({b.upper, b.count});
  return list;
}
}  // namespace

nlohmann::json buckets_json(const Histogram& reads, const Histogram& writes) {
  return {{"reads", bucket_list(reads)}, {"writes", bucket_list(writes)}};
}

nlohmann::json histogram_json(const Histogram& h, bool buckets) {
  nlohmann::json j = {{"count", h.count()},       {"mean", h.mean()},          {"p50", h.percentile(0.5)},
                      {"p90", h.percentile(0.9)}, {"p99", h.percentile(0.99)}, {"max", h.max()}};
  if (!buckets) return j;
  j["min"] = h.min();
  j["buckets"] = bucket_list(h);
  return j;
}

void StatsRegistry::add(const std::string& path, Stat stat, const std::string& unit, const std::string& doc) {
  if (path.empty() || path.front() == '.' || path.back() == '.' || path.find("..") != std::string::npos) {
    throw std::logic_error("invalid stat path '" + path + "'");
  }
  if (entries_.count(path)) throw std::logic_error("stat '" + path + "' registered twice");
  // A stat may not also be a group: check the neighbours in sorted order.
  auto next = entries_.lower_bound(path + ".");
  if (next != entries_.end() && next->first.compare(0, path.size() + 1, path + ".") == 0) {
    throw std::logic_error("stat '" + path + "' is already a group (of '" + next->first + "')");
  }
  for (auto dot = path.find('.'); dot != std::string::npos; dot = path.find('.', dot + 1)) {
    if (entries_.count(path.substr(0, dot))) {
      throw std::logic_error("stat '" + path + "' would be inside the stat '" + path.substr(0, dot) + "'");
    }
  }
  entries_.emplace(path, Entry{stat, unit, doc});
}

Counter& StatsRegistry::counter(const std::string& path, const std::string& unit, const std::string& doc) {
  Counter& c = counters_.emplace_back();
  add(path, &c, unit, doc);
  return c;
}

Scalar& StatsRegistry::scalar(const std::string& path, const std::string& unit, const std::string& doc) {
  Scalar& s = scalars_.emplace_back();
  add(path, &s, unit, doc);
  return s;
}

Distribution& StatsRegistry::distribution(const std::string& path, const std::string& unit, const std::string& doc) {
  Distribution& d = distributions_.emplace_back();
  add(path, &d, unit, doc);
  return d;
}

void StatsRegistry::bind(const std::string& path, const std::uint64_t& value, const std::string& unit,
                         const std::string& doc) {
  add(path, &value, unit, doc);
}

void StatsRegistry::bind(const std::string& path, const double& value, const std::string& unit,
                         const std::string& doc) {
  add(path, &value, unit, doc);
}

void StatsRegistry::bind(const std::string& path, const Histogram& value, const std::string& unit,
                         const std::string& doc) {
  add(path, &value, unit, doc);
}

const Histogram& StatsRegistry::histogram(const std::string& path) const {
  if (auto* h = std::get_if<const Histogram*>(&entry(path).stat)) return **h;
  throw std::out_of_range("stat '" + path + "' is not a histogram");
}

const std::uint64_t* StatsRegistry::counter_value(const Stat& stat) {
  if (auto* c = std::get_if<Counter*>(&stat)) return &(*c)->value;
  if (auto* b = std::get_if<const std::uint64_t*>(&stat)) return *b;
  return nullptr;
}

const double* StatsRegistry::real_value(const Stat& stat) {
  if (auto* s = std::get_if<Scalar*>(&stat)) return &(*s)->value;
  if (auto* b = std::get_if<const double*>(&stat)) return *b;
  return nullptr;
}

const StatsRegistry::Entry& StatsRegistry::entry(const std::string& path) const {
  auto it = entries_.find(path);
  if (it == entries_.end()) throw std::out_of_range("no stat '" + path + "' is registered");
  return it->second;
}

std::uint64_t StatsRegistry::count(const std::string& path) const {
  if (const std::uint64_t* v = counter_value(entry(path).stat)) return *v;
  throw std::out_of_range("stat '" + path + "' is not a counter");
}

double StatsRegistry::real(const std::string& path) const {
  const Stat& stat = entry(path).stat;
  if (const double* v = real_value(stat)) return *v;
  if (const std::uint64_t* v = counter_value(stat)) return static_cast<double>(*v);
  throw std::out_of_range("stat '" + path + "' is a distribution, not a value");
}

StatsRegistry::Snapshot StatsRegistry::snapshot() const {
  Snapshot s;
  for (const auto& [path, entry] : entries_) {
    if (const std::uint64_t* v = counter_value(entry.stat)) s.counts_.emplace(path, *v);
    if (const double* v = real_value(entry.stat)) s.reals_.emplace(path, *v);
    if (auto* h = std::get_if<const Histogram*>(&entry.stat)) s.histograms_.emplace(path, **h);
  }
  return s;
}

std::uint64_t StatsRegistry::Snapshot::count(const std::string& path) const {
  auto it = counts_.find(path);
  return it == counts_.end() ? 0 : it->second;
}

const Histogram& StatsRegistry::Snapshot::histogram(const std::string& path) const {
  static const Histogram none;
  auto it = histograms_.find(path);
  return it == histograms_.end() ? none : it->second;
}

double StatsRegistry::Snapshot::real(const std::string& path) const {
  auto it = reals_.find(path);
  if (it != reals_.end()) return it->second;
  return static_cast<double>(count(path));
}

nlohmann::json StatsRegistry::to_json() const {
  nlohmann::json root = nlohmann::json::object();
  for (const auto& [path, entry] : entries_) {
    nlohmann::json value;
    if (const std::uint64_t* c = counter_value(entry.stat)) {
      value = *c;
    } else if (const double* s = real_value(entry.stat)) {
      value = *s;
    } else if (auto* h = std::get_if<const Histogram*>(&entry.stat)) {
      value = histogram_json(**h);
    } else {
      const Distribution& d = *std::get<Distribution*>(entry.stat);
      value = {{"count", d.count}, {"sum", d.sum}, {"mean", d.mean()},
               {"min", d.count ? d.min : 0.0}, {"max", d.count ? d.max : 0.0}};
    }
    std::string pointer = "/" + path;
    std::replace(pointer.begin(), pointer.end(), '.', '/');
    root[nlohmann::json::json_pointer(pointer)] = std::move(value);
  }
  return root;
}

void write_stats_file(const std::string& path, const std::string& config, const StatsRegistry& reg) {
  const nlohmann::json j = {{"config", config}, {"stats", reg.to_json()}, {"units", reg.describe()}};
  write_file_atomically(path, j.dump(1) + "\n");
}

nlohmann::json StatsRegistry::describe() const {
  nlohmann::json out = nlohmann::json::object();
  for (const auto& [path, entry] : entries_) out[path] = {{"unit", entry.unit}, {"doc", entry.doc}};
  return out;
}

}  // namespace npusim::traces
