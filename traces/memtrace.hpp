// Memory request traces in the format DRAMsim3 reads: one request per line, "<hex address> <READ|WRITE> <cycle>",
// e.g. "0x1f3a40 READ 1200". Blank lines and lines starting with '#' are skipped. Cycles must not decrease.
#pragma once

#include <cstdint>
#include <functional>
#include <istream>
#include <string>

namespace npusim::traces {

struct MemTraceRecord {
  std::uint64_t addr = 0;
  bool write = false;
  std::uint64_t cycle = 0;
  std::uint64_t line = 0;  // in the file, for errors about the request
};
inline constexpr std::size_t kMaxMemtraceLine = 4096;                       // characters
inline constexpr std::uint64_t kMaxMemtraceCycle = std::uint64_t{1} << 53;  // cycles stay exact as doubles

// Calls `on_record` for every request, in file order, without holding the file in memory. Throws InputError naming
// the file and line for a malformed line or a decreasing cycle.
void read_memtrace(std::istream& in, const std::string& name, const std::function<void(const MemTraceRecord&)>& on_record);
void read_memtrace_file(const std::string& path, const std::function<void(const MemTraceRecord&)>& on_record);

}  // namespace npusim::traces
