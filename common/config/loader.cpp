#include "common/config/loader.hpp"

#include <yaml-cpp/depthguard.h>
#include <yaml-cpp/yaml.h>
#include <map>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <optional>
#include <set>
#include <sstream>

#include "common/util/error.hpp"
#include "common/util/file.hpp"

namespace npusim::config {
namespace fs = std::filesystem;

int Origin::rank() const {
  if (file.rfind("--set ", 0) == 0) return 3;
  if (file.find("(default value)") != std::string::npos) return 0;
  return file.rfind("<built-in", 0) == 0 ? 1 : 2;
}

std::string Origin::describe() const {
  if (line > 0) return file + ":" + std::to_string(line);
  return file;
}

namespace {

struct Entry {
  std::string value;
  Origin origin;
  bool used = false;
};

// A config flattened to dotted keys. Groups are remembered too, so a missing key can point at its group.
struct Flat {
  std::map<std::string, Entry> leaves;
  std::map<std::string, Origin> groups;
};

struct Source {
  std::string name;     // shown in messages
  std::string text;     // YAML
  fs::path directory;   // for relative `extends:`; empty for built-ins
};

class Errors {
 public:
  void add(const Origin& where, std::string_view key, std::string_view msg) {
    std::string line = where.describe();
    if (!key.empty()) line += ": key '" + std::string(key) + "'";
    line += ": " + std::string(msg);
    lines_.push_back(std::move(line));
  }
  void add_raw(std::string msg) { lines_.push_back(std::move(msg)); }
  bool any() const { return !lines_.empty(); }
  [[noreturn]] void raise() const {
    std::string msg = "invalid config";
    if (lines_.size() == 1) {
      msg += ": " + lines_.front();
    } else {
      msg += " (" + std::to_string(lines_.size()) + " problems):";
      for (const auto& l : lines_) msg += "\n  " + l;
    }
    throw ConfigError(msg);
  }
  void raise_if_any() const {
    if (any()) raise();
  }

