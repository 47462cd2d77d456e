// npusim-trace-check FILE...: checks Chrome/Perfetto traces (plain or gzip-compressed JSON) against the rules of
// traces/trace_check.hpp, the ones Perfetto's JSON importer relies on. Exit 0 when every file passes, 1 otherwise,
// 2 on a usage error.
#include <cstring>
#include <iostream>

#include "traces/trace_check.hpp"

int main(int argc, char** argv) {
  if (argc < 2 || std::strcmp(argv[1], "--help") == 0 || std::strcmp(argv[1], "-h") == 0) {
    std::cerr << "usage: npusim-trace-check TRACE.json[.gz]...\n"
                 "Checks each trace against the rules Perfetto's JSON importer relies on (docs/runtime.md, \"Trace "
                 "checker\"): exit 0 when all pass, 1 otherwise.\n";
    return argc < 2 ? 2 : 0;
  }
  bool all_ok = true;
  for (int i = 1; i < argc; ++i) {
    const npusim::traces::TraceCheck r = npusim::traces::check_trace_file(argv[i]);
    if (r.ok()) {
      std::cout << argv[i] << ": ok (" << r.slices << " slices, " << r.counters << " counter samples, " << r.flows
                << " flows)\n";
      continue;
    }
    all_ok = false;
    std::cout << argv[i] << ": " << r.problems.size() << (r.problems.size() >= 50 ? " or more" : "") << " problem(s)\n";
    for (const std::string& p : r.problems) std::cout << "  " << p << "\n";
  }
  return all_ok ? 0 : 1;
}
