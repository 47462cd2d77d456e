// The synchronisation checker behind `--sanitize` (docs/kernel-sdk.md): what mssanitizer does on hardware, here
// deterministic. Each pipe of a core is a thread of a happens-before relation: program order within a pipe,
// set_flag -> wait_flag edges (the waiting pipe learns everything the setting pipe had done), and barriers of all
// pipes. Every local-buffer access (UB, L1, L0A/B/C, bias table; 32 B granules) records its pipe and position; an
// access by another pipe that the relation does not order after it is a race, reported with both instructions and
// their source lines. Timing plays no part: a race is reported even when the model's timing happened to hide it.
// Plain C++: the engine calls it as instructions execute, in each pipe's order.
#pragma once

#include <array>
#include <cstdint>
#include <deque>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "hw/isa/instr.hpp"

namespace npusim::hw::core {

class Sanitizer {
 public:
  // `sizes`: bytes of each space on this core (0: absent); `core` names the core in reports.
  Sanitizer(const std::array<std::uint64_t, isa::kSpaceCount>& sizes, std::string core);

  // The scalar unit issues an instruction into pipe `p`: it executes after everything the scalar unit had done
  // (its own accesses, and what its waits taught it), since the scalar unit issues in order.
  void on_issue(isa::Pipe p);
  // An instruction of pipe `p` executes (each pipe calls in its program order; a wait after its set). For pipes
  // other than S, one call per on_issue, in the same order.
  void on_instr(isa::Pipe p, const isa::Instr& in);
  // A scalar-unit access (GetValue/SetValue) of a local buffer.
  void on_scalar_access(isa::Space s, std::uint64_t addr, std::uint64_t bytes, bool write, isa::SourceLoc where);
  // pipe_barrier(PIPE_ALL): everything before it is ordered before everything after it.
  void on_barrier_all();
  // The last set of a queue's free flag, left pending by design (the next AllocTensor would wait for it).
  void forget_pending(isa::Pipe src, isa::Pipe dst, std::uint32_t id);
  // Another finding (e.g. a queue buffer never freed), reported with the races.
  void report(const std::string& what);

  // At the kernel's end: flags set and never waited for join the findings. Returns every finding (empty: clean).
  std::vector<std::string> finish();
  std::size_t findings() const { return findings_.size(); }

 private:
  struct Site {  // one instruction's identity, interned
    isa::Op op;
    isa::Pipe pipe;
    isa::SourceLoc where;
  };
  struct Stamp {
    std::uint32_t epoch = 0;  // the pipe's instruction count at the access; 0: none
    std::uint32_t site = 0;
    std::uint32_t seq = 0;    // the instruction's position in the scalar unit's issue order
  };
  struct Cell {
    Stamp write;
    std::uint8_t write_pipe = 0;
    std::array<Stamp, isa::kPipeCount> reads{};
  };
  using Clock = std::array<std::uint32_t, isa::kPipeCount>;

  std::uint32_t site(isa::Op op, isa::Pipe p, isa::SourceLoc where);
  void access(isa::Pipe p, Stamp stamp, isa::Space s, std::uint64_t addr, std::uint64_t bytes, bool write);
  void race(isa::Space s, std::uint64_t granule, Stamp a, bool a_writes, Stamp b, bool b_writes);
  std::string describe(std::uint32_t site) const;

  std::string core_;
  std::array<std::uint64_t, isa::kSpaceCount> sizes_;
  std::array<std::vector<Cell>, isa::kSpaceCount> shadow_;  // allocated at a space's first access
  std::array<Clock, isa::kPipeCount> clock_{};                 // per pipe: what it knows of every pipe
  // The scalar unit's clock and the issue position of each queued instruction.
  std::array<std::deque<std::pair<Clock, std::uint32_t>>, isa::kPipeCount> issued_;
  std::uint32_t seq_ = 0;
  std::map<std::tuple<int, int, std::uint32_t>, std::deque<std::pair<Clock, std::uint32_t>>> pending_;
  std::map<std::tuple<int, int, std::uint32_t>, std::uint32_t> forgiven_;  // sets expected to be left pending
  std::vector<Site> sites_;
  std::map<std::tuple<const char*, std::uint32_t, int, int>, std::uint32_t> site_ids_;
  std::set<std::tuple<std::uint32_t, std::uint32_t>> reported_;
  std::vector<std::uint8_t> site_pipe_;
  std::vector<std::string> findings_;
};

}  // namespace npusim::hw::core
