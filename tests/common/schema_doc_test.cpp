// docs/config.md is generated from the schema; this fails when someone changes one without the other.
#include <gtest/gtest.h>

#include <fstream>
#include <set>
#include <sstream>

#include "common/config/chip_config.hpp"
#include "common/config/schema_doc.hpp"

namespace npusim::config {
namespace {

TEST(SchemaDoc, DocsPageMatchesTheDeclarations) {
  std::ifstream in(std::string(NPUSIM_SOURCE_DIR) + "/docs/config.md");
  ASSERT_TRUE(in) << "docs/config.md is missing";
  std::stringstream ss;
  ss << in.rdbuf();
  EXPECT_EQ(ss.str(), schema_markdown()) << "regenerate with: build/npusim-schema-doc > docs/config.md";
}

TEST(SchemaDoc, EveryKeyHasADocAndIsUnique) {
  std::set<std::string> seen;
  for (const KeyInfo& k : describe_schema()) {
    EXPECT_FALSE(k.doc.empty()) << k.key;
    EXPECT_TRUE(seen.insert(k.key).second) << "declared twice: " << k.key;
  }
  EXPECT_GT(seen.size(), 100u);
}

}  // namespace
}  // namespace npusim::config
