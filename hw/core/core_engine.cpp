#include "hw/core/core_engine.hpp"

#include <algorithm>
#include <cstring>
#include <limits>
#include <sstream>

#include "hw/core/cost_model.hpp"

namespace npusim::hw::core {

using isa::Op;
using isa::Pipe;
using isa::Space;

namespace {

std::string kind_name(CoreKind k) {
  switch (k) {
    case CoreKind::kCube: return "AIC";
    case CoreKind::kVector: return "AIV";
    case CoreKind::kCoupled: return "AI core";
  }
  return "?";
}

std::uint64_t queue_depth(const config::QueueParams& q, Pipe p) {
  switch (p) {
    case Pipe::kS: return q.s;
    case Pipe::kMte1: return q.mte1;
    case Pipe::kMte2: return q.mte2;
    case Pipe::kMte3: return q.mte3;
    case Pipe::kM: return q.m;
    case Pipe::kV: return q.v;
    case Pipe::kFix: return q.fix;
    default: return 1;
  }
}

}  // namespace

// The memory an instruction sees in functional mode: this core's buffers and device memory.
class CoreEngine::View final : public isa::MemoryView {
 public:
  explicit View(CoreEngine& e) : e_(e) {}
  std::uint8_t* local(Space s, std::uint64_t addr, std::uint64_t) override {
    return e_.local_[static_cast<int>(s)].data() + addr;
  }
  void gm_read(std::uint64_t addr, void* out, std::uint64_t bytes) override {
    e_.host_.device_memory()->read(addr, out, bytes);
  }
  void gm_write(std::uint64_t addr, const void* in, std::uint64_t bytes) override {
    e_.host_.device_memory()->write(addr, in, bytes);
  }

