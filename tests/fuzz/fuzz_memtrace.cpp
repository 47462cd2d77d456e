// libFuzzer target: the memory-trace parser (`npusim memtrace`: '<hex address> READ|WRITE <cycle>' per line).
// Malformed lines must end in InputError naming the line.
#include <cstddef>
#include <cstdint>
#include <sstream>
#include <string>

#include "common/util/error.hpp"
#include "traces/memtrace.hpp"

// NOLINTNEXTLINE(readability-identifier-naming): libFuzzer's entry point
extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::istringstream in(std::string(reinterpret_cast<const char*>(data), size));
  std::uint64_t last = 0;
  try {
    npusim::traces::read_memtrace(in, "fuzz.trace", [&](const npusim::traces::MemTraceRecord& r) {
      // What the parser promises its callers: cycles in order and exact as doubles.
      if (r.cycle < last || r.cycle > npusim::traces::kMaxMemtraceCycle) __builtin_trap();
      last = r.cycle;
    });
  } catch (const npusim::InputError&) {
  }
  return 0;
}
