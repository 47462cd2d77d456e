#include "traces/trace_check.hpp"

#include <algorithm>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <tuple>

namespace npusim::traces {
namespace {

using json = nlohmann::json;
using Track = std::pair<long long, long long>;

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
};

bool inside_some_slice(const std::vector<Span>& spans, double ts) {
  // 1 ns of slack for the microsecond rounding of both numbers.
  constexpr double kEps = 1e-3;
  return std::any_of(spans.begin(), spans.end(),
                     [&](const Span& s) { return s.start - kEps <= ts && ts <= s.end + kEps; });
}

}  // namespace

TraceCheck check_trace(const json& trace) {
  TraceCheck r;
  auto problem = [&](std::string msg) {
    if (r.problems.size() < 50) r.problems.push_back(std::move(msg));
  };
  if (!trace.is_object() || !trace.contains("traceEvents") || !trace["traceEvents"].is_array()) {
    problem("top level must be an object with a traceEvents array");
    return r;
  }
  std::map<Track, std::vector<Span>> spans;
  std::set<Track> named_tracks;
  std::set<long long> named_processes;
  std::set<Track> used_tracks;
  std::map<long long, FlowPoint> flows;

  std::size_t index = 0;
  for (const json& e : trace["traceEvents"]) {
    const std::string where = "event " + std::to_string(index++);
    if (!e.is_object() || !e.contains("ph") || !e["ph"].is_string()) {
      problem(where + ": missing ph");
      continue;
    }
    const std::string ph = e["ph"];
    if (!e.contains("pid") || !e["pid"].is_number_integer() || !e.contains("tid") || !e["tid"].is_number_integer()) {
      problem(where + ": pid and tid must be integers");
      continue;
    }
    const Track track{e["pid"].get<long long>(), e["tid"].get<long long>()};
    if (ph == "M") {
      const std::string name = e.value("name", "");
      if (name == "process_name") named_processes.insert(track.first);
      if (name == "thread_name") named_tracks.insert(track);
      continue;
    }
    if (!e.contains("ts") || !e["ts"].is_number() || e["ts"].get<double>() < 0) {
      problem(where + ": ts must be a non-negative number");
      continue;
    }
    const double ts = e["ts"];
    if (ph == "X") {
      if (!e.contains("dur") || !e["dur"].is_number() || e["dur"].get<double>() < 0) {
        problem(where + ": complete slice needs a non-negative dur");
        continue;
      }
      spans[track].push_back({ts, ts + e["dur"].get<double>(), e.value("name", "")});
      used_tracks.insert(track);
      ++r.slices;
    } else if (ph == "C") {
      if (!e.contains("args") || !e["args"].is_object() || e["args"].empty()) {
        problem(where + ": counter without values");
        continue;
      }
      for (const auto& [k, v] : e["args"].items()) {
        if (!v.is_number()) problem(where + ": counter series '" + k + "' is not numeric");
      }
      ++r.counters;
    } else if (ph == "s" || ph == "f") {
      if (!e.contains("id") || !e["id"].is_number_integer()) {
        problem(where + ": flow event without integer id");
        continue;
      }
      FlowPoint& f = flows[e["id"].get<long long>()];
      if (ph == "s") {
        ++f.begins;
        f.begin_ts = ts;
        f.begin_track = track;
      } else {
        ++f.ends;
        f.end_ts = ts;
        f.end_track = track;
      }
      used_tracks.insert(track);
    } else if (ph == "i" || ph == "I") {
      used_tracks.insert(track);
    } else {
      problem(where + ": unexpected phase '" + ph + "'");
    }
  }

  // Nesting: sorted by start (longer first on ties), each slice must end within every slice still open.
  for (auto& [track, list] : spans) {
    std::sort(list.begin(), list.end(), [](const Span& a, const Span& b) {
      return std::tie(a.start, b.end) < std::tie(b.start, a.end);
    });
    std::vector<const Span*> stack;
    for (const Span& s : list) {
      // Times are printed to the picosecond: slices that touch may differ by that much after parsing.
      constexpr double kSlackUs = 1e-6;
      while (!stack.empty() && stack.back()->end <= s.start + kSlackUs) stack.pop_back();
      if (!stack.empty() && s.end > stack.back()->end + kSlackUs) {
        problem("pid " + std::to_string(track.first) + " tid " + std::to_string(track.second) + ": slice '" + s.name +
                "' overlaps '" + stack.back()->name + "' without nesting");
      }
      stack.push_back(&s);
    }
  }
  for (const auto& [id, f] : flows) {
    const std::string where = "flow " + std::to_string(id);
    if (f.begins != 1 || f.ends != 1) {
      problem(where + ": needs exactly one begin and one end");
      continue;
    }
    if (f.end_ts < f.begin_ts) problem(where + ": ends before it begins");
    if (!inside_some_slice(spans[f.begin_track], f.begin_ts)) problem(where + ": begin is not inside a slice");
    if (!inside_some_slice(spans[f.end_track], f.end_ts)) problem(where + ": end is not inside a slice");
    ++r.flows;
  }
  for (const Track& t : used_tracks) {
    if (!named_tracks.count(t)) {
      problem("pid " + std::to_string(t.first) + " tid " + std::to_string(t.second) + " has events but no name");
    }
    if (!named_processes.count(t.first)) problem("pid " + std::to_string(t.first) + " has no process_name");
  }
  return r;
}

TraceCheck check_trace_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) {
    TraceCheck r;
    r.problems.push_back("cannot open " + path);
    return r;
  }
  try {
    return check_trace(json::parse(in));
  } catch (const json::exception& e) {
    TraceCheck r;
    r.problems.push_back(path + ": not valid JSON: " + e.what());
    return r;
  }
}

}  // namespace npusim::traces
