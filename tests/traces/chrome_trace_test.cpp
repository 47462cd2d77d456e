// The Chrome trace writer produces JSON that parses and follows the format's rules; the checker catches traces
// that do not.
#include "traces/chrome_trace.hpp"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>

#include "traces/trace_check.hpp"

namespace npusim::traces {
namespace {

using nlohmann::json;

TEST(ChromeTrace, WritesAValidTrace) {
  std::ostringstream out;
  {
    ChromeTraceWriter w(out);
    int host = w.add_process("Host", 0);
    int api = w.add_track(host, "API \"calls\"", 0);
    int core = w.add_process("AIV 0", 10);
    int mte2 = w.add_track(core, "MTE2", 0);
    int vec = w.add_track(core, "V", 1);
    w.slice(host, api, "launch", 0, 9000, "api", {arg("kernel", "vector_add"), arg("block_dim", 48.0)});
    w.flow_begin(7, host, api, "launch", 8999);
    w.slice(core, mte2, "kernel", 10000, 5000);  // parent
    w.slice(core, mte2, "copy", 10000, 1000);    // nested, same start
    w.slice(core, mte2, "copy", 11000.5, 999.5); // nanosecond fraction
    w.flow_end(7, core, mte2, "launch", 10000);
    w.slice(core, vec, "vadd", 11000, 2000);
    w.counter(core, "HBM GB/s", 10000, {{"read", 12.5}, {"write", 3.0}});
    w.instant(core, vec, "done", 16000);
    w.close();
    EXPECT_EQ(w.events_written(), 19u);  // 10 metadata + 5 slices + 2 flow points + counter + instant
  }
  json j = json::parse(out.str());
  EXPECT_EQ(j["displayTimeUnit"], "ns");
  TraceCheck r = check_trace(j);
  EXPECT_TRUE(r.ok()) << r.problems.front();
  EXPECT_EQ(r.slices, 5u);
  EXPECT_EQ(r.flows, 1u);
  EXPECT_EQ(r.counters, 1u);
  // Timestamps are microseconds with nanosecond precision.
  bool seen = false;
  for (const json& e : j["traceEvents"]) {
    if (e["ph"] == "X" && e["ts"].get<double>() > 11.0 && e["ts"].get<double>() < 11.001) {
      EXPECT_DOUBLE_EQ(e["ts"].get<double>(), 11.0005);
      seen = true;
    }
  }
  EXPECT_TRUE(seen);
}

TEST(ChromeTrace, RejectsOverlapThatDoesNotNest) {
  std::ostringstream out;
  ChromeTraceWriter w(out);
  int p = w.add_process("p", 0);
  int t = w.add_track(p, "t", 0);
  w.slice(p, t, "a", 0, 100);
  EXPECT_THROW(w.slice(p, t, "b", 50, 100), std::logic_error);
  w.slice(p, t, "c", 100, 10);  // touching is fine
}

TEST(ChromeTrace, RejectsOutOfOrderStarts) {
  std::ostringstream out;
  ChromeTraceWriter w(out);
  int p = w.add_process("p", 0);
  int t = w.add_track(p, "t", 0);
  w.slice(p, t, "a", 100, 10);
  EXPECT_THROW(w.slice(p, t, "b", 50, 10), std::logic_error);
}

TEST(ChromeTrace, OtherTracksAreIndependent) {
  std::ostringstream out;
  ChromeTraceWriter w(out);
  int p = w.add_process("p", 0);
  int t1 = w.add_track(p, "t1", 0);
  int t2 = w.add_track(p, "t2", 1);
  w.slice(p, t1, "a", 0, 100);
  EXPECT_NO_THROW(w.slice(p, t2, "b", 50, 100));
}

TEST(ChromeTrace, EscapesStrings) {
  std::ostringstream out;
  write_json_string(out, "a\"b\\c\nd\x01");
  EXPECT_EQ(out.str(), R"("a\"b\\c\nd\u0001")");
  EXPECT_EQ(json::parse(out.str()).get<std::string>(), "a\"b\\c\nd\x01");
}

TEST(ChromeTrace, UnopenableFileNamesThePath) {
  try {
    ChromeTraceWriter w("/nonexistent-dir/trace.json");
    FAIL();
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent-dir/trace.json"), std::string::npos);
  }
}

json event(const char* ph, int tid, double ts, double dur = -1) {
  json e = {{"ph", ph}, {"pid", 1}, {"tid", tid}, {"ts", ts}, {"name", "e"}};
  if (dur >= 0) e["dur"] = dur;
  return e;
}

json named(json events) {
  events.push_back({{"ph", "M"}, {"pid", 1}, {"tid", 0}, {"name", "process_name"}, {"args", {{"name", "p"}}}});
  events.push_back({{"ph", "M"}, {"pid", 1}, {"tid", 1}, {"name", "thread_name"}, {"args", {{"name", "t"}}}});
  return {{"traceEvents", events}};
}

TEST(TraceCheck, FindsBrokenNesting) {
  TraceCheck r = check_trace(named({event("X", 1, 0, 10), event("X", 1, 5, 10)}));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.problems[0].find("without nesting"), std::string::npos);
}

TEST(TraceCheck, FindsUnmatchedFlow) {
  json s = event("s", 1, 1);
  s["id"] = 3;
  TraceCheck r = check_trace(named({event("X", 1, 0, 10), s}));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.problems[0].find("flow 3"), std::string::npos);
}

TEST(TraceCheck, FindsFlowOutsideSlices) {
  json s = event("s", 1, 1);
  s["id"] = 3;
  json f = event("f", 1, 50);
  f["id"] = 3;
  TraceCheck r = check_trace(named({event("X", 1, 0, 10), s, f}));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.problems[0].find("end is not inside a slice"), std::string::npos);
}

TEST(TraceCheck, FindsUnnamedTracksAndBadFields) {
  json events = {event("X", 2, 0, 10), event("X", 1, -1, 10), event("X", 1, 0)};
  TraceCheck r = check_trace(named(events));
  EXPECT_EQ(r.problems.size(), 3u);
}

TEST(TraceCheck, RejectsNonTraces) {
  EXPECT_FALSE(check_trace(json::array()).ok());
  EXPECT_FALSE(check_trace_file("/nonexistent.json").ok());
}

}  // namespace
}  // namespace npusim::traces
