#include "traces/stats.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <random>
#include <stdexcept>

namespace npusim::traces {
namespace {

TEST(Stats, DumpsNestedJson) {
  StatsRegistry reg;
  Counter& bytes = reg.counter("chip.aiv3.mte2.bytes", "bytes", "bytes moved by MTE2");
  Counter& insts = reg.counter("chip.aiv3.mte2.instructions", "count", "instructions");
  Scalar& util = reg.scalar("chip.aiv3.utilisation", "ratio", "busy fraction");
  Distribution& lat = reg.distribution("chip.l2.latency", "cycles", "access latency");
  bytes.add(4096);
  bytes.add(4096);
  insts.add();
  util.set(0.5);
  lat.sample(50);
  lat.sample(200);
  nlohmann::json j = reg.to_json();
  EXPECT_EQ(j["chip"]["aiv3"]["mte2"]["bytes"], 8192);
  EXPECT_EQ(j["chip"]["aiv3"]["mte2"]["instructions"], 1);
  EXPECT_DOUBLE_EQ(j["chip"]["aiv3"]["utilisation"].get<double>(), 0.5);
  EXPECT_DOUBLE_EQ(j["chip"]["l2"]["latency"]["mean"].get<double>(), 125.0);
  EXPECT_DOUBLE_EQ(j["chip"]["l2"]["latency"]["max"].get<double>(), 200.0);
  EXPECT_EQ(reg.describe()["chip.aiv3.mte2.bytes"]["unit"], "bytes");
  EXPECT_EQ(reg.size(), 4u);
}

TEST(Stats, RejectsDuplicatesAndLeafGroupClashes) {
  StatsRegistry reg;
  reg.counter("a.b", "", "");
  EXPECT_THROW(reg.counter("a.b", "", ""), std::logic_error);
  EXPECT_THROW(reg.counter("a.b.c", "", ""), std::logic_error);
  reg.counter("x.y.z", "", "");
  EXPECT_THROW(reg.counter("x.y", "", ""), std::logic_error);
  EXPECT_THROW(reg.counter("bad..path", "", ""), std::logic_error);
}

TEST(Stats, ReferencesStayValid) {
  StatsRegistry reg;
  Counter& first = reg.counter("c0", "", "");
  for (int i = 1; i < 1000; ++i) reg.counter("c" + std::to_string(i), "", "");
  first.add(5);
  EXPECT_EQ(reg.to_json()["c0"], 5);
}

TEST(Stats, BoundCountersAreReadWhereTheComponentKeepsThem) {
  StatsRegistry reg;
  std::uint64_t bytes = 0;
  double latency = 0;
  reg.bind("chip.hbm.read_bytes", bytes, "bytes", "read");
  reg.bind("chip.gm.read_latency_cycles", latency, "cycles", "summed latency");
  Counter& blocks = reg.counter("chip.aiv0.blocks", "count", "blocks");
  bytes = 4096;
  latency = 12.5;
  blocks.add(3);
  EXPECT_EQ(reg.count("chip.hbm.read_bytes"), 4096u);
  EXPECT_EQ(reg.count("chip.aiv0.blocks"), 3u);
  EXPECT_DOUBLE_EQ(reg.real("chip.gm.read_latency_cycles"), 12.5);
  EXPECT_DOUBLE_EQ(reg.real("chip.hbm.read_bytes"), 4096.0);  // a counter reads as a real too
  EXPECT_EQ(reg.to_json()["chip"]["hbm"]["read_bytes"], 4096);
  EXPECT_TRUE(reg.to_json()["chip"]["hbm"]["read_bytes"].is_number_unsigned());
  EXPECT_EQ(reg.describe()["chip.gm.read_latency_cycles"]["unit"], "cycles");
  // A bound path clashes with a registered one like any other.
  EXPECT_THROW(reg.bind("chip.hbm.read_bytes", bytes, "", ""), std::logic_error);
  EXPECT_THROW(reg.bind("chip.aiv0.blocks.x", bytes, "", ""), std::logic_error);
}

TEST(Stats, ReadingAPathThatIsNotAValueNamesIt) {
  StatsRegistry reg;
  reg.distribution("lat", "cycles", "");
  reg.scalar("util", "ratio", "");
  try {
    reg.count("missing.path");
    FAIL() << "no error";
  } catch (const std::out_of_range& e) {
    EXPECT_NE(std::string(e.what()).find("missing.path"), std::string::npos) << e.what();
  }
  EXPECT_THROW(reg.count("util"), std::out_of_range);  // a scalar is not a counter
  EXPECT_THROW(reg.real("lat"), std::out_of_range);
  EXPECT_TRUE(reg.has("lat"));
  EXPECT_FALSE(reg.has("missing.path"));
}

TEST(Stats, ASnapshotKeepsTheValuesOfItsMoment) {
  StatsRegistry reg;
  std::uint64_t bytes = 100;
  reg.bind("hbm.bytes", bytes, "bytes", "");
  Scalar& s = reg.scalar("util", "ratio", "");
  s.set(0.25);
  const StatsRegistry::Snapshot then = reg.snapshot();
  bytes = 164;
  s.set(0.5);
  reg.counter("late", "count", "").add(7);
  EXPECT_EQ(then.count("hbm.bytes"), 100u);
  EXPECT_EQ(reg.count("hbm.bytes") - then.count("hbm.bytes"), 64u);
  EXPECT_DOUBLE_EQ(then.real("util"), 0.25);
  EXPECT_EQ(then.count("late"), 0u);  // registered after the snapshot: nothing counted before it
}

// Buckets: [0, 1), then 16 per power of two, [2^e (1 + m/16), 2^e (1 + (m+1)/16)).
TEST(Histogram, BucketsAreSixteenPerOctave) {
  EXPECT_EQ(Histogram::bucket_of(0.5), 0u);
  EXPECT_EQ(Histogram::bucket_of(1.0), 1u);
  EXPECT_EQ(Histogram::bucket_of(27.25), Histogram::bucket_of(27.0));
  EXPECT_NE(Histogram::bucket_of(27.0), Histogram::bucket_of(28.0));
  for (const double v : {1.0, 1.5, 3.0, 27.25, 41.25, 1e6, 3.3e9}) {
    const std::size_t b = Histogram::bucket_of(v);
    EXPECT_LE(Histogram::lower_edge(b), v);
    EXPECT_GT(Histogram::upper_edge(b), v);
    EXPECT_LE(Histogram::upper_edge(b) / Histogram::lower_edge(b), 1.0 + 1.0 / 16 + 1e-12);
  }
}

// Percentiles against the exact ones of sorted samples (the reference): never below, at most one bucket (6.25 %)
// above; exact for values that have a bucket of their own.
TEST(Histogram, PercentilesAreWithinABucketOfTheSortedSamples) {
  std::mt19937_64 rng(7);
  std::lognormal_distribution<double> dist(4.0, 0.6);
  Histogram h;
  std::vector<double> v(20000);
  for (double& x : v) {
    x = dist(rng);
    h.sample(x);
  }
  std::sort(v.begin(), v.end());
  for (const double p : {0.5, 0.9, 0.99, 1.0}) {
    const double exact = v[static_cast<std::size_t>(std::ceil(p * static_cast<double>(v.size()))) - 1];
    EXPECT_GE(h.percentile(p), exact) << p;
    EXPECT_LE(h.percentile(p), exact * (1 + 1.0 / 16)) << p;
  }
  EXPECT_DOUBLE_EQ(h.max(), v.back());
  EXPECT_DOUBLE_EQ(h.min(), v.front());
  Histogram two;
  for (int i = 0; i < 60; ++i) two.sample(27.25);
  for (int i = 0; i < 40; ++i) two.sample(41.25);
  EXPECT_DOUBLE_EQ(two.percentile(0.5), 27.25);
  EXPECT_DOUBLE_EQ(two.percentile(0.6), 27.25);
  EXPECT_DOUBLE_EQ(two.percentile(0.61), 41.25);
  EXPECT_DOUBLE_EQ(two.mean(), (60 * 27.25 + 40 * 41.25) / 100);
  EXPECT_DOUBLE_EQ(Histogram{}.percentile(0.5), 0.0);
}

// A report after a snapshot counts only the later samples.
TEST(Histogram, SinceASnapshotCountsOnlyLaterSamples) {
  StatsRegistry reg;
  Histogram lat;
  reg.bind("chip.hbm.read_latency", lat, "ns", "read latency");
  for (int i = 0; i < 10; ++i) lat.sample(100.0);
  const StatsRegistry::Snapshot before = reg.snapshot();
  for (int i = 0; i < 5; ++i) lat.sample(40.0);
  const Histogram after = reg.histogram("chip.hbm.read_latency").since(before.histogram("chip.hbm.read_latency"));
  EXPECT_EQ(after.count(), 5u);
  EXPECT_DOUBLE_EQ(after.mean(), 40.0);
  EXPECT_DOUBLE_EQ(after.percentile(0.99), 40.0);
  EXPECT_DOUBLE_EQ(after.max(), 40.0);
  EXPECT_EQ(before.histogram("no.such.path").count(), 0u);
  const nlohmann::json j = reg.to_json();
  EXPECT_EQ(j["chip"]["hbm"]["read_latency"]["count"], 15);
  EXPECT_DOUBLE_EQ(j["chip"]["hbm"]["read_latency"]["p50"].get<double>(), 100.0);
  EXPECT_EQ(j["chip"]["hbm"]["read_latency"]["buckets"].size(), 2u);
  EXPECT_THROW(reg.count("chip.hbm.read_latency"), std::out_of_range);
}

}  // namespace
}  // namespace npusim::traces
