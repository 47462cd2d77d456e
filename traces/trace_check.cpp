#include "traces/trace_check.hpp"

#include <algorithm>
#include <istream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <tuple>

#include "traces/gzip_stream.hpp"

namespace npusim::traces {
namespace {

using json = nlohmann::json;
using Track = std::pair<long long, long long>;

// 1 ns of slack for the microsecond rounding of a flow point and a slice.
constexpr double kEps = 1e-3;
// Times are printed to the picosecond: slices that touch may differ by that much after parsing.
constexpr double kSlackUs = 1e-6;
// Perfetto's slice tracker drops slices nested deeper.
constexpr std::size_t kMaxDepth = 512;

struct Span {
  double start;
  double end;
  std::string name;
};

struct FlowPoint {
  int begins = 0;
  int ends = 0;
  double begin_ts = 0;
  double end_ts = 0;
  Track begin_track;
  Track end_track;
  std::string key;  // category and name
};

bool inside_some_slice(const std::vector<Span>& spans, double ts) {
  return std::any_of(spans.begin(), spans.end(),
                     [&](const Span& s) { return s.start - kEps <= ts && ts <= s.end + kEps; });
}

// The rules, applied one event at a time so that a file can be checked while it is parsed.
class Checker {
 public:
  void event(const json& e);
  TraceCheck finish();
  void problem(std::string msg) {
    if (r_.problems.size() < 50) r_.problems.push_back(std::move(msg));
  }

