// The four built-in configs load and their derived figures match HARDWARE.md.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "common/config/loader.hpp"

namespace npusim::config {
namespace {

TEST(BuiltinConfigs, AllFourExistAndLoad) {
  for (const char* name : {"910b", "910", "310p", "tiny"}) {
    SCOPED_TRACE(name);
    LoadedConfig c = load_config(name);
    EXPECT_EQ(c.chip.name, name);
  }
  EXPECT_EQ(builtin_configs().size(), 4u);
}

TEST(BuiltinConfigs, EmbeddedTextEqualsTheFileInConfigs) {
  for (const auto& b : builtin_configs()) {
    std::ifstream in(std::string(NPUSIM_SOURCE_DIR) + "/configs/" + std::string(b.name) + ".yaml");
    std::stringstream ss;
    ss << in.rdbuf();
    EXPECT_EQ(ss.str(), b.yaml) << b.name;
  }
}

// HARDWARE.md: 910B2 peak fp16 = 24 x 4096 x 2 x 1.8 GHz = 353.9 TFLOPS; HBM2e 4 stacks x 409.6 GB/s.
TEST(BuiltinConfigs, Peak910b) {
  const ChipConfig c = load_config("910b").chip;
  EXPECT_NEAR(c.peak_ops(c.cube.fp16) / 1e12, 353.9, 0.05);
  EXPECT_NEAR(c.peak_ops(c.cube.int8) / 1e12, 707.8, 0.1);
  EXPECT_NEAR(c.hbm.peak_bytes_per_second() / 1e9, 1638.4, 0.01);
  EXPECT_EQ(c.cores.aic, 24u);
  EXPECT_EQ(c.cores.aiv, 48u);
  EXPECT_EQ(c.buffers.ub.banks(), 48u);
  EXPECT_EQ(c.hbm.capacity, 64ull << 30);
  EXPECT_EQ(c.l2.capacity, 192ull << 20);
}

// HARDWARE.md: 910 "256 TFLOPS", "about 1.2 TB/s".
TEST(BuiltinConfigs, Peak910) {
  const ChipConfig c = load_config("910").chip;
  EXPECT_FALSE(c.split());
  EXPECT_NEAR(c.peak_ops(c.cube.fp16) / 1e12, 256.0, 256.0 * 0.03);
  EXPECT_NEAR(c.hbm.peak_bytes_per_second() / 1e12, 1.2, 0.05);
}

TEST(BuiltinConfigs, TinyIsSmall) {
  const ChipConfig c = load_config("tiny").chip;
  EXPECT_TRUE(c.split());
  EXPECT_EQ(c.cores.aic, 2u);
  EXPECT_EQ(c.cores.aiv, 4u);
  EXPECT_LT(c.buffers.ub.size, load_config("910b").chip.buffers.ub.size);
}

}  // namespace
}  // namespace npusim::config