 private:
  std::vector<std::string> lines_;
};

std::optional<std::string_view> builtin_text(std::string_view name) {
  for (const auto& b : builtin_configs()) {
    if (b.name == name) return b.yaml;
  }
  return std::nullopt;
}

std::string builtin_names() {
  std::string out;
  for (const auto& b : builtin_configs()) {
    if (!out.empty()) out += ", ";
    out += b.name;
  }
  return out;
}

Source resolve(std::string_view spec, const fs::path& relative_to, const Origin& asked_at) {
  auto ends_with = [&](std::string_view suffix) {
    return spec.size() > suffix.size() && spec.substr(spec.size() - suffix.size()) == suffix;
  };
  const bool looks_like_path = spec.find('/') != std::string_view::npos || ends_with(".yaml") || ends_with(".yml");
  if (!looks_like_path) {
    if (auto text = builtin_text(spec)) {
      return {"<built-in " + std::string(spec) + ">", std::string(*text), {}};
    }
  }
  fs::path p(spec);
  if (p.is_relative() && !relative_to.empty()) p = relative_to / p;
  auto fail = [&](const std::string& what) {
    std::string msg = "config '" + std::string(spec) + "' " + what;
    if (!asked_at.file.empty()) msg = asked_at.describe() + ": key 'extends': " + msg;
    throw ConfigError(msg);
  };
  std::string text;
  switch (read_bounded(p, kMaxConfigFileBytes, text)) {
    case ReadStatus::kOk: break;
    case ReadStatus::kNotAFile: fail("is a directory or a device, not a config file"); break;
    case ReadStatus::kCannotOpen:
      fail("is neither a built-in config (" + builtin_names() + ") nor a readable file");
      break;
    case ReadStatus::kTooLarge:  // a pipe (--config <(...)) is read up to the limit
      fail("is larger than " + std::to_string(kMaxConfigFileBytes) + " bytes, the most a config file may have");
      break;
  }
  return {p.lexically_normal().string(), std::move(text), p.parent_path()};
}

// The position of the quote that ends the quoted scalar starting at `pos` (its opening quote), or npos when the
// text ends first. yaml-cpp takes an unterminated quoted scalar to the end of the file (swallowing the keys after
// it) without an error, so the loader checks every quoted value itself.
std::size_t closing_quote(std::string_view text, std::size_t pos) {
  const char q = text[pos];
  for (std::size_t i = pos + 1; i < text.size(); ++i) {
    if (q == '"' && text[i] == '\\') {
      ++i;  // an escaped character, e.g. \"
    } else if (text[i] == q) {
      if (q == '\'' && i + 1 < text.size() && text[i + 1] == '\'') {
        ++i;  // '' is a quote inside a single-quoted scalar
      } else {
        return i;
      }
    }
  }
  return std::string_view::npos;
}

// The line where a second YAML document starts, or 0 when the text holds one. A document marker ("---", or "..."
// ending one) is only ever at the start of a line and never inside a scalar, so a scan of line starts finds them.
// (yaml-cpp's LoadAll would, but loops forever on some malformed texts, e.g. ",a]b}": found by fuzzing.)
int second_document_line(std::string_view text) {
  bool content = false, ended = false;
  int line = 0;
  for (std::size_t pos = 0; pos < text.size();) {
    const std::size_t end = std::min(text.find('\n', pos), text.size());
    const std::string_view l = text.substr(pos, end - pos);
    ++line;
    pos = end + 1;
    auto marker = [&](std::string_view m) {
      return l.substr(0, 3) == m && (l.size() == 3 || l[3] == ' ' || l[3] == '\t' || l[3] == '\r');
    };
    const std::size_t first = l.find_first_not_of(" \t\r");
    if (first == std::string_view::npos || l[first] == '#' || (!content && l[0] == '%'))
      continue;  // blank, comment, directive
    if (marker("---")) {
      if (content || ended) return line;
      content = l.find_first_not_of(" \t\r", 3) != std::string_view::npos;  // "--- value" starts the content
      continue;
    }
    if (marker("...")) {
      ended = true;
      continue;
    }
    if (ended) return line;
    content = true;
  }
  return 0;
}

// Walks the document as flatten will, refusing what a config never has: nesting deeper than kMaxConfigDepth, more
// than kMaxConfigNodes nodes (an alias bomb: each alias expands to its anchor's whole tree), a key given twice in
// one mapping (yaml-cpp keeps both and a lookup finds the first) and an unterminated quoted scalar.
void check_shape(const YAML::Node& node, std::string_view text, const std::string& file, std::size_t depth,
                 std::size_t& nodes) {
  if (++nodes > kMaxConfigNodes) {
    throw ConfigError(file + ":" + std::to_string(node.Mark().line + 1) + ": more than " +
                      std::to_string(kMaxConfigNodes) + " values (aliases that expand each other?)");
  }
  if (depth > kMaxConfigDepth) {
    throw ConfigError(file + ":" + std::to_string(node.Mark().line + 1) + ": nested deeper than " +
                      std::to_string(kMaxConfigDepth) + " levels");
  }
  if (node.IsScalar()) {
    // yaml-cpp marks a node where its anchor (&a) or tag (!!str) starts: skip those to the value.
    std::size_t pos = static_cast<std::size_t>(std::max(node.Mark().pos, 0));
    while (pos < text.size() && (text[pos] == '&' || text[pos] == '!')) {
      while (pos < text.size() && text[pos] != ' ' && text[pos] != '\t' && text[pos] != '\n') ++pos;
      while (pos < text.size() && (text[pos] == ' ' || text[pos] == '\t')) ++pos;
    }
    if (node.Tag() == "!" && pos < text.size() && (text[pos] == '"' || text[pos] == '\'') &&
        closing_quote(text, pos) == std::string_view::npos) {
      throw ConfigError(file + ":" + std::to_string(node.Mark().line + 1) +
                        ": the quoted value starting here has no closing " + std::string(1, text[pos]));
    }
    return;
  }
  std::map<std::string, int> seen;  // key -> line
  for (const auto& kv : node) {
    if (node.IsMap()) {
      const YAML::Node k = kv.first;
      const YAML::Node v = kv.second;
      const int line = k.Mark().line + 1;
      if (k.IsScalar()) {
        const auto [it, fresh] = seen.emplace(k.Scalar(), line);
        if (!fresh) {
          throw ConfigError(file + ":" + std::to_string(line) + ": key '" + k.Scalar() +
                            "' is given twice (first at line " + std::to_string(it->second) + ")");
        }
      }
      check_shape(k, text, file, depth + 1, nodes);
      check_shape(v, text, file, depth + 1, nodes);
    } else {
      check_shape(kv, text, file, depth + 1, nodes);
    }
  }
}

void flatten(const YAML::Node& node, const std::string& prefix, const std::string& file, Flat& out, Errors& errors) {
  for (const auto& kv : node) {
    // Copies, not references: yaml-cpp's iterator yields its key/value pair as a temporary.
    const YAML::Node k = kv.first;
    const YAML::Node val = kv.second;
    Origin where{file, k.Mark().line + 1};
    if (!k.IsScalar()) {
      errors.add(where, "", "keys must be plain names");
      continue;
    }
    const std::string key = prefix.empty() ? k.Scalar() : prefix + "." + k.Scalar();
    if (key == "extends") continue;  // handled by the caller
    if (val.IsMap()) {
      out.groups[key] = where;
      flatten(val, key, file, out, errors);
    } else if (val.IsScalar()) {
      out.leaves[key] = Entry{val.Scalar(), where};
    } else if (val.IsNull()) {
      errors.add(where, key, "has no value");
    } else {
      errors.add(where, key, "expected a single value, not a list");
    }
  }
}

void load_flat(const Source& src, Flat& out, std::set<std::string>& chain, Errors& errors) {
  if (!chain.insert(src.name).second) {
    throw ConfigError(src.name + ": 'extends' forms a cycle");
  }
  // A UTF-8 byte-order mark: yaml-cpp skips it but counts positions without it, which the checks below use.
  const std::string_view text = std::string_view(src.text).substr(src.text.rfind("\xEF\xBB\xBF", 0) == 0 ? 3 : 0);
  YAML::Node root;
  try {
    if (const int line = second_document_line(text)) {
      throw ConfigError(src.name + ":" + std::to_string(line) + ": a second YAML document; a config is one document");
    }
    root = YAML::Load(std::string(text));
  } catch (const YAML::DeepRecursion& e) {
    throw ConfigError(src.name + ":" + std::to_string(e.mark.line + 1) + ": nested deeper than yaml-cpp parses");
  } catch (const YAML::Exception& e) {
    throw ConfigError(src.name + ":" + std::to_string(e.mark.line + 1) + ": YAML syntax error: " + e.msg);
  }
  std::size_t nodes = 0;
  check_shape(root, text, src.name, 0, nodes);
  if (!root.IsMap()) {
    throw ConfigError(src.name + ":1: a chip config must be a YAML mapping of keys to values");
  }
  if (const YAML::Node parent = root["extends"]) {
    Origin where{src.name, parent.Mark().line + 1};
    if (!parent.IsScalar()) throw ConfigError(where.describe() + ": key 'extends': expected a config name or file");
    load_flat(resolve(parent.Scalar(), src.directory, where), out, chain, errors);
  }
  Flat mine;
  flatten(root, "", src.name, mine, errors);
  for (auto& [k, e] : mine.leaves) out.leaves[k] = std::move(e);
  for (auto& [k, g] : mine.groups) out.groups.try_emplace(k, g);
}

void apply_overrides(const std::vector<std::string>& overrides, Flat& flat) {
  for (const std::string& o : overrides) {
    const auto eq = o.find('=');
    if (eq == std::string::npos || eq == 0) {
      throw ConfigError("--set '" + o + "': expected key=value, e.g. --set l2.capacity=96MiB");
    }
    const std::string key = o.substr(0, eq);
    flat.leaves[key] = Entry{o.substr(eq + 1), Origin{"--set " + o, 0}};
  }
}

// Levenshtein distance, for "did you mean" hints on unknown keys.
std::size_t distance(std::string_view a, std::string_view b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t prev = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      std::size_t cur = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, prev + (a[i - 1] == b[j - 1] ? 0 : 1)});
      prev = cur;
    }
  }
  return row[b.size()];
}

