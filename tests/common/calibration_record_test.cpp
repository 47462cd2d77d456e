// The calibration record (docs/calibration.md, "Fitted parameters") against the built-in configs and the schema: a
// value marked `# calibrated` in a config is listed in the record's table and its key's schema doc says
// "calibrated" (docs/config.md is generated from it), and every key the table lists is marked in some config.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "common/config/chip_config.hpp"
#include "common/config/schema_doc.hpp"

namespace npusim::config {
namespace {

std::string read(const std::filesystem::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Dotted keys of the lines of a YAML file whose comment says "calibrated" (block mappings, two-space indents).
std::set<std::string> calibrated_keys(const std::filesystem::path& yaml) {
  std::set<std::string> out;
  std::map<std::size_t, std::string> parents;  // indent -> key
  std::istringstream in(read(yaml));
  for (std::string line; std::getline(in, line);) {
    const std::size_t indent = line.find_first_not_of(' ');
    if (indent == std::string::npos || line[indent] == '#') continue;
    const std::size_t colon = line.find(':', indent);
    if (colon == std::string::npos) continue;
    parents.erase(parents.lower_bound(indent), parents.end());
    parents[indent] = line.substr(indent, colon - indent);
    const std::size_t hash = line.find('#', colon);
    if (hash == std::string::npos || line.find("calibrated", hash) == std::string::npos) continue;
    std::string key;
    for (const auto& [at, name] : parents) key += (key.empty() ? "" : ".") + name;
    out.insert(key);
  }
  return out;
}

// The keys in the first column of the record's "Fitted parameters" table.
std::set<std::string> recorded_keys(const std::string& page) {
  std::set<std::string> out;
  const std::size_t section = page.find("## Fitted parameters");
  const std::size_t end = page.find("\n## ", section + 1);
  std::istringstream in(page.substr(section, end - section));
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("| `", 0) != 0) continue;
    out.insert(line.substr(3, line.find('`', 3) - 3));
  }
  return out;
}

TEST(CalibrationRecord, EveryCalibratedConfigValueIsListedAndMarked) {
  const std::filesystem::path root = NPUSIM_SOURCE_DIR;
  std::set<std::string> marked;
  for (const auto& entry : std::filesystem::directory_iterator(root / "configs")) {
    if (entry.path().extension() != ".yaml") continue;
    for (const std::string& k : calibrated_keys(entry.path())) marked.insert(k);
  }
  const std::set<std::string> recorded = recorded_keys(read(root / "docs/calibration.md"));
  EXPECT_FALSE(marked.empty());
  EXPECT_EQ(marked, recorded) << "configs/*.yaml '# calibrated' lines vs docs/calibration.md's table";
  std::map<std::string, std::string> docs;
  for (const KeyInfo& k : describe_schema()) docs[k.key] = k.doc;
  for (const std::string& k : marked) {
    ASSERT_TRUE(docs.count(k)) << k << " is not a schema key";
    EXPECT_NE(docs[k].find("calibrated"), std::string::npos) << k << "'s schema doc does not say it is calibrated";
  }
}

}  // namespace
}  // namespace npusim::config