 private:
  TraceCheck r_;
  std::size_t index_ = 0;
  std::map<Track, std::vector<Span>> spans_;
  std::set<Track> named_tracks_;
  std::set<long long> named_processes_;
  std::set<Track> used_tracks_;
  std::map<long long, FlowPoint> flows_;
};

// pid and tid: Perfetto's importer reads them as 32-bit unsigned numbers and takes anything else as 0, which would
// merge tracks silently.
bool valid_id(const json& v) {
  return v.is_number_integer() && v.get<long long>() >= 0 && v.get<long long>() <= 0xffffffffLL;
}

// A string field of an event, or "" when it is missing (checked to be a string, if present, by Checker::event).
std::string text(const json& e, const char* key) {
  const auto it = e.find(key);
  return it != e.end() && it->is_string() ? it->get<std::string>() : std::string();
}

void Checker::event(const json& e) {
  const std::string where = "event " + std::to_string(index_++);
  if (!e.is_object() || !e.contains("ph") || !e["ph"].is_string()) {
    problem(where + ": missing ph");
    return;
  }
  for (const char* key : {"name", "cat"}) {
    if (e.contains(key) && !e[key].is_string()) problem(where + ": " + key + " must be a string");
  }
  const std::string ph = e["ph"];
  if (!e.contains("pid") || !valid_id(e["pid"]) || !e.contains("tid") || !valid_id(e["tid"])) {
    problem(where + ": pid and tid must be integers from 0 to 2^32-1");
    return;
  }
  const Track track{e["pid"].get<long long>(), e["tid"].get<long long>()};
  if (ph == "M") {
    const std::string name = text(e, "name");
    if (name != "process_name" && name != "thread_name") return;
    if (!e.contains("args") || !e["args"].is_object() || !e["args"].contains("name") ||
        !e["args"]["name"].is_string() || e["args"]["name"].get<std::string>().empty()) {
      problem(where + ": " + name + " needs a non-empty args.name");
      return;
    }
    if (name == "process_name") named_processes_.insert(track.first);
    if (name == "thread_name") named_tracks_.insert(track);
    return;
  }
  if (!e.contains("ts") || !e["ts"].is_number() || e["ts"].get<double>() < 0) {
    problem(where + ": ts must be a non-negative number");
    return;
  }
  const double ts = e["ts"];
  if (ph == "X") {
    if (!e.contains("dur") || !e["dur"].is_number() || e["dur"].get<double>() < 0) {
      problem(where + ": complete slice needs a non-negative dur");
      return;
    }
    spans_[track].push_back({ts, ts + e["dur"].get<double>(), text(e, "name")});
    used_tracks_.insert(track);
    ++r_.slices;
  } else if (ph == "C") {
    if (!e.contains("args") || !e["args"].is_object() || e["args"].empty()) {
      problem(where + ": counter without values");
      return;
    }
    for (const auto& [k, v] : e["args"].items()) {
      if (!v.is_number()) problem(std::string(where).append(": counter series '").append(k).append("' is not numeric"));
    }
    ++r_.counters;
  } else if (ph == "s" || ph == "f") {
    if (!e.contains("id") || !e["id"].is_number_integer()) {
      problem(where + ": flow event without integer id");
      return;
    }
    FlowPoint& f = flows_[e["id"].get<long long>()];
    // Perfetto matches a flow's ends by id, category and name.
    const std::string key = text(e, "cat") + '\n' + text(e, "name");
    if (f.begins + f.ends > 0 && key != f.key) problem(where + ": flow ends with another category or name");
    f.key = key;
    if (ph == "s") {
      ++f.begins;
      f.begin_ts = ts;
      f.begin_track = track;
    } else {
      ++f.ends;
      f.end_ts = ts;
      f.end_track = track;
    }
    used_tracks_.insert(track);
  } else if (ph == "i" || ph == "I") {
    used_tracks_.insert(track);
  } else {
    problem(where + ": unexpected phase '" + ph + "'");
  }
}

TraceCheck Checker::finish() {
  // Nesting: sorted by start (longer first on ties), each slice must end within every slice still open, at most
  // kMaxDepth deep (Perfetto's slice tracker drops deeper slices).
  for (auto& [track, list] : spans_) {
    std::sort(list.begin(), list.end(), [](const Span& a, const Span& b) {
      return std::tie(a.start, b.end) < std::tie(b.start, a.end);
    });
    std::vector<const Span*> stack;
    for (const Span& s : list) {
      while (!stack.empty() && stack.back()->end <= s.start + kSlackUs) stack.pop_back();
      if (!stack.empty() && s.end > stack.back()->end + kSlackUs) {
        problem("pid " + std::to_string(track.first) + " tid " + std::to_string(track.second) + ": slice '" + s.name +
                "' overlaps '" + stack.back()->name + "' without nesting");
      }
      stack.push_back(&s);
      if (stack.size() > kMaxDepth) {
        problem("pid " + std::to_string(track.first) + " tid " + std::to_string(track.second) + ": slice '" + s.name +
                "' is nested deeper than " + std::to_string(kMaxDepth));
        stack.pop_back();
      }
    }
  }
  for (const auto& [id, f] : flows_) {
    const std::string where = "flow " + std::to_string(id);
    if (f.begins != 1 || f.ends != 1) {
      problem(where + ": needs exactly one begin and one end");
      continue;
    }
    if (f.end_ts < f.begin_ts) problem(where + ": ends before it begins");
    if (!inside_some_slice(spans_[f.begin_track], f.begin_ts)) problem(where + ": begin is not inside a slice");
    if (!inside_some_slice(spans_[f.end_track], f.end_ts)) problem(where + ": end is not inside a slice");
    ++r_.flows;
  }
  for (const Track& t : used_tracks_) {
    if (!named_tracks_.count(t)) {
      problem("pid " + std::to_string(t.first) + " tid " + std::to_string(t.second) + " has events but no name");
    }
    if (!named_processes_.count(t.first)) problem("pid " + std::to_string(t.first) + " has no process_name");
  }
  return std::move(r_);
}

}  // namespace

TraceCheck check_trace(const json& trace) {
  Checker c;
  if (!trace.is_object() || !trace.contains("traceEvents") || !trace["traceEvents"].is_array()) {
    c.problem("top level must be an object with a traceEvents array");
    return c.finish();
  }
  for (const json& e : trace["traceEvents"]) c.event(e);
  return c.finish();
}

TraceCheck check_trace_file(const std::string& path) {
  Checker c;
  std::unique_ptr<GzipFileReader> reader;
  try {
    reader = std::make_unique<GzipFileReader>(path);
  } catch (const std::exception& e) {
    c.problem(e.what());
    return c.finish();
  }
  std::istream in(reader.get());
  // Each event is checked as soon as it is parsed and then dropped (the callback returns false for it), so a file
  // of millions of events never becomes one document in memory.
  std::string top_key;
  bool events_seen = false;
  const json::parser_callback_t on_value = [&](int depth, json::parse_event_t event, json& parsed) {
    if (depth == 1 && event == json::parse_event_t::key) top_key = parsed.get<std::string>();
    if (top_key != "traceEvents") return true;
    if (depth == 1 && event == json::parse_event_t::array_start) events_seen = true;
    if (depth == 2 && event == json::parse_event_t::value) {
      c.event(parsed);  // an event that is not an object
      return false;
    }
    if (depth == 2 && (event == json::parse_event_t::object_end || event == json::parse_event_t::array_end)) {
      c.event(parsed);
      return false;
    }
    return true;
  };
  // A read error (bad gzip data, a trailer cut off after the last event) is a problem even when the JSON parsed.
  const auto read_problem = [&] {
    std::string msg = path + ": ";
    return msg.append(reader->compressed() ? "not valid gzip: " : "read error: ").append(reader->error());
  };
  try {
    const json top = json::parse(in, on_value);
    if (!top.is_object() || !events_seen) c.problem("top level must be an object with a traceEvents array");
    if (!reader->error().empty()) c.problem(read_problem());
  } catch (const json::exception& e) {
    c.problem(reader->error().empty() ? path + ": not valid JSON: " + e.what() : read_problem());
  }
  return c.finish();
}

}  // namespace npusim::traces
