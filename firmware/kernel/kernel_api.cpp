#include "firmware/kernel/kernel_api.hpp"

#include "common/util/arith.hpp"
#include "firmware/kernel/context.hpp"

#include <algorithm>
#include <string>

namespace npusim::fw::kernel {

using hw::isa::Instr;
using hw::isa::Op;
using hw::isa::Space;

EventPipes event_pipes(HardEvent e) {
  switch (e) {
    case HardEvent::MTE2_V: return {PIPE_MTE2, PIPE_V};
    case HardEvent::V_MTE2: return {PIPE_V, PIPE_MTE2};
    case HardEvent::V_MTE3: return {PIPE_V, PIPE_MTE3};
    case HardEvent::MTE3_V: return {PIPE_MTE3, PIPE_V};
    case HardEvent::MTE2_MTE1: return {PIPE_MTE2, PIPE_MTE1};
    case HardEvent::MTE1_MTE2: return {PIPE_MTE1, PIPE_MTE2};
    case HardEvent::MTE1_M: return {PIPE_MTE1, PIPE_M};
    case HardEvent::M_MTE1: return {PIPE_M, PIPE_MTE1};
    case HardEvent::M_FIX: return {PIPE_M, PIPE_FIX};
    case HardEvent::FIX_M: return {PIPE_FIX, PIPE_M};
    case HardEvent::M_V: return {PIPE_M, PIPE_V};
    case HardEvent::V_M: return {PIPE_V, PIPE_M};
    case HardEvent::MTE2_S: return {PIPE_MTE2, PIPE_S};
    case HardEvent::S_MTE2: return {PIPE_S, PIPE_MTE2};
    case HardEvent::V_S: return {PIPE_V, PIPE_S};
    case HardEvent::S_V: return {PIPE_S, PIPE_V};
    case HardEvent::MTE3_S: return {PIPE_MTE3, PIPE_S};
    case HardEvent::S_MTE3: return {PIPE_S, PIPE_MTE3};
    case HardEvent::MTE3_MTE2: return {PIPE_MTE3, PIPE_MTE2};
    case HardEvent::MTE2_MTE3: return {PIPE_MTE2, PIPE_MTE3};
    case HardEvent::FIX_S: return {PIPE_FIX, PIPE_S};
    case HardEvent::S_FIX: return {PIPE_S, PIPE_FIX};
    case HardEvent::FIX_MTE2: return {PIPE_FIX, PIPE_MTE2};
    case HardEvent::MTE2_FIX: return {PIPE_MTE2, PIPE_FIX};
    case HardEvent::MTE1_V: return {PIPE_MTE1, PIPE_V};
    case HardEvent::V_MTE1: return {PIPE_V, PIPE_MTE1};
    case HardEvent::MTE2_M: return {PIPE_MTE2, PIPE_M};
    case HardEvent::M_MTE2: return {PIPE_M, PIPE_MTE2};
    case HardEvent::MTE3_MTE1: return {PIPE_MTE3, PIPE_MTE1};
    case HardEvent::MTE1_MTE3: return {PIPE_MTE1, PIPE_MTE3};
    case HardEvent::M_S: return {PIPE_M, PIPE_S};
    case HardEvent::S_M: return {PIPE_S, PIPE_M};
    case HardEvent::FIX_MTE3: return {PIPE_FIX, PIPE_MTE3};
    case HardEvent::MTE3_FIX: return {PIPE_MTE3, PIPE_FIX};
    case HardEvent::MTE1_FIX: return {PIPE_MTE1, PIPE_FIX};
    case HardEvent::FIX_MTE1: return {PIPE_FIX, PIPE_MTE1};
    case HardEvent::V_V: return {PIPE_V, PIPE_V};
    case HardEvent::FIX_FIX: return {PIPE_FIX, PIPE_FIX};
  }
  return {PIPE_S, PIPE_S};
}

Space position_space(TPosition p) {
  switch (p) {
    case TPosition::GM: return Space::kGm;
    case TPosition::VECIN: case TPosition::VECOUT: case TPosition::VECCALC: case TPosition::CO2: return Space::kUb;
    case TPosition::A1: case TPosition::B1: return Space::kL1;
    case TPosition::A2: return Space::kL0A;
    case TPosition::B2: return Space::kL0B;
    case TPosition::CO1: return Space::kL0C;
    case TPosition::C2: return Space::kBiasTable;
  }
  return Space::kUb;
}

namespace detail {

// A pipe instruction costs its API call's scalar work (scalar.api_call_cycles) on top of its issue; a flag or barrier
// is one instruction of its own (the TQue calls that issue them account theirs in queue_call below).
void issue(Instr in) {
  hw::core::CoreEngine& e = *ctx().engine;
  e.issue(in, hw::isa::is_sync_op(in.op) ? 0 : e.config().scalar.api_call_cycles);
}

void scalar_read(Space s, std::uint64_t addr, void* out, std::uint64_t bytes, SourceLoc where) {
  ctx().engine->scalar_read(s, addr, out, bytes, where);
}

void scalar_write(Space s, std::uint64_t addr, const void* in, std::uint64_t bytes, SourceLoc where) {
  ctx().engine->scalar_write(s, addr, in, bytes, where);
}

std::uint64_t gm_address(const void* p, std::uint64_t bytes, const char* api, SourceLoc where) {
  const KernelContext& c = ctx();
  std::uint64_t addr = 0;
  if (!c.gm_view) bad_param(api, "a pointer form needs a kernel launched through the SDK (GM_ADDR arguments)", where);
  if (!c.gm_view->device_address(p, bytes, addr)) {
    bad_param(api, "the pointer (with " + std::to_string(bytes) + " B after it) is not in device memory: pass a GM_ADDR "
              "argument of the kernel, or an offset from one", where);
  }
  return addr;
}

void bad_param(const std::string& api, const std::string& what, SourceLoc where) {
  const KernelContext& c = ctx();
  throw hw::core::KernelError("core " + c.engine->identity().name + " (block " + std::to_string(c.block_idx) + "): " +
                              api + " at " + hw::isa::format_loc(where) + ": " + what);
}

Instr load3d_instr(Space dst_space, std::uint64_t dst, Space src_space, std::uint64_t src, hw::isa::DType t,
                   const LoadData3DParams& p, SourceLoc where) {
  const char* api = "LoadData(LoadData3DParams)";
  if (src_space != Space::kL1) bad_param(api, "the feature map must be in L1", where);
  if (dst_space != Space::kL0A) bad_param(api, "img2col into L0A is modelled (into L0B, transposed, it is not)", where);
  const std::uint32_t c0 = 32 / hw::isa::dtype_bytes(t);
  auto need = [&](bool ok, const std::string& what) {
    if (!ok) bad_param(api, what, where);
  };
  need(p.l1H > 0 && p.l1W > 0, "l1H and l1W must be positive");
  need(p.channelSize > 0 && p.channelSize % c0 == 0, "channelSize " + std::to_string(p.channelSize) +
                                                         " must be a positive multiple of C0 = " + std::to_string(c0) +
                                                         " (the 4- and 8-channel forms are not modelled)");
  need(p.strideW >= 1 && p.strideW <= 63 && p.strideH >= 1 && p.strideH <= 63, "strides must be in 1..63");
  need(p.filterW >= 1 && p.filterW <= 511 && p.filterH >= 1 && p.filterH <= 511, "filter sizes must be in 1..511");
  need(p.dilationFilterW >= 1 && p.dilationFilterH >= 1, "dilations must be at least 1");
  Instr in;
  in.op = Op::kLoad3d;
  in.dtype = in.src_dtype = t;
  in.dst_space = dst_space;
  in.src_space = src_space;
  in.dst = dst;
  in.src0 = src;
  in.where = where;
  hw::isa::Img2colArgs& g = in.img2col;
  g.l1_h = p.l1H;
  g.l1_w = p.l1W;
  g.channels = p.channelSize;
  g.kh = p.filterH;
  g.kw = p.filterW;
  g.sh = p.strideH;
  g.sw = p.strideW;
  g.dh = p.dilationFilterH;
  g.dw = p.dilationFilterW;
  for (int i = 0; i < 4; ++i) g.pad[i] = p.padList[i];
  g.pad_value = p.padValue;
  g.m_start = p.mStartPt;
  g.m_ext = p.mExtension;
  g.k_start = p.kStartPt;
  g.k_ext = p.kExtension;
  need(hw::isa::img2col_out(g.l1_w, g.pad[0] + g.pad[1], g.kw, g.sw, g.dw) > 0 &&
           hw::isa::img2col_out(g.l1_h, g.pad[2] + g.pad[3], g.kh, g.sh, g.dh) > 0,
       "the dilated filter is larger than the padded map");
  const std::uint64_t k_total = std::uint64_t{g.channels} * g.kh * g.kw;
  need(g.k_ext > 0 && g.k_start % c0 == 0 && g.k_ext % c0 == 0,
       "kStartPt and kExtension must be multiples of C0 = " + std::to_string(c0) + " and kExtension positive");
  need(g.k_start + g.k_ext <= k_total, "kStartPt + kExtension = " + std::to_string(g.k_start + g.k_ext) +
                                           " is past K = channelSize x filterH x filterW = " + std::to_string(k_total));
  need(g.m_ext > 0, "mExtension must be positive");
  return in;
}

Instr copy_instr(Space dst_space, std::uint64_t dst, Space src_space, std::uint64_t src, std::uint32_t nburst,
                 std::uint32_t burst_bytes, std::uint32_t src_gap, std::uint32_t dst_gap, SourceLoc where) {
  Instr in;
  in.op = Op::kCopy;
  in.dst_space = dst_space;
  in.src_space = src_space;
  in.dst = dst;
  in.src0 = src;
  in.copy.nburst = nburst;
  in.copy.burst_bytes = burst_bytes;
  in.copy.src_gap = src_gap;
  in.copy.dst_gap = dst_gap;
  in.where = where;
  if (nburst == 0 || nburst > 4095) bad_param("DataCopy", "blockCount must be 1..4095, got " + std::to_string(nburst), where);
  return in;
}

hw::isa::Round to_round(RoundMode m) {
  switch (m) {
    case RoundMode::CAST_RINT: case RoundMode::CAST_NONE: return hw::isa::Round::kNearestEven;
    case RoundMode::CAST_ROUND: return hw::isa::Round::kNearestAway;
    case RoundMode::CAST_FLOOR: return hw::isa::Round::kFloor;
    case RoundMode::CAST_CEIL: return hw::isa::Round::kCeil;
    case RoundMode::CAST_TRUNC: return hw::isa::Round::kTowardZero;
  }
  return hw::isa::Round::kNearestEven;
}

namespace {
Instr vec_instr(const VecSpec& s, SourceLoc where) {
  Instr in;
  in.op = s.op;
  in.dtype = s.dtype;
  in.src_dtype = s.src_dtype;
  in.vec.dst.addr = s.dst;
  in.vec.src0.addr = s.src0;
  in.vec.src1.addr = s.src1;
  in.vec.scalar = s.scalar;
  in.vec.round = s.round;
  in.vec.cmp = s.cmp;
  in.src1 = s.sel_mask;
  in.where = where;
  return in;
}
}  // namespace

void vec_count(const VecSpec& s, std::uint64_t count, SourceLoc where) {
  KernelContext& c = ctx();
  Instr base = vec_instr(s, where);
  const std::uint32_t lanes = hw::isa::vector_lanes(base);
  const std::uint32_t ds = hw::isa::dtype_bytes(s.dtype), ss = hw::isa::dtype_bytes(s.src_dtype);
  const bool bits_out = s.op == Op::kCompare, bits_in = s.op == Op::kSelect;
  // Bit masks take lanes/8 bytes per repeat; every instruction's mask must start 32 B-aligned, so the count form
  // takes whole 32 B blocks of mask (256 elements) and splits at even repeat counts.
  std::uint64_t max_rep = std::max<std::uint64_t>(c.engine->config().vector.max_repeat, 1);
  if (bits_out || bits_in) {
    if (count % 256 != 0) {
      bad_param(std::string(hw::isa::op_name(s.op)), "count " + std::to_string(count) +
                    " is not a multiple of 256: the bit mask would not fill whole 32 B blocks (use the repeat form)",
                where);
    }
    if (lanes / 8 < 32) max_rep -= max_rep % (32 / (lanes / 8));
  }
  const std::uint32_t dst_step = bits_out ? lanes / 8 : lanes * ds;
  const std::uint32_t src_step = lanes * (s.op == Op::kCast ? ss : ds);
  std::uint64_t done = 0;  // repeats issued so far
  const std::uint64_t full = count / lanes, tail = count % lanes;
  std::uint64_t call_cycles =
      c.engine->config().scalar.api_call_cycles;  // the call's, charged to its first instruction
  auto emit = [&](std::uint64_t first, std::uint64_t repeats, const hw::isa::Mask& mask) {
    Instr in = base;
    in.vec.repeat = static_cast<std::uint32_t>(repeats);
    in.vec.mask = mask;
    in.vec.dst.addr = s.dst + first * dst_step;
    in.vec.src0.addr = s.src0 + first * src_step;
    in.vec.src1.addr = s.src1 + first * src_step;
    if (s.op == Op::kGather) {  // offsets are relative to the one source base; one uint32 per lane
      in.vec.src0.addr = s.src0;
      in.vec.src1.addr = s.src1 + first * lanes * 4;
    }
    in.src1 = s.sel_mask + first * (lanes / 8);
    in.vec.dst.rep_stride = bits_out ? 0 : lanes * ds;
    in.vec.src0.rep_stride = in.vec.src1.rep_stride = src_step;
    c.engine->issue(in, call_cycles);
    call_cycles = 0;
  };
  while (done < full) {
    const std::uint64_t n = std::min(max_rep, full - done);
    emit(done, n, hw::isa::Mask::count(lanes));
    done += n;
  }
  if (tail) emit(done, 1, hw::isa::Mask::count(static_cast<std::uint32_t>(tail)));
}

void vec_repeat(const VecSpec& s, const hw::isa::Mask& mask, std::uint32_t repeat,
                const std::array<std::uint32_t, 6>& st, std::uint32_t dst_rep_elems, SourceLoc where) {
  KernelContext& c = ctx();
  if (repeat > c.engine->config().vector.max_repeat) {
    bad_param(std::string(hw::isa::op_name(s.op)), "repeat " + std::to_string(repeat) + " exceeds vector.max_repeat " +
                                                       std::to_string(c.engine->config().vector.max_repeat), where);
  }
  Instr in = vec_instr(s, where);
  in.vec.repeat = repeat;
  in.vec.mask = mask;
  in.vec.dst.blk_stride = st[0] * 32;
  in.vec.src0.blk_stride = st[1] * 32;
  in.vec.src1.blk_stride = st[2] * 32;
  in.vec.dst.rep_stride = st[3] * 32;
  in.vec.src0.rep_stride = st[4] * 32;
  in.vec.src1.rep_stride = st[5] * 32;
  in.vec.dst_rep_elems = dst_rep_elems;
  issue(in);
}

}  // namespace detail

// --- TQue ---------------------------------------------------------------------------------------------------------

TQueBase::TQueBase(TPosition pos) : pos_(pos) {
  switch (pos) {
    case TPosition::VECIN: producer_ = PIPE_MTE2; consumer_ = PIPE_V; break;
    case TPosition::VECOUT: case TPosition::CO2: producer_ = PIPE_V; consumer_ = PIPE_MTE3; break;
    case TPosition::A1: case TPosition::B1: producer_ = PIPE_MTE2; consumer_ = PIPE_MTE1; break;
    case TPosition::A2: case TPosition::B2: case TPosition::C2: producer_ = PIPE_MTE1; consumer_ = PIPE_M; break;
    case TPosition::CO1: producer_ = PIPE_M; consumer_ = PIPE_FIX; break;
    default: producer_ = consumer_ = PIPE_S; break;
  }
}

std::size_t TQueBase::slot_of(std::uint64_t addr, const char* what, SourceLoc where) const {
  for (std::size_t i = 0; i < buffers_.size(); ++i)
    if (buffers_[i].addr == addr) return i;
  detail::bad_param(what, "the tensor does not belong to this queue", where);
}

namespace {
// A TQue call's bookkeeping on the scalar unit (which buffer is next, its state), before any flag it issues.
void queue_call() {
  hw::core::CoreEngine& e = *ctx().engine;
  if (const std::uint64_t c = e.config().scalar.queue_call_cycles) e.scalar_work(c);
}
}  // namespace

std::uint64_t TQueBase::alloc_raw(SourceLoc where) {
  if (buffers_.empty()) detail::bad_param("AllocTensor", "the queue has no buffers (missing TPipe::InitBuffer)", where);
  queue_call();
  Buffer& b = buffers_[allocs_++ % buffers_.size()];
  // The buffer is free once its consumer said so; the first use of each buffer needs no wait.
  if (b.used_before) wait_flag(consumer_, producer_, b.free_event, where);
  b.used_before = true;
  b.outstanding = true;
  b.free_pending = false;
  b.alloc_at = where;
  return b.addr;
}

TQueBase::~TQueBase() {
  try {
    hw::core::Sanitizer* san = ctx().engine->sanitizer();
    if (!san) return;
    for (const Buffer& b : buffers_) {
      if (b.outstanding) {
        san->report("a queue buffer (" + std::string(hw::isa::space_name(position_space(pos_))) + ") taken by " +
                    "AllocTensor at " + hw::isa::format_loc(b.alloc_at) + " is never given back by FreeTensor");
      } else if (b.free_pending) {
        san->forget_pending(to_pipe(consumer_), to_pipe(producer_), b.free_event);
      }
    }
  } catch (...) {
    // Outside a kernel (or while one unwinds from an error): nothing to check.
  }
}

namespace detail {
void expect_left_set(pipe_t src, pipe_t dst, std::uint32_t id) noexcept {
  try {
    if (hw::core::Sanitizer* san = ctx().engine->sanitizer()) san->forget_pending(to_pipe(src), to_pipe(dst), id);
  } catch (...) {
  }
}
}  // namespace detail

void TQueBase::enque_raw(std::uint64_t addr, SourceLoc where) {
  queue_call();
  set_flag(producer_, consumer_, buffers_[slot_of(addr, "EnQue", where)].enq_event, where);
}

std::uint64_t TQueBase::deque_raw(SourceLoc where) {
  if (buffers_.empty()) detail::bad_param("DeQue", "the queue has no buffers (missing TPipe::InitBuffer)", where);
  queue_call();
  // Buffers come out in the order they were allocated; the wait is the hardware's, so a missing EnQue blocks the
  // consumer pipe for real and is reported as a deadlock.
  Buffer& b = buffers_[deques_++ % buffers_.size()];
  wait_flag(producer_, consumer_, b.enq_event, where);
  return b.addr;
}

void TQueBase::free_raw(std::uint64_t addr, SourceLoc where) {
  Buffer& b = buffers_[slot_of(addr, "FreeTensor", where)];
  queue_call();
  set_flag(consumer_, producer_, b.free_event, where);
  b.outstanding = false;
  b.free_pending = true;
}

// --- TPipe --------------------------------------------------------------------------------------------------------

TPipe::TPipe() {
  KernelContext& c = ctx();
  c.next_free.fill(0);
  c.next_event.fill(0);
}

std::uint64_t TPipe::allocate(Space s, std::uint64_t bytes, SourceLoc where) {
  KernelContext& c = ctx();
  const std::uint64_t align = c.engine->buffer_align(s), size = c.engine->buffer_size(s);
  std::uint64_t& next = c.next_free[static_cast<int>(s)];
  const std::uint64_t addr = ceil_to(next, align);
  const std::uint64_t rounded = ceil_to(bytes, align);
  if (size == 0 || addr + rounded > size) {
    detail::bad_param("TPipe::InitBuffer", std::to_string(bytes) + " B in " + std::string(hw::isa::space_name(s)) +
                                               " does not fit: " + std::to_string(addr) + " B of " +
                                               std::to_string(size) + " B are already allocated", where);
  }
  next = addr + rounded;
  std::uint64_t& peak = c.peak[static_cast<int>(s)];
  peak = std::max(peak, next);
  return addr;
}

std::uint32_t TPipe::AllocEventID(pipe_t src, pipe_t dst, SourceLoc where) {
  KernelContext& c = ctx();
  std::uint32_t& next = c.next_event[static_cast<int>(src) * hw::isa::kPipeCount + static_cast<int>(dst)];
  if (next >= c.engine->config().flags.event_ids) {
    detail::bad_param("TPipe", "all " + std::to_string(c.engine->config().flags.event_ids) + " event ids of " +
                                   std::string(hw::isa::pipe_name(to_pipe(src))) + "->" +
                                   std::string(hw::isa::pipe_name(to_pipe(dst))) + " are in use (flags.event_ids)",
                      where);
  }
  return next++;
}

std::uint32_t TPipe::FetchEventID(HardEvent e, SourceLoc where) {
  const KernelContext& c = ctx();
  const EventPipes p = event_pipes(e);
  const std::uint32_t next = c.next_event[static_cast<int>(p.src) * hw::isa::kPipeCount + static_cast<int>(p.dst)];
  if (next >= c.engine->config().flags.event_ids) {
    detail::bad_param("TPipe::FetchEventID", "all " + std::to_string(c.engine->config().flags.event_ids) +
                                                 " event ids of the pipe pair are in use (flags.event_ids)", where);
  }
  return next;
}

void TPipe::release_event(pipe_t src, pipe_t dst, std::uint32_t id, SourceLoc where) {
  std::uint32_t& next = ctx().next_event[static_cast<int>(src) * hw::isa::kPipeCount + static_cast<int>(dst)];
  if (next == 0 || id != next - 1) {
    detail::bad_param("TPipe::ReleaseEventID", "event id " + std::to_string(id) +
                                                   " is not the most recently allocated one of its pipe pair", where);
  }
  --next;
}

void TPipe::InitBuffer(TQueBase& que, std::uint32_t num, std::uint64_t bytes, SourceLoc where) {
  if (num == 0) detail::bad_param("TPipe::InitBuffer", "buffer_num must be at least 1", where);
  if (!que.buffers_.empty()) detail::bad_param("TPipe::InitBuffer", "the queue is already initialised", where);
  que.buffer_bytes_ = bytes;
  for (std::uint32_t i = 0; i < num; ++i) {
    TQueBase::Buffer b;
    b.addr = allocate(position_space(que.pos_), bytes, where);
    b.enq_event = AllocEventID(que.producer_, que.consumer_, where);
    b.free_event = AllocEventID(que.consumer_, que.producer_, where);
    que.buffers_.push_back(b);
  }
}

// --- Queries and synchronisation ----------------------------------------------------------------------------------

std::uint32_t GetBlockIdx() { return ctx().block_idx; }
std::uint32_t GetBlockNum() { return ctx().block_num; }
std::uint32_t GetSubBlockIdx() { return ctx().sub_block_idx; }
std::uint32_t GetSubBlockNum() { return ctx().sub_block_num; }
bool IsAic() { return ctx().engine->identity().kind == hw::core::CoreKind::kCube; }
bool IsAiv() { return ctx().engine->identity().kind == hw::core::CoreKind::kVector; }
void ScalarWork(std::uint64_t cycles) { ctx().engine->scalar_work(cycles); }

namespace {
Instr sync_instr(Op op, pipe_t pipe, SourceLoc where) {
  Instr in;
  in.op = op;
  in.pipe = to_pipe(pipe);
  in.where = where;
  return in;
}
}  // namespace

void set_flag(pipe_t src, pipe_t dst, std::uint32_t id, SourceLoc where) {
  Instr in = sync_instr(Op::kSetFlag, src, where);
  in.sync.src = to_pipe(src);
  in.sync.dst = to_pipe(dst);
  in.sync.id = id;
  detail::issue(in);
}

void wait_flag(pipe_t src, pipe_t dst, std::uint32_t id, SourceLoc where) {
  Instr in = sync_instr(Op::kWaitFlag, dst, where);
  in.sync.src = to_pipe(src);
  in.sync.dst = to_pipe(dst);
  in.sync.id = id;
  detail::issue(in);
}

void pipe_barrier(pipe_t p, SourceLoc where) {
  Instr in = sync_instr(Op::kBarrier, p, where);
  in.sync.src = to_pipe(p);
  detail::issue(in);
}

void cross_core_set_flag(std::uint32_t mode, pipe_t pipe, std::uint32_t id, SourceLoc where) {
  Instr in = sync_instr(Op::kCrossSet, pipe, where);
  in.sync.mode = mode;
  in.sync.id = id;
  detail::issue(in);
}

void cross_core_wait_flag(std::uint32_t id, pipe_t pipe, SourceLoc where) {
  Instr in = sync_instr(Op::kCrossWait, pipe, where);
  in.sync.id = id;
  detail::issue(in);
}

}  // namespace npusim::fw::kernel
