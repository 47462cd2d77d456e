#include "traces/memtrace.hpp"

#include <fstream>
#include <sstream>

#include "common/util/error.hpp"

namespace npusim::traces {

void read_memtrace(std::istream& in, const std::string& name, const std::function<void(const MemTraceRecord&)>& on_record) {
  std::string line;
  std::uint64_t line_no = 0, last_cycle = 0;
  while (std::getline(in, line)) {
    ++line_no;
    const auto first = line.find_first_not_of(" \t\r");
    if (first == std::string::npos || line[first] == '#') continue;
    std::istringstream ls(line);
    std::string addr, op, cycle, extra;
    auto fail = [&](const std::string& why) {
      throw InputError(name + ":" + std::to_string(line_no) + ": " + why + " (expected '<hex address> READ|WRITE <cycle>')");
    };
    if (!(ls >> addr >> op >> cycle) || (ls >> extra)) fail("malformed request '" + line + "'");
    MemTraceRecord r;
    try {
      std::size_t pos = 0;
      r.addr = std::stoull(addr, &pos, 16);
      if (pos != addr.size()) throw std::invalid_argument(addr);
    } catch (const std::exception&) {
      fail("'" + addr + "' is not a hex address");
    }
    if (op == "READ" || op == "read" || op == "R") r.write = false;
    else if (op == "WRITE" || op == "write" || op == "W") r.write = true;
    else fail("'" + op + "' is neither READ nor WRITE");
    try {
      std::size_t pos = 0;
      if (cycle.empty() || cycle[0] == '-') throw std::invalid_argument(cycle);
      r.cycle = std::stoull(cycle, &pos, 10);
      if (pos != cycle.size()) throw std::invalid_argument(cycle);
    } catch (const std::exception&) {
      fail("'" + cycle + "' is not a cycle number");
    }
    if (r.cycle < last_cycle) fail("cycle " + cycle + " is before the previous request's " + std::to_string(last_cycle));
    last_cycle = r.cycle;
    on_record(r);
  }
}

void read_memtrace_file(const std::string& path, const std::function<void(const MemTraceRecord&)>& on_record) {
  std::ifstream in(path);
  if (!in) throw InputError("cannot open memory trace '" + path + "'");
  read_memtrace(in, path, on_record);
}

}  // namespace npusim::traces
