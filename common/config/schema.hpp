// The parameter-declaration mechanism. Each params struct has one `reflect(Visitor&, Struct&)` function that names
// every field with its key, unit, default and a one-line doc. The loader, the documentation generator and the JSON
// dump are all visitors over that one declaration, so the docs cannot drift from the code (STYLE.md, gem5/SST).
#pragma once

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/config/units.hpp"

namespace npusim::config {

// A default value, or none when the key is required.
template <typename T>
using Default = std::optional<T>;
inline constexpr std::nullopt_t kRequired = std::nullopt;

class Visitor {
 public:
  virtual ~Visitor() = default;

  // Groups nest keys: inside group("cube") a field "latency" is the key "cube.latency".
  virtual void begin_group(std::string_view name, std::string_view doc) = 0;
  virtual void end_group() = 0;

  virtual void integer(std::string_view key, std::uint64_t& value, Unit unit, Default<std::uint64_t> def,
                       std::string_view doc) = 0;
  virtual void real(std::string_view key, double& value, Unit unit, Default<double> def, std::string_view doc) = 0;
  virtual void boolean(std::string_view key, bool& value, Default<bool> def, std::string_view doc) = 0;
  // choices empty: any text; otherwise the value must be one of them.
  virtual void text(std::string_view key, std::string& value, Default<std::string> def, std::string_view doc,
                    std::initializer_list<std::string_view> choices) = 0;
};

// RAII helper for groups.
class Group {
 public:
  Group(Visitor& v, std::string_view name, std::string_view doc) : v_(v) { v_.begin_group(name, doc); }
  ~Group() { v_.end_group(); }
  Group(const Group&) = delete;
  Group& operator=(const Group&) = delete;

 private:
  Visitor& v_;
};

// One declared key, as collected by describe(): used by the doc generator and by tests.
struct KeyInfo {
  std::string key;
  std::string type;  // "integer", "real", "boolean", "text"
  Unit unit = Unit::kCount;
  std::optional<std::string> default_text;  // formatted with its unit; nullopt when required
  std::string doc;
  std::vector<std::string> choices;
};

}  // namespace npusim::config
