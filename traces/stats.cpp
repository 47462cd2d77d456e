#include "traces/stats.hpp"

#include <nlohmann/json.hpp>
#include <stdexcept>

namespace npusim::traces {

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

nlohmann::json StatsRegistry::to_json() const {
  nlohmann::json root = nlohmann::json::object();
  for (const auto& [path, entry] : entries_) {
    nlohmann::json value;
    if (auto* c = std::get_if<Counter*>(&entry.stat)) {
      value = (*c)->value;
    } else if (auto* s = std::get_if<Scalar*>(&entry.stat)) {
      value = (*s)->value;
    } else {
      const Distribution& d = *std::get<Distribution*>(entry.stat);
      value = {{"count", d.count}, {"sum", d.sum}, {"mean", d.mean()},
               {"min", d.count ? d.min : 0.0}, {"max", d.count ? d.max : 0.0}};
    }
    root[nlohmann::json::json_pointer("/" + [&] {
      std::string p = path;
      for (char& ch : p) ch = ch == '.' ? '/' : ch;
      return p;
    }())] = std::move(value);
  }
  return root;
}

nlohmann::json StatsRegistry::describe() const {
  nlohmann::json out = nlohmann::json::object();
  for (const auto& [path, entry] : entries_) out[path] = {{"unit", entry.unit}, {"doc", entry.doc}};
  return out;
}

}  // namespace npusim::traces
