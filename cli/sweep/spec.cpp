#include "cli/sweep/spec.hpp"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <random>
#include <memory>
#include <set>

#include "cli/info_command.hpp"
#include "cli/sweep/expr.hpp"
#include "common/config/chip_config.hpp"
#include "common/config/loader.hpp"
#include "common/config/units.hpp"
#include "common/util/error.hpp"
#include "common/util/file.hpp"
#include "common/util/hash.hpp"

namespace npusim::cli::sweep {

namespace fs = std::filesystem;

std::string Point::key() const {
  if (!config_hash.empty()) return config_hash;
  std::string all;
  for (const auto& s : sets) all += s + "\n";
  return "invalid-" + fnv1a_hex(all);
}

namespace {

// Errors name the spec file and the line of the node they are about.
class Reader {
 public:
  explicit Reader(std::string path) : path_(std::move(path)) {}

  [[noreturn]] void fail(const YAML::Node& at, const std::string& what) const {
    const int line = at.Mark().line >= 0 ? at.Mark().line + 1 : 1;
    throw InputError(path_ + ":" + std::to_string(line) + ": " + what);
  }
  std::string scalar(const YAML::Node& n, const std::string& what) const {
    if (!n.IsScalar()) fail(n, what + " must be a single value");
    return n.Scalar();
  }
  // Nodes are returned by value (a handle): callers pass temporaries such as root["workloads"].
  YAML::Node map(const YAML::Node& n, const std::string& what) const {
    if (!n.IsMap()) fail(n, what + " must be a mapping (key: value)");
    return n;
  }
  YAML::Node list(const YAML::Node& n, const std::string& what) const {
    if (!n.IsSequence()) fail(n, what + " must be a list ([a, b, ...])");
    return n;
  }
  // Refuses keys a section does not know (a typo would otherwise be silently ignored).
  void known_keys(const YAML::Node& n, const std::string& what, std::initializer_list<const char*> keys) const {
    for (const auto& kv : n) {
      const YAML::Node k = kv.first;
      const std::string name = k.Scalar();
      if (std::none_of(keys.begin(), keys.end(), [&](const char* s) { return name == s; })) {
        std::string list;
        for (const char* s : keys) list += (list.empty() ? "" : ", ") + std::string(s);
        fail(k, what + ": unknown key '" + name + "' (known: " + list + ")");
      }
    }
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// The schema's keys with their units, for checking axis and derived keys and reading random ranges.
const std::map<std::string, config::KeyInfo>& schema_keys() {
  static const std::map<std::string, config::KeyInfo> keys = [] {
    std::map<std::string, config::KeyInfo> m;
    for (auto& k : config::describe_schema()) m.emplace(k.key, k);
    return m;
  }();
  return keys;
}

const config::KeyInfo& config_key(const Reader& r, const YAML::Node& at, const std::string& key) {
  const auto& keys = schema_keys();
  const auto it = keys.find(key);
  if (it == keys.end()) r.fail(at, "'" + key + "' is not a config key (npusim info lists them; docs/config.md)");
  return it->second;
}

// One factor of the design space: a list of rows, each a list of (key, value) assignments. Points are the
// cartesian product of the factors.
using Assignment = std::vector<std::pair<std::string, std::string>>;
constexpr double kMaxPoints = 1e6;  // a sweep's points at most (each a process per workload)
using Factor = std::vector<Assignment>;

// An axis of a grid or zip section: a config key and its non-empty list of values, as written.
struct Axis {
  std::string key;
  YAML::Node at;  // the list, for messages
  std::vector<std::string> values;
};

std::vector<Axis> read_axes(const Reader& r, const YAML::Node& section, const std::string& where) {
  r.map(section, where);
  std::vector<Axis> axes;
  for (const auto& kv : section) {
    const YAML::Node k = kv.first;
    Axis a{k.Scalar(), kv.second, {}};
    config_key(r, k, a.key);
    for (const auto& value : r.list(a.at, where + "." + a.key)) a.values.push_back(r.scalar(value, "a value of " + where + "." + a.key));
    if (a.values.empty()) r.fail(a.at, where + "." + a.key + " has no values");
    axes.push_back(std::move(a));
  }
  if (axes.empty()) r.fail(section, where + " has no axes");
  return axes;
}

Factor read_grid(const Reader& r, const YAML::Node& grid, std::vector<std::string>& keys) {
  const std::vector<Axis> axes = read_axes(r, grid, "axes.grid");
  double points = 1;  // counted before anything is built
  for (const Axis& axis : axes) points *= static_cast<double>(axis.values.size());
  if (points > kMaxPoints) r.fail(grid, "axes.grid gives more than 1,000,000 points");
  Factor rows{Assignment{}};
  for (const Axis& axis : axes) {
    keys.push_back(axis.key);
    Factor next;
    for (const Assignment& row : rows) {
      for (const std::string& value : axis.values) {
        Assignment a = row;
        a.emplace_back(axis.key, value);
        next.push_back(std::move(a));
      }
    }
    rows = std::move(next);
  }
  return rows;
}

Factor read_zip(const Reader& r, const YAML::Node& zip, std::vector<std::string>& keys) {
  const std::vector<Axis> axes = read_axes(r, zip, "axes.zip");
  Factor rows(axes.empty() ? 0 : axes.front().values.size());
  for (const Axis& axis : axes) {
    if (axis.values.size() != rows.size())
      r.fail(axis.at, "axes.zip." + axis.key + " has " + std::to_string(axis.values.size()) + " values but " +
                          axes.front().key + " has " + std::to_string(rows.size()) + ": zipped axes must have the same length");
    keys.push_back(axis.key);
    for (std::size_t i = 0; i < rows.size(); ++i) rows[i].emplace_back(axis.key, axis.values[i]);
  }
  return rows;
}

// A uniform double in [0, 1) from 53 bits of the generator: the same on every standard library (unlike
// std::uniform_real_distribution), so a seed gives the same points on every machine.
double unit_uniform(std::mt19937_64& rng) { return static_cast<double>(rng() >> 11) * 0x1.0p-53; }

Factor read_random(const Reader& r, const YAML::Node& random, std::vector<std::string>& keys) {
  r.map(random, "axes.random");
  r.known_keys(random, "axes.random", {"seed", "count", "keys"});
  if (!random["count"]) r.fail(random, "axes.random needs a count (how many points to draw)");
  if (!random["keys"]) r.fail(random, "axes.random needs keys (the config keys to draw, each with min/max or choices)");
  std::uint64_t seed = 0, count = 0;
  try {
    seed = random["seed"] ? random["seed"].as<std::uint64_t>() : 0;
  } catch (const YAML::Exception&) {
    r.fail(random["seed"], "axes.random.seed must be a non-negative integer");
  }
  try {
    count = random["count"].as<std::uint64_t>();
  } catch (const YAML::Exception&) {
    r.fail(random["count"], "axes.random.count must be a positive integer");
  }
  if (count == 0 || count > 100000) r.fail(random["count"], "axes.random.count must be in [1, 100000]");

  struct Draw {
    std::string key;
    config::KeyInfo info;
    std::vector<std::string> choices;
    double min = 0, max = 0;
    bool log = false;
  };
  std::vector<Draw> draws;
  const YAML::Node ks = r.map(random["keys"], "axes.random.keys");
  for (const auto& kv : ks) {
    const YAML::Node k = kv.first;
    const YAML::Node v = kv.second;
    Draw d;
    d.key = k.Scalar();
    d.info = config_key(r, k, d.key);
    const std::string where = "axes.random.keys." + d.key;
    r.map(v, where);
    r.known_keys(v, where, {"min", "max", "log", "choices"});
    if (v["choices"]) {
      for (const auto& c : r.list(v["choices"], where + ".choices")) d.choices.push_back(r.scalar(c, where + ".choices"));
      if (d.choices.empty()) r.fail(v, where + ".choices is empty");
    } else {
      if (!v["min"] || !v["max"]) r.fail(v, where + " needs min and max (or choices)");
      if (d.info.type != "integer" && d.info.type != "real")
        r.fail(v, where + ": a " + d.info.type + " key takes choices, not min/max");
      auto number = [&](const YAML::Node& n, const char* what) {
        try {
          return config::parse_real(r.scalar(n, where + "." + what), d.info.unit);
        } catch (const std::invalid_argument& e) {
          r.fail(n, where + "." + what + ": " + e.what());
        }
      };
      d.min = number(v["min"], "min");
      d.max = number(v["max"], "max");
      if (!(d.min <= d.max)) r.fail(v, where + ": min is above max");
      try {
        d.log = v["log"] && config::parse_bool(r.scalar(v["log"], where + ".log"));
      } catch (const std::invalid_argument& e) {
        r.fail(v["log"], where + ".log: " + e.what());
      }
      if (d.log && d.min <= 0) r.fail(v, where + ": log needs a positive min");
    }
    keys.push_back(d.key);
    draws.push_back(std::move(d));
  }

  std::mt19937_64 rng(seed);
  Factor rows(count);
  for (Assignment& row : rows) {
    for (const Draw& d : draws) {
      const double u = unit_uniform(rng);
      if (!d.choices.empty()) {
        row.emplace_back(d.key, d.choices[std::min(d.choices.size() - 1, static_cast<std::size_t>(u * d.choices.size()))]);
        continue;
      }
      // Integers are drawn from [min, max] inclusive: floor of a uniform value over [min, max + 1).
      const bool integer = d.info.type == "integer";
      double x = d.min + u * (d.max - d.min + (integer ? 1 : 0));
      // Log-uniform; an integer key over [min, max + 1) so that max can be drawn as well.
      if (d.log) x = std::exp(std::log(d.min) + u * (std::log(d.max + (integer ? 1 : 0)) - std::log(d.min)));
      if (integer) x = std::clamp(std::floor(x), d.min, d.max);
      // Reals keep 6 significant digits: readable values, still a continuous draw for exploration.
      else if (x != 0) x = std::clamp(std::round(x / std::pow(10, std::floor(std::log10(std::fabs(x))) - 5)) *
                                          std::pow(10, std::floor(std::log10(std::fabs(x))) - 5), d.min, d.max);
      row.emplace_back(d.key, config::exact_value_text(x, d.info.unit));
    }
  }
  return rows;
}

std::string resolve_path(const std::string& text, const fs::path& spec_dir) {
  fs::path p(text);
  if (p.is_relative()) p = spec_dir / p;
  return p.lexically_normal().string();
}

// The workload's --set/-p style "k=v" from a mapping.
std::vector<std::string> key_values(const Reader& r, const YAML::Node& m, const std::string& where) {
  std::vector<std::string> out;
  r.map(m, where);
  for (const auto& kv : m) {
    const YAML::Node k = kv.first;
    const YAML::Node v = kv.second;
    std::string value;
    if (v.IsSequence()) {  // a list value is written as the ops write lists: 0,2,1
      for (const auto& e : v) value += (value.empty() ? "" : ",") + r.scalar(e, where + "." + k.Scalar());
    } else {
      value = r.scalar(v, where + "." + k.Scalar());
    }
    out.push_back(k.Scalar() + "=" + value);
  }
  return out;
}

Workload read_workload(const Reader& r, const YAML::Node& w, std::size_t index, const fs::path& spec_dir) {
  const std::string where = "workloads[" + std::to_string(index) + "]";
  r.map(w, where);
  r.known_keys(w, where, {"name", "op", "kernel", "model", "params", "dims", "dtype", "args"});
  Workload wl;
  int kinds = 0;
  for (const char* kind : {"op", "kernel", "model"}) kinds += w[kind] ? 1 : 0;
  if (kinds != 1) r.fail(w, where + " needs exactly one of op: NAME, kernel: NAME|FILE or model: FILE.onnx");
  for (const char* kind : {"op", "kernel", "model"}) {
    if (!w[kind]) continue;
    wl.kind = kind;
    std::string target = r.scalar(w[kind], where + "." + kind);
    // A model, and a kernel given as a source or library, are files: relative to the spec.
    const bool file = wl.kind == "model" || target.find('/') != std::string::npos ||
                      (target.size() > 4 && (target.rfind(".cpp") == target.size() - 4 || target.rfind(".so") == target.size() - 3));
    if (file) {
      target = resolve_path(target, spec_dir);
      if (!fs::exists(target)) r.fail(w[kind], where + "." + kind + ": no file '" + target + "'");
    }
    wl.argv = {wl.kind == "model" ? "run" : wl.kind, target};
  }
  wl.name = w["name"] ? r.scalar(w["name"], where + ".name") : fs::path(wl.argv[1]).stem().string();
  if (w["params"]) {
    if (wl.kind == "model") r.fail(w["params"], where + ": a model takes dims (its symbolic input dims), not params");
    for (const std::string& p : key_values(r, w["params"], where + ".params")) {
      wl.argv.push_back("-p");
      wl.argv.push_back(p);
    }
  }
  if (w["dims"]) {
    if (wl.kind != "model") r.fail(w["dims"], where + ": dims bind a model's symbolic dims; an " + wl.kind + " takes params");
    for (const std::string& d : key_values(r, w["dims"], where + ".dims")) {
      wl.argv.push_back("--dim");
      wl.argv.push_back(d);
    }
  }
  if (w["dtype"]) {
    if (wl.kind != "op") r.fail(w["dtype"], where + ": dtype is an op's option");
    wl.argv.push_back("--dtype");
    wl.argv.push_back(r.scalar(w["dtype"], where + ".dtype"));
  }
  if (w["args"]) {
    for (const auto& a : r.list(w["args"], where + ".args")) {
      const std::string arg = r.scalar(a, where + ".args");
      for (const char* owned : {"--config", "--set", "--json", "--trace", "--summary"}) {
        if (arg == owned || arg.rfind(std::string(owned) + "=", 0) == 0)
          r.fail(a, where + ".args: " + owned + " is set by the sweep itself");
      }
      wl.argv.push_back(arg);
    }
  }
  std::string all;
  for (const auto& a : wl.argv) all += a + '\0';
  wl.hash = fnv1a_hex(all);
  return wl;
}

std::vector<Metric> read_metrics(const Reader& r, const YAML::Node& m) {
  std::vector<Metric> out;
  for (const auto& e : r.list(m, "metrics")) {
    Metric metric;
    if (e.IsScalar()) {
      metric.name = metric.expr = e.Scalar();
    } else if (e.IsMap() && e.size() == 1) {
      metric.name = e.begin()->first.Scalar();
      metric.expr = r.scalar(e.begin()->second, "metrics." + metric.name);
    } else {
      r.fail(e, "a metric is a --json key path (kernel.cycles) or one 'name: expression' pair");
    }
    try {
      expr_names(metric.expr);
    } catch (const InputError& err) {
      r.fail(e, std::string("metrics.") + metric.name + ": " + err.what());
    }
    for (const Metric& prior : out)
      if (prior.name == metric.name) r.fail(e, "metric '" + metric.name + "' is listed twice");
    out.push_back(std::move(metric));
  }
  return out;
}

// What a sweep collects when its spec names no metrics: the contract keys every simulating command prints, and
// the kernel-level keys of ops and kernels (a key a report lacks is left empty).
std::vector<Metric> default_metrics() {
  std::vector<Metric> m;
  for (const char* k : {"cycles", "time_us", "kernel.cycles", "kernel.time_us", "op.flops", "op.tflops",
                        "memory.hbm_read_bytes", "memory.hbm_write_bytes", "memory.hbm_avg_GBps", "memory.l2_hit_rate",
                        "kernel.pipes.scalar", "kernel.pipes.cube", "kernel.pipes.vector", "kernel.pipes.mte1",
                        "kernel.pipes.mte2", "kernel.pipes.mte3", "kernel.pipes.fixpipe"})
    m.push_back({k, k});
  return m;
}

// A name a plot may use: a metric, an axis or a derived key.
bool plottable(const Spec& spec, const std::string& name) {
  auto in = [&](const std::vector<std::string>& v) { return std::find(v.begin(), v.end(), name) != v.end(); };
  return in(spec.axis_keys) || in(spec.derived_keys) ||
         std::any_of(spec.metrics.begin(), spec.metrics.end(), [&](const Metric& m) { return m.name == name; });
}

nlohmann::json read_plots(const Reader& r, const YAML::Node& plots, const Spec& spec) {
  r.map(plots, "plots");
  r.known_keys(plots, "plots", {"x", "metrics", "pareto"});
  nlohmann::json out = nlohmann::json::object();
  auto names = [&](const YAML::Node& n, const std::string& where) {
    std::vector<std::string> v;
    if (n.IsScalar()) v.push_back(n.Scalar());
    else
      for (const auto& e : r.list(n, where)) v.push_back(r.scalar(e, where));
    for (const std::string& name : v) {
      const std::string bare = name.rfind("min:", 0) == 0 || name.rfind("max:", 0) == 0 ? name.substr(4) : name;
      if (!plottable(spec, bare)) r.fail(n, where + ": '" + bare + "' is not a metric, an axis or a derived key of the spec");
    }
    return v;
  };
  if (plots["x"]) out["x"] = names(plots["x"], "plots.x");
  if (plots["metrics"]) out["metrics"] = names(plots["metrics"], "plots.metrics");
  if (plots["pareto"]) {
    out["pareto"] = nlohmann::json::array();
    for (const auto& pair : r.list(plots["pareto"], "plots.pareto")) {
      const std::vector<std::string> two = names(pair, "plots.pareto");
      if (two.size() != 2) r.fail(pair, "plots.pareto: each front is a pair [x, y] (min:NAME or max:NAME)");
      out["pareto"].push_back(two);
    }
  }
  return out;
}

// Loads one point's config (the base with every override) and fills its hash, resolved values and device facts,
// or its error.
void resolve(Point& p, const config::ConfigBase& base, bool consistency = true) {
  try {
    const config::LoadedConfig loaded = base.load(p.sets, consistency);
    p.config_hash = config::config_hash(loaded.chip);
    for (const config::ResolvedValue& v : config::resolved_values(loaded.chip))
      if (v.type != "text") p.config[v.key] = v.number;
    p.chip = device_facts(loaded);
  } catch (const InputError& e) {
    p.error = e.what();
  }
}

}  // namespace

nlohmann::json Spec::describe() const {
  auto keys = [](const std::vector<std::string>& v) {
    nlohmann::json a = nlohmann::json::array();
    for (const std::string& k : v) {
      const config::KeyInfo& info = schema_keys().at(k);
      a.push_back({{"key", k}, {"unit", std::string(config::unit_name(info.unit))}, {"type", info.type}});
    }
    return a;
  };
  nlohmann::json w = nlohmann::json::array(), m = nlohmann::json::array();
  for (const Workload& x : workloads) w.push_back({{"name", x.name}, {"kind", x.kind}, {"argv", x.argv}, {"hash", x.hash}});
  for (const Metric& x : metrics) m.push_back({{"name", x.name}, {"expr", x.expr}});
  return {{"name", name}, {"spec", path}, {"base", base}, {"points", points.size()}, {"axes", keys(axis_keys)},
          {"derived", keys(derived_keys)}, {"workloads", w}, {"metrics", m}, {"plots", plots}};
}

Spec load_spec(const std::string& path) {
  const Reader r(path);
  YAML::Node root;
  try {
    root = YAML::Load(read_file(path, "cannot read the sweep spec"));
  } catch (const YAML::Exception& e) {
    throw InputError(path + ":" + std::to_string(e.mark.line + 1) + ": YAML syntax error: " + e.msg);
  }
  if (!root.IsMap()) throw InputError(path + ":1: a sweep spec is a YAML mapping (name, base, axes, workloads...)");
  r.known_keys(root, "the spec", {"name", "description", "base", "set", "axes", "derived", "workloads", "metrics", "plots"});
  const fs::path spec_dir = fs::absolute(fs::path(path)).parent_path();

  Spec spec;
  spec.path = path;
  spec.name = root["name"] ? r.scalar(root["name"], "name") : fs::path(path).stem().string();
  spec.base = std::string(config::kDefaultConfig);
  if (root["base"]) {
    spec.base = r.scalar(root["base"], "base");
    const bool builtin = std::any_of(config::builtin_configs().begin(), config::builtin_configs().end(),
                                     [&](const auto& b) { return b.name == spec.base; });
    if (!builtin) spec.base = resolve_path(spec.base, spec_dir);
  }

  std::vector<std::string> fixed;
  if (root["set"]) {
    for (const auto& kv : r.map(root["set"], "set")) {
      const YAML::Node k = kv.first;
      config_key(r, k, k.Scalar());
      fixed.push_back(k.Scalar() + "=" + r.scalar(kv.second, "set." + k.Scalar()));
    }
  }

  std::vector<Factor> factors;
  if (root["axes"]) {
    const YAML::Node axes = r.map(root["axes"], "axes");
    r.known_keys(axes, "axes", {"grid", "zip", "random"});
    if (axes["grid"]) factors.push_back(read_grid(r, axes["grid"], spec.axis_keys));
    if (axes["zip"]) factors.push_back(read_zip(r, axes["zip"], spec.axis_keys));
    if (axes["random"]) factors.push_back(read_random(r, axes["random"], spec.axis_keys));
  }
  std::set<std::string> seen;
  for (const std::string& k : spec.axis_keys)
    if (!seen.insert(k).second) r.fail(root["axes"], "axis '" + k + "' is given twice");

  // Derived keys, in the spec's order; each reads config values (after the axes and earlier derived keys).
  std::vector<std::pair<std::string, std::string>> derived;
  std::vector<config::Unit> derived_units;
  if (root["derived"]) {
    for (const auto& kv : r.map(root["derived"], "derived")) {
      const YAML::Node k = kv.first;
      const std::string key = k.Scalar();
      const config::KeyInfo& info = config_key(r, k, key);
      if (seen.count(key)) r.fail(k, "derived key '" + key + "' is also an axis");
      if (info.type != "integer" && info.type != "real") r.fail(k, "derived key '" + key + "' is not numeric");
      const std::string expr = r.scalar(kv.second, "derived." + key);
      try {
        for (const std::string& name : expr_names(expr))
          if (!schema_keys().count(name)) throw InputError("'" + name + "' is not a config key");
      } catch (const InputError& e) {
        r.fail(kv.second, "derived." + key + ": " + e.what());
      }
      derived.emplace_back(key, expr);
      derived_units.push_back(info.unit);
      spec.derived_keys.push_back(key);
    }
  }

  // The cartesian product of the factors, counted before it is built.
  double product = 1;
  for (const Factor& f : factors) product *= static_cast<double>(f.size());
  if (product > kMaxPoints) r.fail(root["axes"], "the axes give more than 1,000,000 points");
  std::vector<Assignment> rows{Assignment{}};
  for (const Factor& f : factors) {
    std::vector<Assignment> next;
    for (const Assignment& a : rows) {
      for (const Assignment& b : f) {
        Assignment c = a;
        c.insert(c.end(), b.begin(), b.end());
        next.push_back(std::move(c));
      }
    }
    rows = std::move(next);
  }

  // The base is parsed once; a base that cannot be read or parsed refuses the spec (values it cannot take make
  // points invalid instead).
  std::unique_ptr<config::ConfigBase> base;
  try {
    base = std::make_unique<config::ConfigBase>(spec.base);
  } catch (const InputError& e) {
    r.fail(root["base"] ? root["base"] : root, std::string("base: ") + e.what());
  }
  for (std::size_t i = 0; i < rows.size(); ++i) {
    Point p;
    p.index = i;
    p.axes = rows[i];
    p.sets = fixed;
    for (const auto& [k, v] : p.axes) p.sets.push_back(k + "=" + v);
    if (!derived.empty()) {
      // Derived values read the config with the axes applied; an invalid one is recorded like an invalid config.
      resolve(p, *base, false);
      for (std::size_t d = 0; d < derived.size() && p.error.empty(); ++d) {
        try {
          const double v = eval_expr(derived[d].second, [&](std::string_view name) -> std::optional<double> {
            const auto it = p.config.find(std::string(name));
            if (it == p.config.end()) return std::nullopt;
            return it->second;
          });
          if (v < 0) throw InputError("the value " + std::to_string(v) + " is negative");
          const std::string text = config::exact_value_text(config::unit_is_integer(derived_units[d]) ? std::round(v) : v,
                                                            derived_units[d]);
          p.derived.emplace_back(derived[d].first, text);
          p.sets.push_back(derived[d].first + "=" + text);
          p.config[derived[d].first] = config::unit_is_integer(derived_units[d]) ? std::round(v) : v;
        } catch (const InputError& e) {
          p.error = "derived." + derived[d].first + ": " + e.what();
        }
      }
      if (!p.error.empty()) {
        p.config_hash.clear();
        p.config.clear();
        p.chip = nullptr;
        spec.points.push_back(std::move(p));
        continue;
      }
      p.config_hash.clear();
      p.config.clear();
    }
    resolve(p, *base);
    spec.points.push_back(std::move(p));
  }

  if (!root["workloads"]) r.fail(root, "the spec has no workloads (what each point runs)");
  std::size_t wi = 0;
  for (const auto& w : r.list(root["workloads"], "workloads")) {
    spec.workloads.push_back(read_workload(r, w, wi++, spec_dir));
    for (std::size_t j = 0; j + 1 < spec.workloads.size(); ++j)
      if (spec.workloads[j].name == spec.workloads.back().name)
        r.fail(w, "two workloads are named '" + spec.workloads.back().name + "' (give each a name:)");
  }
  if (spec.workloads.empty()) r.fail(root["workloads"], "workloads is empty");
  spec.metrics = root["metrics"] ? read_metrics(r, root["metrics"]) : default_metrics();
  if (root["plots"]) spec.plots = read_plots(r, root["plots"], spec);
  return spec;
}

}  // namespace npusim::cli::sweep
