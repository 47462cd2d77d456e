// Config loading: extends, --set, and one test per kind of bad input, each checking that the error names file,
// line and key.
#include <gtest/gtest.h>

#include <fstream>
#include <string>

#include "common/config/loader.hpp"
#include "common/util/error.hpp"

namespace npusim::config {
namespace {

// The message of the ConfigError `fn` throws, or "" when it does not throw.
template <typename Fn>
std::string error_of(Fn fn) {
  try {
    fn();
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

#define EXPECT_CONTAINS(hay, needle) EXPECT_NE((hay).find(needle), std::string::npos) << (hay)

constexpr const char* kMinimal = R"(name: mini
clock:
  core: 1GHz
cores:
  organisation: coupled
  ai_cores: 2
buffers:
  l1: {size: 256KiB}
  l0a: {size: 16KiB}
  l0b: {size: 16KiB}
  l0c: {size: 32KiB}
  ub: {size: 64KiB}
l2:
  capacity: 1MiB
  slices: 2
  slice_bytes_per_cycle: 64
hbm:
  stacks: 1
  pin_rate: 2Gbps
  capacity: 1GiB
)";

TEST(ConfigLoader, MinimalConfigTakesDefaults) {
  LoadedConfig c = load_config_text(kMinimal, "mini.yaml");
  EXPECT_EQ(c.chip.name, "mini");
  EXPECT_DOUBLE_EQ(c.chip.clock.core_hz, 1e9);
  EXPECT_EQ(c.chip.buffers.ub.size, 64u * 1024);
  EXPECT_EQ(c.chip.cube.fp16.k, 16u);        // default
  EXPECT_EQ(c.chip.vector.latency.exp, 12u);  // default
  EXPECT_EQ(c.origins.at("buffers.ub.size").describe(), "mini.yaml:12");
}

TEST(ConfigLoader, SetOverridesAnyKey) {
  LoadedConfig c = load_config_text(kMinimal, "mini.yaml", {"l2.capacity=2MiB", "cube.latency=3", "clock.core=2GHz"});
  EXPECT_EQ(c.chip.l2.capacity, 2u << 20);
  EXPECT_EQ(c.chip.cube.latency, 3u);
  EXPECT_DOUBLE_EQ(c.chip.clock.core_hz, 2e9);
}

TEST(ConfigLoader, SetWithoutEqualsIsAnError) {
  std::string e = error_of([] { load_config_text(kMinimal, "mini.yaml", {"l2.capacity"}); });
  EXPECT_CONTAINS(e, "--set 'l2.capacity'");
  EXPECT_CONTAINS(e, "key=value");
}

TEST(ConfigLoader, BadUnitInSetNamesTheOverride) {
  std::string e = error_of([] { load_config_text(kMinimal, "mini.yaml", {"clock.core=fast"}); });
  EXPECT_CONTAINS(e, "--set clock.core=fast");
  EXPECT_CONTAINS(e, "key 'clock.core'");
}

TEST(ConfigLoader, UnknownKeyNamesFileLineAndKeyWithHint) {
  std::string yaml = std::string(kMinimal) + "l2x:\n  capacty: 3\n";
  std::string e = error_of([&] { load_config_text(yaml, "mini.yaml"); });
  EXPECT_CONTAINS(e, "mini.yaml:22: key 'l2x.capacty': unknown key");
  EXPECT_CONTAINS(e, "did you mean 'l2.capacity'");
}

TEST(ConfigLoader, BadUnitNamesFileLineAndKey) {
  std::string yaml = kMinimal;
  yaml.replace(yaml.find("1GHz"), 4, "1GB");
  std::string e = error_of([&] { load_config_text(yaml, "mini.yaml"); });
  EXPECT_CONTAINS(e, "mini.yaml:3: key 'clock.core'");
  EXPECT_CONTAINS(e, "unknown unit 'GB'");
}

// Issue 23: 3000GHz rounded its period to 0 (a division by zero), 1e-300GHz never finished.
TEST(ConfigLoader, ClocksOutsideTheModelledRangeAreRefused) {
  for (const char* v : {"clock.core=3000GHz", "clock.core=1e-300GHz", "clock.core=1e-6Hz", "clock.control_cpu=0.5MHz", "clock.core=0Hz"}) {
    const std::string e = error_of([&] { load_config_text(kMinimal, "mini.yaml", {v}); });
    EXPECT_CONTAINS(e, std::string(v).substr(0, std::string(v).find('=')));
    EXPECT_CONTAINS(e, "is outside [1MHz, 50GHz]");
  }
  EXPECT_DOUBLE_EQ(load_config_text(kMinimal, "mini.yaml", {"clock.core=50GHz"}).chip.clock.core_hz, 50e9);
  EXPECT_DOUBLE_EQ(load_config_text(kMinimal, "mini.yaml", {"clock.core=1MHz"}).chip.clock.core_hz, 1e6);
}

// Cycle counts a kernel or flag pays per event are bounded, so a typo cannot stall every kernel for ages.
TEST(ConfigLoader, PerEventScalarAndFlagCyclesAreBounded) {
  for (const char* key : {"scalar.api_call_cycles", "scalar.queue_call_cycles", "flags.cross_core_latency"}) {
    const std::string e = error_of([&] { load_config_text(kMinimal, "mini.yaml", {std::string(key) + "=1000001"}); });
    EXPECT_CONTAINS(e, key);
    EXPECT_CONTAINS(e, "must be at most 1000000 cycles");
  }
  EXPECT_EQ(load_config_text(kMinimal, "mini.yaml", {"scalar.api_call_cycles=12"}).chip.scalar.api_call_cycles, 12u);
}

TEST(ConfigLoader, MissingUnitIsAnError) {
  std::string yaml = kMinimal;
  yaml.replace(yaml.find("1GHz"), 4, "1.0");
  std::string e = error_of([&] { load_config_text(yaml, "mini.yaml"); });
  EXPECT_CONTAINS(e, "mini.yaml:3: key 'clock.core'");
  EXPECT_CONTAINS(e, "needs a unit");
}

TEST(ConfigLoader, MissingRequiredKeyNamesItsGroup) {
  std::string yaml = kMinimal;
  yaml.erase(yaml.find("  slices: 2\n"), 12);
  std::string e = error_of([&] { load_config_text(yaml, "mini.yaml"); });
  EXPECT_CONTAINS(e, "mini.yaml:13: key 'l2.slices': missing required key");
}

TEST(ConfigLoader, MissingTopLevelKeyNamesLineOne) {
  std::string yaml = kMinimal;
  yaml.erase(0, yaml.find('\n') + 1);  // drop "name:"
  std::string e = error_of([&] { load_config_text(yaml, "mini.yaml"); });
  EXPECT_CONTAINS(e, "mini.yaml:1: key 'name': missing required key");
}

TEST(ConfigLoader, L0aSmallerThanAFractalIsInconsistent) {
  std::string yaml = kMinimal;
  yaml.replace(yaml.find("l0a: {size: 16KiB}"), 18, "l0a: {size: 256B}");
  std::string e = error_of([&] { load_config_text(yaml, "mini.yaml"); });
  EXPECT_CONTAINS(e, "mini.yaml:9: key 'buffers.l0a.size'");
  EXPECT_CONTAINS(e, "smaller than one cube.fp16 A fractal (512B)");
}

TEST(ConfigLoader, UbNotAMultipleOfTheBankIsInconsistent) {
  std::string e = error_of([] { load_config_text(kMinimal, "mini.yaml", {"buffers.ub.size=6KiB"}); });
  EXPECT_CONTAINS(e, "--set buffers.ub.size=6KiB: key 'buffers.ub.size'");
  EXPECT_CONTAINS(e, "not a multiple of the bank size 4KiB");
}

TEST(ConfigLoader, InconsistentCoreCounts) {
  std::string e = error_of([] {
    load_config_text(kMinimal, "mini.yaml", {"cores.organisation=split", "cores.ai_cores=0", "cores.aic=3",
                                             "cores.aiv=5"});
  });
  EXPECT_CONTAINS(e, "key 'cores.aiv': is 5 but aic x aiv_per_aic = 6");
}

TEST(ConfigLoader, BadChoice) {
  std::string e = error_of([] { load_config_text(kMinimal, "mini.yaml", {"l2.replacement=mru"}); });
  EXPECT_CONTAINS(e, "'mru' is not one of: lru, random");
}

TEST(ConfigLoader, ListWhereAValueIsExpected) {
  std::string yaml = std::string(kMinimal) + "description: [a, b]\n";
  std::string e = error_of([&] { load_config_text(yaml, "mini.yaml"); });
  EXPECT_CONTAINS(e, "mini.yaml:21: key 'description': expected a single value");
}

TEST(ConfigLoader, YamlSyntaxErrorNamesTheLine) {
  std::string e = error_of([] { load_config_text("name: x\nclock: {core: 1GHz\n", "broken.yaml"); });
  EXPECT_CONTAINS(e, "broken.yaml:");
  EXPECT_CONTAINS(e, "YAML syntax error");
}

TEST(ConfigLoader, AllProblemsReportedTogether) {
  std::string e = error_of(
      [] { load_config_text(kMinimal, "mini.yaml", {"clock.core=1", "l2.slices=two", "hbm.flavour=mint"}); });
  EXPECT_CONTAINS(e, "3 problems");
  EXPECT_CONTAINS(e, "clock.core");
  EXPECT_CONTAINS(e, "l2.slices");
  EXPECT_CONTAINS(e, "hbm.flavour");
}

class ConfigFiles : public ::testing::Test {
 protected:
  std::string write(const std::string& name, const std::string& text) {
    std::string path = ::testing::TempDir() + name;
    std::ofstream(path) << text;
    return path;
  }
};

TEST_F(ConfigFiles, ExtendsBuiltinAndOverrides) {
  std::string path = write("small910b.yaml", "extends: 910b\nname: small\nl2:\n  capacity: 96MiB\n");
  LoadedConfig c = load_config(path);
  EXPECT_EQ(c.chip.name, "small");
  EXPECT_EQ(c.chip.l2.capacity, 96u << 20);
  EXPECT_EQ(c.chip.cores.aiv, 48u);  // inherited
}

TEST_F(ConfigFiles, ExtendsFileRelativeToTheIncludingFile) {
  write("base_rel.yaml", kMinimal);
  std::string path = write("child_rel.yaml", "extends: base_rel.yaml\nname: child\n");
  LoadedConfig c = load_config(path);
  EXPECT_EQ(c.chip.name, "child");
  EXPECT_EQ(c.chip.cores.ai_cores, 2u);
}

TEST_F(ConfigFiles, ErrorsInAParentNameTheParentFile) {
  std::string base = std::string(kMinimal) + "bogus: 1\n";
  write("base_bad.yaml", base);
  std::string path = write("child_bad.yaml", "extends: base_bad.yaml\n");
  std::string e = error_of([&] { load_config(path); });
  EXPECT_CONTAINS(e, "base_bad.yaml:21: key 'bogus': unknown key");
}

TEST_F(ConfigFiles, ExtendsCycleIsAnError) {
  write("cyc_a.yaml", "extends: cyc_b.yaml\n");
  std::string path = write("cyc_b.yaml", "extends: cyc_a.yaml\n");
  EXPECT_CONTAINS(error_of([&] { load_config(path); }), "cycle");
}

TEST_F(ConfigFiles, UnknownConfigNameListsBuiltins) {
  std::string e = error_of([] { load_config("911"); });
  EXPECT_CONTAINS(e, "'911' is neither a built-in config");
  EXPECT_CONTAINS(e, "910b");
}

TEST_F(ConfigFiles, UnknownExtendsNamesTheLine) {
  std::string path = write("ext_missing.yaml", "name: x\nextends: nowhere.yaml\n");
  std::string e = error_of([&] { load_config(path); });
  EXPECT_CONTAINS(e, "ext_missing.yaml:2: key 'extends'");
}

TEST_F(ConfigFiles, ABaseLoadsEachOverrideSetAsLoadConfigDoes) {
  // A sweep's points share one parsed base; each load must equal a fresh load_config with the same overrides.
  std::string path = write("sweep_base.yaml", "extends: 910b\nl2:\n  capacity: 96MiB\n");
  const ConfigBase base(path);
  for (const std::vector<std::string>& sets :
       {std::vector<std::string>{}, {"cores.aic=12", "cores.aiv=24"}, {"hbm.pin_rate=1.6Gbps"}}) {
    EXPECT_EQ(config_hash(base.load(sets).chip), config_hash(load_config(path, sets).chip));
    EXPECT_EQ(base.load(sets).source, path);
  }
  // Earlier overrides do not leak into later loads.
  EXPECT_EQ(base.load({}).chip.cores.aic, 24u);
  // The same errors, and the checks between keys can be left out.
  std::string e = error_of([&] { base.load({"cores.aic=12"}); });
  EXPECT_EQ(e, error_of([&] { load_config(path, {"cores.aic=12"}); }));
  EXPECT_CONTAINS(e, "key 'cores.aiv'");
  EXPECT_EQ(base.load({"cores.aic=12"}, false).chip.cores.aic, 12u);
  EXPECT_CONTAINS(error_of([&] { base.load({"cores.aic=x"}, false); }), "cores.aic");
  // The hash follows every value, not how it was written.
  EXPECT_EQ(config_hash(base.load({"l2.capacity=100663296"}).chip), config_hash(base.load({}).chip));
  EXPECT_NE(config_hash(base.load({"l2.capacity=48MiB"}).chip), config_hash(base.load({}).chip));
  EXPECT_EQ(config_hash(load_config("910b", {"name=other"}).chip), config_hash(load_config("910b").chip));
}

}  // namespace
}  // namespace npusim::config