// Fills a ChipConfig from the flattened entries, recording every problem.
class Filler : public Visitor {
 public:
  Filler(Flat& flat, Errors& errors, std::string top) : flat_(flat), errors_(errors), top_(std::move(top)) {}

  std::map<std::string, Origin> origins;

  void begin_group(std::string_view name, std::string_view) override { path_.emplace_back(name); }
  void end_group() override { path_.pop_back(); }

  void integer(std::string_view key, std::uint64_t& value, Unit unit, Default<std::uint64_t> def,
               std::string_view) override {
    fill(key, value, def, [unit](const std::string& t) { return parse_integer(t, unit); });
  }
  void real(std::string_view key, double& value, Unit unit, Default<double> def, std::string_view) override {
    fill(key, value, def, [unit](const std::string& t) { return parse_real(t, unit); });
  }
  void boolean(std::string_view key, bool& value, Default<bool> def, std::string_view) override {
    fill(key, value, def, [](const std::string& t) { return parse_bool(t); });
  }
  void text(std::string_view key, std::string& value, Default<std::string> def, std::string_view,
            std::initializer_list<std::string_view> choices) override {
    std::vector<std::string> allowed(choices.begin(), choices.end());
    fill(key, value, def, [allowed](const std::string& t) {
      if (!allowed.empty() && std::find(allowed.begin(), allowed.end(), t) == allowed.end()) {
        std::string list;
        for (const auto& a : allowed) list += (list.empty() ? "" : ", ") + a;
        throw std::invalid_argument("'" + t + "' is not one of: " + list);
      }
      return t;
    });
  }

  Origin origin_of(const std::string& key) const {
    if (auto it = origins.find(key); it != origins.end()) return it->second;
    return Origin{top_ + " (default value)", 0};
  }

