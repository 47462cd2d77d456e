#include "hw/core/sanitizer.hpp"

#include <algorithm>
#include <sstream>

#include "hw/isa/semantics.hpp"

namespace npusim::hw::core {

using isa::Op;
using isa::Pipe;
using isa::Space;

namespace {
constexpr std::uint64_t kGranule = 32;
constexpr std::size_t kMaxFindings = 32;

std::string hex(std::uint64_t v) {
  std::ostringstream os;
  os << "0x" << std::hex << v;
  return os.str();
}
}  // namespace

Sanitizer::Sanitizer(const std::array<std::uint64_t, isa::kSpaceCount>& sizes, std::string core)
    : core_(std::move(core)), sizes_(sizes) {
  sites_.push_back(Site{Op::kScalar, Pipe::kS, {}});  // site 0: none
}

std::uint32_t Sanitizer::site(Op op, Pipe p, isa::SourceLoc where) {
  const auto key = std::make_tuple(where.file, where.line, static_cast<int>(op), static_cast<int>(p));
  const auto it = site_ids_.find(key);
  if (it != site_ids_.end()) return it->second;
  sites_.push_back(Site{op, p, where});
  const auto id = static_cast<std::uint32_t>(sites_.size() - 1);
  site_ids_.emplace(key, id);
  return id;
}

std::string Sanitizer::describe(std::uint32_t s) const {
  const Site& x = sites_[s];
  const std::string what = x.op == Op::kScalar ? std::string("scalar access") : std::string(isa::op_name(x.op));
  return std::string(isa::pipe_name(x.pipe)) + " " + what + " at " + isa::format_loc(x.where);
}

void Sanitizer::report(const std::string& what) {
  if (findings_.size() < kMaxFindings) findings_.push_back("core " + core_ + ": " + what);
}

void Sanitizer::race(Space s, std::uint64_t granule, Stamp a, bool a_writes, Stamp b, bool b_writes) {
  // Told in program order: the instruction issued first should have been ordered before the other.
  if (b.seq < a.seq) {
    std::swap(a, b);
    std::swap(a_writes, b_writes);
  }
  if (!reported_.insert({a.site, b.site}).second) return;
  const Site& first = sites_[a.site];
  const Site& then = sites_[b.site];
  const std::string from(isa::pipe_name(first.pipe)), to(isa::pipe_name(then.pipe));
  std::ostringstream os;
  os << (a_writes && b_writes ? "write-after-write" : a_writes ? "read-after-write" : "write-after-read")
     << " race on " << isa::space_name(s) << " [" << hex(granule * kGranule) << ", " << hex((granule + 1) * kGranule)
     << "): " << describe(b.site) << (b_writes ? " writes where " : " reads what ") << describe(a.site)
     << (a_writes ? " writes" : " reads") << ", and no flag or barrier orders " << from << " before " << to
     << " in between (missing set_flag/wait_flag " << from << "->" << to;
  if (first.pipe != Pipe::kS && then.pipe != Pipe::kS) os << ", HardEvent::" << from << "_" << to;
  os << ", or a queue's EnQue/DeQue, FreeTensor/AllocTensor)";
  report(os.str());
}

void Sanitizer::access(Pipe p, Stamp stamp, Space sp, std::uint64_t addr, std::uint64_t bytes, bool write) {
  const int si = static_cast<int>(sp);
  if (sp == Space::kGm || bytes == 0 || sizes_[si] == 0) return;
  std::vector<Cell>& shadow = shadow_[si];
  if (shadow.empty()) shadow.resize((sizes_[si] + kGranule - 1) / kGranule);
  const int q = static_cast<int>(p);
  const Clock& known = clock_[q];
  const std::uint64_t first = addr / kGranule;
  const std::uint64_t last = std::min<std::uint64_t>((addr + bytes - 1) / kGranule, shadow.size() - 1);
  for (std::uint64_t g = first; g <= last; ++g) {
    Cell& c = shadow[g];
    if (c.write.epoch && c.write_pipe != q && known[c.write_pipe] < c.write.epoch) race(sp, g, c.write, true, stamp, write);
    if (write) {
      for (int r = 0; r < isa::kPipeCount; ++r) {
        if (r != q && c.reads[r].epoch && known[r] < c.reads[r].epoch) race(sp, g, c.reads[r], false, stamp, true);
      }
      c.write = stamp;
      c.write_pipe = static_cast<std::uint8_t>(q);
      c.reads.fill(Stamp{});
    } else {
      c.reads[q] = stamp;
    }
  }
}

void Sanitizer::on_issue(Pipe p) {
  const int q = static_cast<int>(p);
  if (q < isa::kPipeCount && p != Pipe::kS) issued_[q].push_back({clock_[static_cast<int>(Pipe::kS)], ++seq_});
}

void Sanitizer::on_instr(Pipe p, const isa::Instr& in) {
  const int q = static_cast<int>(p);
  if (q >= isa::kPipeCount) return;  // PIPE_ALL barriers: on_barrier_all
  std::uint32_t seq = 0;
  if (p != Pipe::kS && !issued_[q].empty()) {
    const Clock& from = issued_[q].front().first;
    for (int r = 0; r < isa::kPipeCount; ++r) clock_[q][r] = std::max(clock_[q][r], from[r]);
    seq = issued_[q].front().second;
    issued_[q].pop_front();
  } else {
    seq = ++seq_;
  }
  const std::uint32_t epoch = ++clock_[q][q];
  switch (in.op) {
    case Op::kSetFlag: {
      const auto key = std::make_tuple(static_cast<int>(in.sync.src), static_cast<int>(in.sync.dst), in.sync.id);
      pending_[key].push_back({clock_[q], site(in.op, p, in.where)});
      return;
    }
    case Op::kWaitFlag: {
      auto it = pending_.find(std::make_tuple(static_cast<int>(in.sync.src), static_cast<int>(in.sync.dst), in.sync.id));
      if (it == pending_.end() || it->second.empty()) return;  // the engine reports a wait that can never finish
      const Clock& from = it->second.front().first;
      for (int r = 0; r < isa::kPipeCount; ++r) clock_[q][r] = std::max(clock_[q][r], from[r]);
      it->second.pop_front();
      return;
    }
    case Op::kBarrier: case Op::kCrossSet: case Op::kCrossWait: case Op::kScalar: return;
    default: break;
  }
  const Stamp stamp{epoch, site(in.op, p, in.where), seq};
  for (const isa::Access& a : isa::accesses(in)) {
    if (!a.write) access(p, stamp, a.space, a.addr, a.bytes, false);
  }
  for (const isa::Access& a : isa::accesses(in)) {
    if (a.write) access(p, stamp, a.space, a.addr, a.bytes, true);
  }
}

void Sanitizer::on_scalar_access(Space s, std::uint64_t addr, std::uint64_t bytes, bool write, isa::SourceLoc where) {
  const int q = static_cast<int>(Pipe::kS);
  const std::uint32_t epoch = ++clock_[q][q];
  access(Pipe::kS, Stamp{epoch, site(Op::kScalar, Pipe::kS, where), ++seq_}, s, addr, bytes, write);
}

void Sanitizer::on_barrier_all() {
  Clock all{};
  for (const Clock& c : clock_)
    for (int r = 0; r < isa::kPipeCount; ++r) all[r] = std::max(all[r], c[r]);
  for (Clock& c : clock_) c = all;
}

void Sanitizer::forget_pending(Pipe src, Pipe dst, std::uint32_t id) {
  // The set may not have executed yet (the scalar unit runs ahead of the pipes): settled in finish().
  ++forgiven_[std::make_tuple(static_cast<int>(src), static_cast<int>(dst), id)];
}

std::vector<std::string> Sanitizer::finish() {
  for (auto& [key, sets] : pending_) {
    const auto f = forgiven_.find(key);
    for (std::uint32_t n = f == forgiven_.end() ? 0 : f->second; n > 0 && !sets.empty(); --n) sets.pop_back();
  }
  forgiven_.clear();
  for (const auto& [key, sets] : pending_) {
    for (const auto& [clock, s] : sets) {
      (void)clock;
      report("flag " + std::string(isa::pipe_name(static_cast<Pipe>(std::get<0>(key)))) + "->" +
             std::string(isa::pipe_name(static_cast<Pipe>(std::get<1>(key)))) + " id " +
             std::to_string(std::get<2>(key)) + " set by " + describe(s) +
             " is still set when the kernel ends (no wait_flag consumes it)");
    }
  }
  pending_.clear();
  return findings_;
}

}  // namespace npusim::hw::core
