#include "traces/stats.hpp"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
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

}  // namespace
}  // namespace npusim::traces
