// `npusim memtrace FILE`: replay a memory request trace against the memory model.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace npusim::cli {

struct MemtraceOptions {
  std::string file;
  std::string config;
  std::vector<std::string> sets;
  bool no_l2 = false;
  bool json = false;
  std::uint64_t bytes = 64;
  std::string stats;  // --stats FILE: the memory system's counters (docs/metrics.md, "Statistics")
};

int run_memtrace_command(const MemtraceOptions& opts);

}  // namespace npusim::cli
