// Loading a chip config: YAML files or built-in configs, `extends:` inheritance, `--set key=value` overrides, and
// errors that name file, line and key.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/config/chip_config.hpp"

namespace npusim::config {

// The built-in configs (configs/*.yaml compiled into the binary).
struct BuiltinConfig {
  std::string_view name;
  std::string_view yaml;
};
const std::vector<BuiltinConfig>& builtin_configs();
inline constexpr std::string_view kDefaultConfig = "910b";

// What a config file may hold (issue 23): the built-in configs are under 16 KiB, 4 levels deep and 400 values.
inline constexpr std::size_t kMaxConfigFileBytes = std::size_t{1} << 20;
inline constexpr std::size_t kMaxConfigDepth = 32;
inline constexpr std::size_t kMaxConfigNodes = 100000;

// Where a value came from: "configs/910b.yaml:12", "--set", or "default".
struct Origin {
  std::string file;
  int line = 0;  // 1-based; 0 when not from a file
  std::string describe() const;
  // How late in a config's chain the value was set: 3 a --set, 2 a file of the user's, 1 a built-in config, 0 a
  // declared default.
  int rank() const;
};

struct LoadedConfig {
  ChipConfig chip;
  std::map<std::string, Origin> origins;  // every key set explicitly, with where it was set
  std::string source;                     // the file or built-in name asked for
};

// `spec` is a built-in name or a path to a YAML file. `overrides` are "a.b.c=value" strings (from --set), applied
// after every file. Throws ConfigError listing every problem found, each with file, line and key.
LoadedConfig load_config(std::string_view spec, const std::vector<std::string>& overrides = {});

// A base config (a built-in name or a file, with its `extends:` chain) read and parsed once, then loaded with many
// sets of overrides, as load_config(spec, overrides) would load each: a sweep's points share their base.
class ConfigBase {
 public:
  explicit ConfigBase(std::string_view spec);
  ~ConfigBase();
  ConfigBase(const ConfigBase&) = delete;
  ConfigBase& operator=(const ConfigBase&) = delete;
  // `consistency` false skips the checks between keys (every value is still parsed and range-checked): a sweep reads
  // the values of a point's config before its derived keys make it consistent (cores.aiv from cores.aic, say).
  LoadedConfig load(const std::vector<std::string>& overrides, bool consistency = true) const;

 private:
  struct Parsed;
  std::unique_ptr<Parsed> parsed_;
  std::string spec_;
};

// The same from YAML text; `source_name` is used in messages and to resolve a relative `extends:` path.
LoadedConfig load_config_text(std::string_view yaml, std::string_view source_name,
                              const std::vector<std::string>& overrides = {});

}  // namespace npusim::config