 private:
  std::string full(std::string_view key) const {
    std::string f;
    for (const auto& p : path_) f += p + ".";
    return f + std::string(key);
  }

  // Where a missing key should have been: its nearest enclosing group, else the top file.
  Origin missing_origin(const std::string& key) const {
    std::string k = key;
    while (true) {
      auto dot = k.rfind('.');
      if (dot == std::string::npos) break;
      k = k.substr(0, dot);
      if (auto it = flat_.groups.find(k); it != flat_.groups.end()) return it->second;
    }
    return Origin{top_, 1};
  }

  template <typename T, typename Parse>
  void fill(std::string_view key, T& value, const Default<T>& def, Parse parse) {
    const std::string k = full(key);
    auto it = flat_.leaves.find(k);
    if (it == flat_.leaves.end()) {
      if (def) {
        value = *def;
      } else {
        errors_.add(missing_origin(k), k, "missing required key");
      }
      return;
    }
    it->second.used = true;
    origins[k] = it->second.origin;
    try {
      value = parse(it->second.value);
    } catch (const std::invalid_argument& e) {
      errors_.add(it->second.origin, k, e.what());
    }
  }

  Flat& flat_;
  Errors& errors_;
  std::string top_;
  std::vector<std::string> path_;
};

LoadedConfig finish(Flat& flat, const std::string& top, Errors& errors, bool consistency) {
  LoadedConfig out;
  out.source = top;
  Filler filler(flat, errors, top);
  reflect(filler, out.chip);

  const std::vector<KeyInfo> schema = describe_schema();
  // Keys a release renamed: a config written for the old name is told the new ones.
  static const std::map<std::string, std::string> renamed = {
      {"hbm.timing.tRRD",
       "was split into hbm.timing.tRRD_S (different bank groups) and hbm.timing.tRRD_L (the same "
       "bank group)"}};
  for (const auto& [key, entry] : flat.leaves) {
    if (entry.used) continue;
    if (const auto r = renamed.find(key); r != renamed.end()) {
      errors.add(entry.origin, key, "unknown key: it " + r->second);
      continue;
    }
    std::string hint;
    std::size_t best = 4;  // only suggest close matches
    for (const KeyInfo& info : schema) {
      std::size_t d = distance(key, info.key);
      if (d < best) {
        best = d;
        hint = info.key;
      }
    }
    std::string msg = flat.groups.count(key) ? "unknown group" : "unknown key";
    if (!hint.empty()) msg += " (did you mean '" + hint + "'?)";
    errors.add(entry.origin, key, msg);
  }
  errors.raise_if_any();  // consistency checks assume well-formed values

  if (consistency) {
    for (const Problem& p : check_consistency(out.chip)) {
      // Of the keys that make the problem, the one set last: a --set, else one in a file the user wrote.
      auto rank = [&](const std::string& key) { return filler.origin_of(key).rank(); };
      std::string key = p.key;
      for (const std::string& k : p.with)
        if (rank(k) > rank(key)) key = k;
      errors.add(filler.origin_of(key), key, p.message);
    }
  }
  errors.raise_if_any();
  out.origins = std::move(filler.origins);
  return out;
}

LoadedConfig load_source(const Source& src, const std::vector<std::string>& overrides) {
  Flat flat;
  Errors errors;
  std::set<std::string> chain;
  load_flat(src, flat, chain, errors);
  apply_overrides(overrides, flat);
  return finish(flat, src.name, errors, true);
}

}  // namespace

struct ConfigBase::Parsed {
  Flat flat;
  Errors errors;
  std::string name;
};

ConfigBase::ConfigBase(std::string_view spec) : parsed_(std::make_unique<Parsed>()), spec_(spec) {
  const Source src = resolve(spec, {}, Origin{});
  std::set<std::string> chain;
  load_flat(src, parsed_->flat, chain, parsed_->errors);
  parsed_->name = src.name;
}

ConfigBase::~ConfigBase() = default;

LoadedConfig ConfigBase::load(const std::vector<std::string>& overrides, bool consistency) const {
  Flat flat = parsed_->flat;
  Errors errors = parsed_->errors;
  apply_overrides(overrides, flat);
  LoadedConfig c = finish(flat, parsed_->name, errors, consistency);
  c.source = spec_;
  return c;
}

LoadedConfig load_config(std::string_view spec, const std::vector<std::string>& overrides) {
  return ConfigBase(spec).load(overrides);
}

LoadedConfig load_config_text(std::string_view yaml, std::string_view source_name,
                              const std::vector<std::string>& overrides) {
  fs::path dir = fs::path(source_name).parent_path();
  return load_source(Source{std::string(source_name), std::string(yaml), dir}, overrides);
}

}  // namespace npusim::config