 private:
  CoreEngine& e_;
};

bool kind_has_pipe(CoreKind kind, Pipe p) {
  switch (p) {
    case Pipe::kS: case Pipe::kMte2: return true;
    case Pipe::kMte1: case Pipe::kM: case Pipe::kFix: return kind != CoreKind::kVector;
    case Pipe::kMte3: case Pipe::kV: return kind != CoreKind::kCube;
    default: return false;
  }
}

CoreEngine::CoreEngine(const config::ChipConfig& cfg, CoreIdentity id, Mode mode, CoreHost& host)
    : cfg_(cfg), id_(std::move(id)), mode_(mode), host_(host), view_(std::make_unique<View>(*this)) {
  for (int p = 0; p < isa::kPipeCount; ++p) has_pipe_[static_cast<std::size_t>(p)] = kind_has_pipe(id_.kind, static_cast<Pipe>(p));
  const bool cube = has_pipe(Pipe::kM), vec = has_pipe(Pipe::kV);  // which buffers the core has
  const config::BufferSet& b = cfg_.buffers;
  auto set_space = [&](Space s, const config::BufferParams& p, bool present) {
    size_[static_cast<int>(s)] = present ? p.size : 0;
    align_[static_cast<int>(s)] = std::max<std::uint64_t>(p.align, 1);
  };
  set_space(Space::kL1, b.l1, cube);
  set_space(Space::kL0A, b.l0a, cube);
  set_space(Space::kL0B, b.l0b, cube);
  set_space(Space::kL0C, b.l0c, cube);
  set_space(Space::kBiasTable, b.bias_table, cube);
  set_space(Space::kFixpipeBuffer, b.fixpipe_buffer, cube);
  set_space(Space::kUb, b.ub, vec);
  size_[static_cast<int>(Space::kGm)] = cfg_.hbm.capacity;
  align_[static_cast<int>(Space::kGm)] = 1;
  if (mode_ == Mode::kFunctional) {
    for (int s = 1; s < isa::kSpaceCount; ++s) local_[s].assign(size_[s], 0);
  }
  for (int p = 0; p < isa::kPipeCount; ++p) pipes_[p].depth = queue_depth(cfg_.queues, static_cast<Pipe>(p));
  flags_.resize(static_cast<std::size_t>(isa::kPipeCount) * isa::kPipeCount * cfg_.flags.event_ids);
  start_ = scalar_time_ = host_.now();
  if (cfg_.sim.sanitize) san_ = std::make_unique<Sanitizer>(size_, id_.name + " (block " + std::to_string(id_.block) + ")");
  for (auto& ps : pipes_) ps.free_at = ps.done_max = start_;
}

CoreEngine::~CoreEngine() = default;

CoreEngine::Flag& CoreEngine::flag(Pipe src, Pipe dst, std::uint32_t id) {
  return flags_[(static_cast<std::size_t>(src) * isa::kPipeCount + static_cast<std::size_t>(dst)) *
                    cfg_.flags.event_ids + id];
}

void CoreEngine::fail(const isa::Instr& in, Pipe pipe, const std::string& what) const {
  std::ostringstream os;
  os << "core " << id_.name << " (block " << id_.block << "), pipe " << isa::pipe_name(pipe) << ": "
     << isa::describe(in) << " at " << isa::format_loc(in.where) << ": " << what;
  throw KernelError(os.str());
}

void CoreEngine::validate(const isa::Instr& in) const {
  const Pipe pipe = in.pipe;
  if (pipe == Pipe::kAll && in.op != Op::kBarrier && in.op != Op::kCrossWait) {
    fail(in, pipe, "no copy path from " + std::string(isa::space_name(in.src_space)) + " to " +
                       std::string(isa::space_name(in.dst_space)));
  }
  if (pipe != Pipe::kAll && !has_pipe(pipe)) {
    fail(in, pipe, "an " + kind_name(id_.kind) + " has no " + std::string(isa::pipe_name(pipe)) + " pipe");
  }
  if (in.op == Op::kCopyL0cToUb && id_.kind != CoreKind::kCoupled) {
    fail(in, pipe, "the L0C -> UB path exists only on coupled cores");
  }
  if (in.op == Op::kSetFlag || in.op == Op::kWaitFlag) {
    if (in.sync.id >= cfg_.flags.event_ids) {
      fail(in, pipe, "event id " + std::to_string(in.sync.id) + " is out of range (0.." +
                         std::to_string(cfg_.flags.event_ids - 1) + ", flags.event_ids)");
    }
    for (Pipe p : {in.sync.src, in.sync.dst}) {
      if (p == Pipe::kAll || !has_pipe(p)) fail(in, pipe, "pipe " + std::string(isa::pipe_name(p)) + " is not a flag endpoint on this core");
    }
    if (in.sync.src == in.sync.dst) fail(in, pipe, "a flag connects two different pipes");
  }
  if (in.op == Op::kBarrier) {
    if (in.sync.src == Pipe::kS) fail(in, pipe, "pipe_barrier(PIPE_S) is illegal: the scalar unit is in order already");
    if (in.sync.src != Pipe::kAll && !has_pipe(in.sync.src)) {
      fail(in, pipe, "pipe_barrier on " + std::string(isa::pipe_name(in.sync.src)) + ", which this core does not have");
    }
  }
  if ((in.op == Op::kCrossSet && (in.pipe == Pipe::kS || in.pipe == Pipe::kAll)) ||
      (in.op == Op::kCrossWait && in.pipe == Pipe::kS)) {
    fail(in, pipe, "cross-core flags cannot sit in PIPE_S or PIPE_ALL");
  }
  for (const isa::Access& a : isa::accesses(in)) {
    const int s = static_cast<int>(a.space);
    const std::uint64_t size = size_[s];
    if (a.space != Space::kGm && size == 0) {
      fail(in, pipe, std::string(a.operand) + " is in " + std::string(isa::space_name(a.space)) + ", which an " +
                         kind_name(id_.kind) + " of this chip does not have");
    }
    if (a.space == Space::kGm && a.bytes) check_gm_bounds(in, pipe, std::string(a.operand), a.addr, a.bytes);
    if (a.addr > size || a.bytes > size - a.addr) {
      fail(in, pipe, std::string(a.operand) + " [" + std::to_string(a.addr) + ", " + std::to_string(a.addr + a.bytes) +
                         ") is out of range of " + std::string(isa::space_name(a.space)) + " (" +
                         std::to_string(size) + " B)");
    }
    if (a.addr % align_[s] != 0) {
      fail(in, pipe, std::string(a.operand) + " address " + std::to_string(a.addr) + " in " +
                         std::string(isa::space_name(a.space)) + " is not " + std::to_string(align_[s]) +
                         "-byte aligned");
    }
  }
}

void CoreEngine::check_gm_bounds(const isa::Instr& in, Pipe pipe, const std::string& what, std::uint64_t addr,
                                 std::uint64_t bytes) const {
  if (gm_bounds_.empty()) return;
  for (const GmRange& r : gm_bounds_) {
    if (addr >= r.addr && addr - r.addr <= r.bytes && bytes <= r.bytes - (addr - r.addr)) return;
  }
  std::string tensors;
  for (const GmRange& r : gm_bounds_) {
    tensors += (tensors.empty() ? "" : ", ") + r.name + " [" + std::to_string(r.addr) + ", " +
               std::to_string(r.addr + r.bytes) + ")";
  }
  fail(in, pipe, what + " GM [" + std::to_string(addr) + ", " + std::to_string(addr + bytes) +
                     ") is outside every tensor launched with the kernel: " + tensors);
}

void CoreEngine::scalar_busy(std::uint64_t cycles) {
  const std::uint64_t begin = scalar_time_;
  scalar_time_ += cycles;
  PipeState& s = pipes_[static_cast<int>(Pipe::kS)];
  ++s.stats.instructions;
  record(s, begin, scalar_time_);
  if (trace_) {
    static const isa::Instr scalar_issue = [] {
      isa::Instr in;
      in.op = Op::kScalar;
      return in;
    }();
    trace_->on_instr(Pipe::kS, scalar_issue, begin, scalar_time_);
  }
}

void CoreEngine::count_issue() {
  ++issued_;
  if (budget_ && ++budget_->used > budget_->limit) {
    throw KernelError("core " + id_.name + " (block " + std::to_string(id_.block) + "): the launch issued more than " +
                      "sim.max_instructions = " + std::to_string(budget_->limit) +
                      " instructions over its blocks (a loop that never ends? a shape too large to simulate? raise it "
                      "with --set sim.max_instructions=N)");
  }
}

void CoreEngine::record(PipeState& ps, std::uint64_t start, std::uint64_t end) {
  if (end <= start) return;
  // Starts come in program order; occupancies may overlap (copies in flight), so busy is the union's length.
  auto& iv = ps.stats.intervals;
  if (ps.stats.busy == 0) ps.stats.first_start = start;
  ps.stats.last_end = std::max(ps.stats.last_end, end);
  if (!iv.empty() && iv.back().second >= start) {
    if (end > iv.back().second) {
      ps.stats.busy += end - iv.back().second;
      iv.back().second = end;
    }
  } else {
    ps.stats.busy += end - start;
    iv.emplace_back(start, end);
  }
}

void CoreEngine::issue(isa::Instr in, std::uint64_t call_cycles) {
  if (finished_) throw KernelError("core " + id_.name + ": instruction issued after the kernel finished");
  if (!isa::is_sync_op(in.op) && in.op != Op::kScalar) in.pipe = isa::pipe_of(in);
  validate(in);
  count_issue();
  scalar_busy(call_cycles + cfg_.scalar.cycles_per_instruction);

  // Instructions the scalar unit executes itself.
  if (in.op == Op::kBarrier && in.sync.src == Pipe::kAll) {
    run_until([&] {
      for (const auto& ps : pipes_)
        if (!ps.queue.empty()) return false;
      return true;
    }, [&] { return "it waits at " + isa::describe(in) + " (" + isa::format_loc(in.where) + ")"; });
    for (const auto& ps : pipes_) scalar_time_ = std::max(scalar_time_, ps.done_max);
    if (san_) san_->on_barrier_all();
    return;
  }
  if (in.op == Op::kWaitFlag && in.sync.dst == Pipe::kS) {
    Flag& f = flag(in.sync.src, in.sync.dst, in.sync.id);
    run_until([&] { return !f.sets.empty(); },
              [&] { return "it waits at " + isa::describe(in) + " (" + isa::format_loc(in.where) + ")"; });
    const std::uint64_t reached = scalar_time_;
    scalar_time_ = std::max(scalar_time_, f.sets.front().time);
    consume(f, in, Pipe::kS, scalar_time_, reached);
    if (san_) san_->on_instr(Pipe::kS, in);
    return;
  }
  if (in.op == Op::kSetFlag && in.sync.src == Pipe::kS) {
    // Earlier scalar work is done by construction; the flag fires now.
    fire(in, scalar_time_);
    if (san_) san_->on_instr(Pipe::kS, in);
    return;
  }
  if (in.op == Op::kScalar) {
    scalar_busy(in.sync.scalar_cycles);
    return;
  }
  if (in.op == Op::kCrossWait && in.pipe == Pipe::kAll) {
    // The scalar unit waits: nothing after it is issued until the count is there.
    CrossCoreHub* hub = host_.cross_core();
    if (!hub) fail(in, Pipe::kS, "cross-core flags need a split chip with AIC and AIV cores in the launch");
    scalar_cross_wait_ = true;
    run_until([&] { return hub->peek(id_.index, in.sync.id).has_value(); },
              [&] { return "it waits at " + isa::describe(in) + " (" + isa::format_loc(in.where) + "), which no core will set"; });
    scalar_cross_wait_ = false;
    scalar_time_ = std::max({scalar_time_, *hub->peek(id_.index, in.sync.id), host_.now()});
    hub->consume(id_.index, in.sync.id);
    return;
  }

  PipeState& ps = pipes_[static_cast<int>(in.pipe)];
  auto queued = [&ps] { return ps.queue.size() - (ps.continuing ? 1 : 0); };
  if (queued() >= ps.depth) {
    run_until([&] { return queued() < ps.depth; }, [&] {
      return "it is stalled issuing " + isa::describe(in) + " (" + isa::format_loc(in.where) + ") into the full " +
             std::string(isa::pipe_name(in.pipe)) + " queue (depth " + std::to_string(ps.depth) + ")";
    });
    // The slot freed when the head left the queue, i.e. at its start.
    scalar_time_ = std::max(scalar_time_, ps.last_start);
  }
  if (san_) san_->on_issue(in.pipe);
  ps.queue.push_back(Entry{in, scalar_time_});
}

void CoreEngine::scalar_work(std::uint64_t cycles) {
  isa::Instr in;
  in.op = Op::kScalar;
  in.pipe = Pipe::kS;
  in.sync.scalar_cycles = cycles;
  count_issue();
  scalar_busy(cycles);
}

void CoreEngine::scalar_read(Space s, std::uint64_t addr, void* out, std::uint64_t bytes, isa::SourceLoc where) {
  isa::Instr in;
  in.where = where;
  in.src_space = s;
  if (addr > size_[static_cast<int>(s)] || bytes > size_[static_cast<int>(s)] - addr) {
    fail(in, Pipe::kS, "scalar read of " + std::to_string(bytes) + " B at " + std::to_string(addr) + " is outside " +
                           std::string(isa::space_name(s)));
  }
  scalar_busy(cfg_.scalar.cycles_per_instruction);
  count_issue();
  // Everything that started before now has had its effect.
  while (step(scalar_time_)) {
  }
  if (s == Space::kGm) check_gm_bounds(in, Pipe::kS, "scalar read", addr, bytes);
  else if (san_) san_->on_scalar_access(s, addr, bytes, false, where);
  // GM holds the host's data in every mode (a kernel's tiling struct steers its control flow); local buffers hold
  // values in functional mode only.
  if (s == Space::kGm && host_.device_memory()) host_.device_memory()->read(addr, out, bytes);
  else if (s != Space::kGm && mode_ == Mode::kFunctional) std::memcpy(out, local_[static_cast<int>(s)].data() + addr, bytes);
  else std::memset(out, 0, bytes);
}

void CoreEngine::scalar_write(Space s, std::uint64_t addr, const void* in_bytes, std::uint64_t bytes,
                              isa::SourceLoc where) {
  isa::Instr in;
  in.where = where;
  in.dst_space = s;
  if (addr > size_[static_cast<int>(s)] || bytes > size_[static_cast<int>(s)] - addr) {
    fail(in, Pipe::kS, "scalar write of " + std::to_string(bytes) + " B at " + std::to_string(addr) + " is outside " +
                           std::string(isa::space_name(s)));
  }
  scalar_busy(cfg_.scalar.cycles_per_instruction);
  count_issue();
  while (step(scalar_time_)) {
  }
  if (s == Space::kGm) check_gm_bounds(in, Pipe::kS, "scalar write", addr, bytes);
  else if (san_) san_->on_scalar_access(s, addr, bytes, true, where);
  if (mode_ != Mode::kFunctional) return;
  if (s == Space::kGm) host_.device_memory()->write(addr, in_bytes, bytes);
  else std::memcpy(local_[static_cast<int>(s)].data() + addr, in_bytes, bytes);
}

std::optional<std::uint64_t> CoreEngine::ready_time(int p) {
  PipeState& ps = pipes_[p];
  if (ps.queue.empty()) return std::nullopt;
  const Entry& e = ps.queue.front();
  std::uint64_t t = std::max(e.issued, ps.free_at);
  switch (e.in.op) {
    // A barrier and a cross-core set hold the pipe until its earlier work is done. A set_flag does not hold the
    // pipe: it fires when the earlier work is done (see execute), and later instructions keep issuing.
    case Op::kBarrier:
    case Op::kCrossSet: return std::max(t, ps.done_max);
    case Op::kWaitFlag: {
      const Flag& f = flag(e.in.sync.src, e.in.sync.dst, e.in.sync.id);
      if (f.sets.empty()) return std::nullopt;
      return std::max(t, f.sets.front().time);
    }
    case Op::kCrossWait: {
      CrossCoreHub* hub = host_.cross_core();
      if (!hub) return std::nullopt;
      const auto when = hub->peek(id_.index, e.in.sync.id);
      if (!when) return std::nullopt;
      return std::max(t, *when);
    }
    default: return t;
  }
}

bool CoreEngine::blocked_on_cross() const {
  if (scalar_cross_wait_) return true;
  for (const auto& ps : pipes_)
    if (!ps.queue.empty() && ps.queue.front().in.op == Op::kCrossWait) return true;
  return false;
}

bool CoreEngine::step(std::optional<std::uint64_t> limit) {
  {
    int best = -1;
    std::uint64_t best_t = std::numeric_limits<std::uint64_t>::max();
    bool best_is_wait = false;
    for (int p = 0; p < isa::kPipeCount; ++p) {
      const auto t = ready_time(p);
      if (!t) continue;
      const bool is_wait = pipes_[p].queue.front().in.op == Op::kWaitFlag;
      // Earliest first; on a tie a wait goes before a set, so a flag consumed and re-set in the same cycle is legal.
      if (*t < best_t || (*t == best_t && is_wait && !best_is_wait)) {
        best = p;
        best_t = *t;
        best_is_wait = is_wait;
      }
    }
    if (best >= 0 && limit && best_t > *limit) return false;
    // A count from another core may arrive before our next event: let global time catch up first.
    if (blocked_on_cross() && host_.cross_core() && (best < 0 || best_t > host_.now())) {
      if (best < 0 && limit) return false;
      host_.wait_cross(best < 0 ? std::nullopt : std::optional<std::uint64_t>(best_t));
      // Time moved: let the caller re-check what it waits for before the next event.
      return true;
    }
    if (best < 0) return false;
    Entry e = pipes_[best].queue.front();
    pipes_[best].queue.pop_front();
    execute(best, e, best_t);
    return true;
  }
}

template <class Pred, class Why>
void CoreEngine::run_until(Pred done, Why waiting_for) {
  while (!done()) {
    if (!step()) deadlock(waiting_for());
  }
}

std::string CoreEngine::describe_blocked() const {
  std::ostringstream os;
  bool any = false;
  for (int p = 0; p < isa::kPipeCount; ++p) {
    const PipeState& ps = pipes_[p];
    if (ps.queue.empty()) continue;
    const isa::Instr& in = ps.queue.front().in;
    os << (any ? "; " : "") << "pipe " << isa::pipe_name(static_cast<Pipe>(p)) << " waits at " << isa::describe(in)
       << " (" << isa::format_loc(in.where) << ")";
    if (in.op == Op::kWaitFlag) {
      os << ", but no set_flag(" << isa::pipe_name(in.sync.src) << "->" << isa::pipe_name(in.sync.dst) << ", id "
         << in.sync.id << ") is pending or queued ahead of it";
    } else if (in.op == Op::kCrossWait) {
      os << ", but no core sets cross-core flag " << in.sync.id;
    }
    os << " [" << ps.queue.size() << " instruction(s) queued]";
    any = true;
  }
  if (scalar_cross_wait_) os << (any ? "; " : "") << "the scalar unit waits for a cross-core flag no core sets";
  return os.str();
}

void CoreEngine::deadlock(const std::string& waiting_for) const {
  std::ostringstream os;
  os << "deadlock on core " << id_.name << " (block " << id_.block << "): ";
  const std::string blocked = describe_blocked();
  os << (blocked.empty() ? "no pipe has work" : blocked);
  if (!waiting_for.empty()) os << "; the scalar unit cannot continue: " << waiting_for;
  throw KernelError(os.str());
}

void CoreEngine::execute(int p, Entry e, std::uint64_t start) {
  PipeState& ps = pipes_[p];
  const isa::Instr& in = e.in;
  const Pipe pipe = static_cast<Pipe>(p);
  if (!e.started) {
    ps.last_start = start;
    ++ps.stats.instructions;
    if (san_) san_->on_instr(pipe, in);
  }
  std::uint64_t end = start, done = start;
  switch (in.op) {
    case Op::kSetFlag: fire(in, std::max(start, ps.done_max)); break;
    case Op::kWaitFlag:
      consume(flag(in.sync.src, in.sync.dst, in.sync.id), in, pipe, start, std::max(e.issued, ps.free_at));
      break;
    case Op::kBarrier: break;
    case Op::kCrossSet:
      if (!host_.cross_core()) fail(in, pipe, "cross-core flags need a split chip with AIC and AIV cores in the launch");
      host_.sync(start);
      try {
        host_.cross_core()->set(id_.index, in.sync.mode, in.sync.id, start);
      } catch (const InputError& err) {
        fail(in, pipe, err.what());
      }
      break;
    case Op::kCrossWait: host_.cross_core()->consume(id_.index, in.sync.id); break;
    default: {
      const InstrCost c = instr_cost(cfg_, in);
      if (c.gm && isa::gm_segments(in) > 0) {
        if (!gm_chunk(ps, e, c, start, &end, &done)) {
          // More chunks: the pipe stays with this instruction until its last chunk is accepted.
          ps.continuing = true;
          ps.queue.push_front(e);
          return;
        }
        ps.continuing = false;
        start = e.begin;
        break;
      }
      end = start + c.cycles;
      done = end;
      ps.stats.bytes += isa::payload_bytes(in);
      ps.stats.bank_conflict_cycles += c.bank_cycles;
      if (mode_ == Mode::kFunctional) run_semantics(in, pipe);
      break;
    }
  }
  ps.free_at = end;
  ps.done_max = std::max(ps.done_max, done);
  // The instruction occupies its pipe until it completes: a GM copy until its data has landed (or its writes are
  // acknowledged), though the pipe may start its next instruction once the last byte left (free_at above).
  record(ps, start, done);
  if (trace_) trace_->on_instr(pipe, in, start, done);
}

void CoreEngine::fire(const isa::Instr& set, std::uint64_t at) {
  const std::uint64_t seq = trace_ ? trace_->on_flag_set(set.sync.src, set.sync.dst, set.sync.id, at) : 0;
  flag(set.sync.src, set.sync.dst, set.sync.id).sets.push_back(FlagSet{at, set.where, seq});
}

void CoreEngine::consume(Flag& f, const isa::Instr& wait, Pipe pipe, std::uint64_t when, std::uint64_t reached) {
  const FlagSet first = f.sets.front();
  f.sets.pop_front();
  if (trace_)
    trace_->on_flag_wait(wait.sync.src, wait.sync.dst, wait.sync.id, std::min(reached, when), when, first.seq);
  if (!f.sets.empty() && f.sets.front().time < when) {
    fail(wait, pipe, "set_flag at " + isa::format_loc(f.sets.front().where) + " fired at cycle " +
                         std::to_string(f.sets.front().time) + " while the flag was still set (by " +
                         isa::format_loc(first.where) + " at cycle " + std::to_string(first.time) +
                         "): a flag must be waited for before it is set again");
  }
}

void CoreEngine::run_semantics(const isa::Instr& in, Pipe pipe) {
  try {
    isa::execute(in, *view_);
  } catch (const KernelError&) {
    throw;
  } catch (const InputError& err) {
    fail(in, pipe, err.what());
  }
}

bool CoreEngine::gm_chunk(PipeState& ps, Entry& e, const InstrCost& c, std::uint64_t start, std::uint64_t* end,
                          std::uint64_t* done) {
  const isa::Instr& in = e.in;
  std::uint64_t request = start;
  if (!e.started) {
    e.started = true;
    e.begin = start;
    e.done = start;
    request = start + c.setup;
    ps.stats.bytes += isa::payload_bytes(in);
    // Values move when the instruction starts, in simulated-time order with every other access.
    if (mode_ == Mode::kFunctional) run_semantics(in, in.pipe);
  }
  // One step moves up to sim.chunk_bytes: a piece of a long segment, or several short segments (rows, bursts) in
  // a row, each requested when the port accepted the previous one. Time is synchronised once per step.
  host_.sync(request);
  std::uint64_t moved = 0;
  mem::GmAccess a{request, request};
  const std::uint32_t segments = isa::gm_segments(in);
  while (moved < cfg_.sim.chunk_bytes && e.segment < segments) {
    const isa::Segment seg = isa::gm_segment(in, e.segment);
    const std::uint64_t bytes = std::min<std::uint64_t>(cfg_.sim.chunk_bytes - moved, seg.bytes - e.offset);
    a = host_.gm().access(mem::GmRequest{id_.index, c.gm_write, seg.addr + e.offset, bytes, request});
    e.done = std::max(e.done, a.done);
    request = std::max(request, a.accepted);
    moved += bytes;
    e.offset += bytes;
    if (e.offset == seg.bytes) {
      e.offset = 0;
      ++e.segment;
    }
  }
  ps.free_at = std::max(request, a.accepted);
  if (e.segment < segments) return false;
  // Occupancy: the path's formula, or longer when the port accepted the last byte later; data done after that.
  *end = std::max(e.begin + c.cycles, a.accepted);
  *done = std::max(*end, e.done);
  return true;
}

void CoreEngine::finish() {
  run_until([&] {
    for (const auto& ps : pipes_)
      if (!ps.queue.empty()) return false;
    return true;
  }, [] { return std::string("the kernel has ended"); });
  end_ = scalar_time_;
  for (const auto& ps : pipes_) end_ = std::max({end_, ps.done_max, ps.free_at});
  // Sets nobody waited for are legal, but two of them mean the second found the flag set.
  for (int src = 0; src < isa::kPipeCount; ++src) {
    for (int dst = 0; dst < isa::kPipeCount; ++dst) {
      for (std::uint32_t id = 0; id < cfg_.flags.event_ids; ++id) {
        const Flag& f = flag(static_cast<Pipe>(src), static_cast<Pipe>(dst), id);
        if (f.sets.size() < 2) continue;
        isa::Instr in;
        in.op = Op::kSetFlag;
        in.sync.src = static_cast<Pipe>(src);
        in.sync.dst = static_cast<Pipe>(dst);
        in.sync.id = id;
        in.where = f.sets[1].where;
        fail(in, static_cast<Pipe>(src), "the flag is already set (by " + isa::format_loc(f.sets[0].where) +
                                             ") and never waited for");
      }
    }
  }
  if (san_) {
    const std::vector<std::string> found = san_->finish();
    if (!found.empty()) {
      std::string all = "--sanitize found " + std::to_string(found.size()) + " problem(s) in block " +
                        std::to_string(id_.block) + ":";
      for (const std::string& f : found) all += "\n  " + f;
      throw KernelError(all);
    }
  }
  finished_ = true;
}

}  // namespace npusim::hw::core
