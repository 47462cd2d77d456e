// Structural checks of a Chrome trace, the rules Perfetto's importer relies on. Used by the tests of every layer
// that writes traces, and usable on any trace file.
#pragma once

#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

namespace npusim::traces {

struct TraceCheck {
  std::vector<std::string> problems;  // empty when the trace follows the rules
  std::size_t slices = 0;
  std::size_t counters = 0;
  std::size_t flows = 0;  // matched begin/end pairs
  bool ok() const { return problems.empty(); }
};

// Checks: a top-level object with a `traceEvents` array; every event has `ph`, integer `pid` and `tid` and a
// non-negative numeric `ts` (metadata excepted); complete slices have a non-negative `dur` and nest on each track;
// counters carry numeric args; every flow id has exactly one begin and one end, with one category and name, the end
// not before the begin, and each flow point lies inside a slice of its track; every track that has events was named
// (process_name and thread_name with a non-empty name); pid and tid fit 32 bits; slices nest at most 512 deep.
TraceCheck check_trace(const nlohmann::json& trace);
// Checks a file, plain or gzip-compressed, event by event as it is parsed (memory grows with its slices, not with
// its text); a file that cannot be read or parsed is reported as a problem.
TraceCheck check_trace_file(const std::string& path);

}  // namespace npusim::traces
