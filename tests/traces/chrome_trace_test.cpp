// The Chrome trace writer produces JSON that parses and follows the format's rules; the checker catches traces
// that do not.
#include "traces/chrome_trace.hpp"

#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>

#include "traces/gzip_stream.hpp"
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

TEST(TraceCheck, FindsFlowEndsOfAnotherNameDeepNestingAndEmptyNames) {
  json s = event("s", 1, 1), f = event("f", 1, 2);
  s["id"] = f["id"] = 3;
  f["name"] = "other";  // Perfetto matches a flow's ends on id, category and name
  json events = {event("X", 1, 0, 10), s, f};
  for (int i = 0; i < 513; ++i) events.push_back(event("X", 1, 20 + i, 1000 - i));
  json trace = named(events);
  trace["traceEvents"].push_back(
      {{"ph", "M"}, {"pid", 1}, {"tid", 2}, {"name", "thread_name"}, {"args", {{"name", ""}}}});
  const TraceCheck r = check_trace(trace);
  std::string all;
  for (const std::string& p : r.problems) all += p + "\n";
  EXPECT_NE(all.find("flow ends with another category or name"), std::string::npos) << all;
  EXPECT_NE(all.find("nested deeper than 512"), std::string::npos) << all;
  EXPECT_NE(all.find("thread_name needs a non-empty args.name"), std::string::npos) << all;
}

// A file is checked while it is parsed: only the events of traceEvents count, whatever else the document holds.
TEST(TraceCheck, FileCheckSeesTheEventsOfTraceEventsOnly) {
  json trace = named({event("X", 1, 0, 10), event("X", 1, 2, 3)});
  trace["traceEvents"][0]["args"] = {{"nested", {{"deep", {1, 2, {{"x", 1}}}}}}};
  json doc = {{"metadata", {{"list", {{{"ph", "X"}, {"pid", -5}}}}}}, {"traceEvents", trace["traceEvents"]}};
  const std::string path = ::testing::TempDir() + "npusim_check_file.json";
  std::ofstream(path) << doc.dump();
  const TraceCheck r = check_trace_file(path);
  EXPECT_TRUE(r.ok()) << r.problems.front();
  EXPECT_EQ(r.slices, 2u);
  std::ofstream(path) << R"({"traceEvents": [1, [2, {"ph": "X"}], {"ph": "X"}]})";
  EXPECT_EQ(check_trace_file(path).problems.size(), 3u);  // a number, an array and an event without pid
  std::ofstream(path) << R"({"traceEvents": [{"ph": "i", "pid": 1, "tid": 1, "ts": 0, "name": 5}]})";
  const TraceCheck bad_name = check_trace_file(path);
  ASSERT_FALSE(bad_name.ok());
  EXPECT_NE(bad_name.problems.front().find("name must be a string"), std::string::npos) << bad_name.problems.front();
  std::ofstream(path) << R"({"other": []})";
  EXPECT_FALSE(check_trace_file(path).ok());
  std::remove(path.c_str());
}

// What GzipStreambuf writes is gzip that zlib (and so Perfetto) reads back byte for byte, across many buffers.
TEST(Gzip, WritesWhatGzipReadsBack) {
  const std::string path = ::testing::TempDir() + "npusim_gzip_test.gz";
  std::string text;
  for (int i = 0; i < 200000; ++i) text += "{\"ph\":\"X\",\"ts\":" + std::to_string(i * 7919 % 100003) + "},\n";
  {
    std::ofstream file(path, std::ios::binary);
    GzipStreambuf gz(file);
    std::ostream out(&gz);
    out << text.substr(0, 1000);
    out.flush();
    out << text.substr(1000);
    ASSERT_TRUE(gz.finish());
    out << "more";
    EXPECT_FALSE(out) << "a write after finish() must fail";
  }
  GzipFileReader reader(path);
  std::istream in(&reader);
  std::ostringstream back;
  back << in.rdbuf();
  EXPECT_EQ(back.str(), text);
  EXPECT_EQ(reader.error(), "");
  EXPECT_LT(std::filesystem::file_size(path) * 4, text.size());
  std::remove(path.c_str());
}

// A .gz trace path is written compressed; cut short, the checker names it as bad gzip rather than bad JSON.
TEST(Gzip, TracesEndingInGzAreCompressedAndCheckedAsSuch) {
  const std::string path = ::testing::TempDir() + "npusim_gzip_trace.json.gz";
  {
    ChromeTraceWriter w(path);
    const int p = w.add_process("p", 0), t = w.add_track(p, "t", 0);
    for (int i = 0; i < 100000; ++i) w.slice(p, t, "s" + std::to_string(i % 7), i * 10.0, 5.0);
    w.close();
  }
  std::ifstream raw(path, std::ios::binary);
  EXPECT_EQ(raw.get(), 0x1f);
  EXPECT_EQ(raw.get(), 0x8b);
  EXPECT_EQ(check_trace_file(path).slices, 100000u);
  // Only the gzip trailer (CRC and length, 8 bytes) missing: the JSON is whole, the file is not.
  std::filesystem::resize_file(path, std::filesystem::file_size(path) - 8);
  const TraceCheck no_trailer = check_trace_file(path);
  ASSERT_FALSE(no_trailer.ok());
  EXPECT_NE(no_trailer.problems.front().find("not valid gzip"), std::string::npos) << no_trailer.problems.front();
  std::filesystem::resize_file(path, std::filesystem::file_size(path) / 2);
  const TraceCheck r = check_trace_file(path);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.problems.front().find("not valid gzip"), std::string::npos) << r.problems.front();
  std::remove(path.c_str());
}

}  // namespace
}  // namespace npusim::traces
