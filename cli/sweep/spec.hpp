// A sweep spec (docs/exploration.md): a base config, axes over config keys (grid, zip, random), derived keys,
// workloads and metrics, expanded into points. Every point's config is loaded here, so an invalid one is known
// (and recorded) before anything runs.
#pragma once

#include <nlohmann/json.hpp>

#include <cstddef>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace npusim::cli::sweep {

// One thing each point runs: an npusim command line without the config options and --json.
struct Workload {
  std::string name;
  std::string kind;               // "op", "kernel" or "model"
  std::vector<std::string> argv;  // e.g. {"op", "flash_attention", "-p", "B=1", ...}
  std::string hash;               // of argv: a changed workload is a new row
};

// A result column: a --json key path ("kernel.cycles") or an expression over key paths.
struct Metric {
  std::string name;
  std::string expr;
};

struct Point {
  std::size_t index = 0;
  std::vector<std::pair<std::string, std::string>> axes;     // key, value as the spec wrote it
  std::vector<std::pair<std::string, std::string>> derived;  // key, value computed (exact, base unit)
  std::vector<std::string> sets;                             // every --set of the point (fixed, axes, derived)
  std::string config_hash;                                   // of the resolved config (empty when invalid)
  std::string error;                                         // why the config is invalid (empty when valid)
  std::map<std::string, double> config;                      // every numeric key's resolved value (valid points)
  nlohmann::json chip;                                       // the point's device facts (npusim info --json)

  // What identifies the point's design across runs: its config hash, or for an invalid config its overrides.
  std::string key() const;
};

struct Spec {
  std::string name;
  std::string path;  // the spec file
  std::string base;  // --config of every point: a built-in name or an absolute path
  std::vector<std::string> axis_keys, derived_keys;
  std::vector<Point> points;
  std::vector<Workload> workloads;
  std::vector<Metric> metrics;
  nlohmann::json plots = nlohmann::json::object();  // hints for npusim plot: x, metrics, pareto

  // The spec as npusim plot reads it (OUT/sweep.json): name, base, axes and derived keys with their units,
  // workloads, metrics, plots.
  nlohmann::json describe() const;
};

// Reads and expands a spec; throws InputError naming the file, the line and the key for a malformed spec (an
// unknown config key, axes of different lengths in `zip`, a workload of no kind...). A point whose config does not
// load is kept, with the loader's message in `error`.
Spec load_spec(const std::string& path);

}  // namespace npusim::cli::sweep
