#include "traces/memtrace.hpp"

#include <array>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "common/util/error.hpp"

namespace npusim::traces {

void read_memtrace(std::istream& in, const std::string& name,
                   const std::function<void(const MemTraceRecord&)>& on_record) {
  std::uint64_t line_no = 0, last_cycle = 0;
  std::array<char, kMaxMemtraceLine + 1> buf{};
  while (true) {
    in.getline(buf.data(), static_cast<std::streamsize>(buf.size()));
    if (in.fail() && !in.eof() && in.gcount() == static_cast<std::streamsize>(buf.size()) - 1) {
      // getline stopped at the buffer's end, not at a newline: a line no trace has (or a file with no newlines).
      throw InputError(name + ":" + std::to_string(line_no + 1) + ": a line longer than " +
                       std::to_string(kMaxMemtraceLine) + " characters");
    }
    if (in.gcount() == 0 && !in) break;
    // gcount counts the newline getline consumed; a NUL inside the line stays in it (and makes it malformed).
    const auto got = static_cast<std::size_t>(in.gcount());
    const std::string line(buf.data(), got > 0 && !in.eof() ? got - 1 : got);
    ++line_no;
    for (std::size_t i = 0; i < line.size(); ++i) {
      const auto c = static_cast<unsigned char>(line[i]);
      if (c < 0x20 && c != '\t' && c != '\r') {
        throw InputError(name + ":" + std::to_string(line_no) + ": a control character (byte " + std::to_string(c) +
                         ") at column " + std::to_string(i + 1) + ": not a text trace");
      }
    }
    const auto first = line.find_first_not_of(" \t\r");
    if (first == std::string::npos || line[first] == '#') continue;
    std::istringstream ls(line);
    std::string addr, op, cycle, extra;
    auto fail = [&](const std::string& why) {
      throw InputError(std::string(name)
                           .append(":")
                           .append(std::to_string(line_no))
                           .append(": ")
                           .append(why)
                           .append(" (expected '<hex address> READ|WRITE <cycle>')"));
    };
    if (!(ls >> addr >> op >> cycle) || (ls >> extra)) fail("malformed request '" + line + "'");
    MemTraceRecord r;
    try {
      std::size_t pos = 0;
      if (addr.empty() || addr[0] == '-' || addr[0] == '+') throw std::invalid_argument(addr);  // stoull wraps "-1"
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
    if (r.cycle > kMaxMemtraceCycle) {
      fail("cycle " + cycle + " is past " + std::to_string(kMaxMemtraceCycle) +
           " (2^53, where cycles stop being exact)");
    }
    if (r.cycle < last_cycle) fail("cycle " + cycle + " is before the previous request's " + std::to_string(last_cycle));
    last_cycle = r.cycle;
    r.line = line_no;
    on_record(r);
  }
}

void read_memtrace_file(const std::string& path, const std::function<void(const MemTraceRecord&)>& on_record) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) throw InputError("memory trace '" + path + "' is a directory");
  std::ifstream in(path);
  if (!in) throw InputError("cannot open memory trace '" + path + "'");
  read_memtrace(in, path, on_record);
}

}  // namespace npusim::traces
