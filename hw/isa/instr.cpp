#include "hw/isa/instr.hpp"

#include <algorithm>
#include <cstdio>
#include <string>

#include "common/util/arith.hpp"

namespace npusim::hw::isa {

std::string_view pipe_name(Pipe p) {
  switch (p) {
    case Pipe::kS: return "S";
    case Pipe::kMte1: return "MTE1";
    case Pipe::kMte2: return "MTE2";
    case Pipe::kMte3: return "MTE3";
    case Pipe::kM: return "M";
    case Pipe::kV: return "V";
    case Pipe::kFix: return "FIX";
    case Pipe::kAll: return "ALL";
  }
  return "?";
}

std::string_view pipe_metric_name(Pipe p) {
  switch (p) {
    case Pipe::kS: return "scalar";
    case Pipe::kMte1: return "mte1";
    case Pipe::kMte2: return "mte2";
    case Pipe::kMte3: return "mte3";
    case Pipe::kM: return "cube";
    case Pipe::kV: return "vector";
    case Pipe::kFix: return "fixpipe";
    case Pipe::kAll: return "all";
  }
  return "?";
}

std::string_view space_name(Space s) {
  switch (s) {
    case Space::kGm: return "GM";
    case Space::kL1: return "L1";
    case Space::kL0A: return "L0A";
    case Space::kL0B: return "L0B";
    case Space::kL0C: return "L0C";
    case Space::kUb: return "UB";
    case Space::kBiasTable: return "BT";
    case Space::kFixpipeBuffer: return "FB";
  }
  return "?";
}

std::string_view op_name(Op op) {
  switch (op) {
    case Op::kCopy: return "DataCopy";
    case Op::kCopyPad: return "DataCopyPad";
    case Op::kCopyNd2Nz: return "DataCopyNd2Nz";
    case Op::kLoad2d: return "LoadData";
    case Op::kLoad3d: return "LoadData3D";
    case Op::kLoadBias: return "DataCopyBias";
    case Op::kMmad: return "Mmad";
    case Op::kFixpipe: return "Fixpipe";
    case Op::kCopyL0cToUb: return "DataCopyL0cToUb";
    case Op::kAdd: return "Add";
    case Op::kSub: return "Sub";
    case Op::kMul: return "Mul";
    case Op::kDiv: return "Div";
    case Op::kMax: return "Max";
    case Op::kMin: return "Min";
    case Op::kFusedMulAdd: return "FusedMulAdd";
    case Op::kAdds: return "Adds";
    case Op::kMuls: return "Muls";
    case Op::kMaxs: return "Maxs";
    case Op::kMins: return "Mins";
    case Op::kExp: return "Exp";
    case Op::kLn: return "Ln";
    case Op::kAbs: return "Abs";
    case Op::kSqrt: return "Sqrt";
    case Op::kRsqrt: return "Rsqrt";
    case Op::kReciprocal: return "Reciprocal";
    case Op::kRelu: return "Relu";
    case Op::kCast: return "Cast";
    case Op::kDuplicate: return "Duplicate";
    case Op::kBrcb: return "Brcb";
    case Op::kReduceSum: return "WholeReduceSum";
    case Op::kReduceMax: return "WholeReduceMax";
    case Op::kReduceMin: return "WholeReduceMin";
    case Op::kBlockReduceSum: return "BlockReduceSum";
    case Op::kBlockReduceMax: return "BlockReduceMax";
    case Op::kBlockReduceMin: return "BlockReduceMin";
    case Op::kCompare: return "Compare";
    case Op::kSelect: return "Select";
    case Op::kTranspose: return "Transpose";
    case Op::kGather: return "Gather";
    case Op::kSetFlag: return "set_flag";
    case Op::kWaitFlag: return "wait_flag";
    case Op::kBarrier: return "pipe_barrier";
    case Op::kCrossSet: return "CrossCoreSetFlag";
    case Op::kCrossWait: return "CrossCoreWaitFlag";
    case Op::kScalar: return "scalar";
  }
  return "?";
}

std::uint32_t img2col_out(std::uint32_t in, std::uint32_t pads, std::uint32_t k, std::uint32_t s, std::uint32_t d) {
  const std::uint64_t span = (std::uint64_t{k} - 1) * d + 1, padded = std::uint64_t{in} + pads;
  if (k == 0 || s == 0 || span > padded) return 0;
  return static_cast<std::uint32_t>((padded - span) / s + 1);
}

bool is_vector_op(Op op) { return op >= Op::kAdd && op <= Op::kGather; }
bool is_sync_op(Op op) {
  return op >= Op::kSetFlag && op <= Op::kCrossWait;
}

std::string format_loc(const SourceLoc& loc) {
  std::string f = loc.file ? loc.file : "";
  const auto slash = f.find_last_of('/');
  if (slash != std::string::npos) f = f.substr(slash + 1);
  return (f.empty() ? std::string("?") : f) + ":" + std::to_string(loc.line);
}

std::uint32_t vector_lanes(const Instr& in) {
  std::uint32_t widest = dtype_bytes(in.dtype);
  if (in.op == Op::kCast) widest = std::max(widest, dtype_bytes(in.src_dtype));
  return kRepeatBytes / widest;
}

std::uint64_t payload_bytes(const Instr& in) {
  const CopyArgs& c = in.copy;
  switch (in.op) {
    case Op::kCopy:
    case Op::kCopyL0cToUb:
    case Op::kCopyPad: return static_cast<std::uint64_t>(c.nburst) * c.burst_bytes;
    case Op::kCopyNd2Nz: return static_cast<std::uint64_t>(c.rows) * c.cols * dtype_bytes(in.dtype);
    case Op::kLoad2d: return static_cast<std::uint64_t>(c.repeat) * 512;
    case Op::kLoad3d: return ceil_to(std::uint64_t{in.img2col.m_ext}, 16) * in.img2col.k_ext * dtype_bytes(in.dtype);
    case Op::kLoadBias: return static_cast<std::uint64_t>(c.cols) * 4;
    case Op::kFixpipe: return static_cast<std::uint64_t>(in.cube.m) * in.cube.n * dtype_bytes(in.dtype);
    default: return 0;
  }
}

std::uint32_t gm_segments(const Instr& in) {
  const CopyArgs& c = in.copy;
  switch (in.op) {
    case Op::kCopy:
    case Op::kCopyPad: {
      const std::uint32_t gap = in.src_space == Space::kGm ? c.src_gap : c.dst_gap;
      if (in.src_space != Space::kGm && in.dst_space != Space::kGm) return 0;
      return gap == 0 ? 1 : c.nburst;
    }
    case Op::kCopyNd2Nz: return c.src_row_stride == c.cols ? 1 : c.rows;
    case Op::kFixpipe:
      if (in.dst_space != Space::kGm) return 0;
      return in.cube.dst_row_stride == in.cube.n ? 1 : in.cube.m;
    default: return 0;
  }
}

Segment gm_segment(const Instr& in, std::uint32_t i) {
  const CopyArgs& c = in.copy;
  const bool contiguous = gm_segments(in) == 1;
  switch (in.op) {
    case Op::kCopy:
    case Op::kCopyPad: {
      const bool read = in.src_space == Space::kGm;
      const std::uint64_t base = read ? in.src0 : in.dst;
      const std::uint64_t gap = read ? c.src_gap : c.dst_gap;
      if (contiguous) return {base, static_cast<std::uint64_t>(c.nburst) * c.burst_bytes};
      return {base + i * (c.burst_bytes + gap), c.burst_bytes};
    }
    case Op::kCopyNd2Nz: {
      const std::uint64_t es = dtype_bytes(in.dtype);
      if (contiguous) return {in.src0, static_cast<std::uint64_t>(c.rows) * c.cols * es};
      return {in.src0 + i * static_cast<std::uint64_t>(c.src_row_stride) * es, c.cols * es};
    }
    case Op::kFixpipe: {
      const std::uint64_t ds = dtype_bytes(in.dtype);
      if (contiguous) return {in.dst, static_cast<std::uint64_t>(in.cube.m) * in.cube.n * ds};
      return {in.dst + i * static_cast<std::uint64_t>(in.cube.dst_row_stride) * ds, in.cube.n * ds};
    }
    default: return {};
  }
}

namespace {
std::string hex(std::uint64_t v) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(v));
  return buf;
}
std::string at(Space s, std::uint64_t a) { return std::string(space_name(s)) + "[" + hex(a) + "]"; }
}  // namespace

std::string describe(const Instr& in) {
  std::string s(op_name(in.op));
  switch (in.op) {
    case Op::kSetFlag:
    case Op::kWaitFlag:
      return s + "(" + std::string(pipe_name(in.sync.src)) + "->" + std::string(pipe_name(in.sync.dst)) + ", id " +
             std::to_string(in.sync.id) + ")";
    case Op::kBarrier: return s + "(" + std::string(pipe_name(in.sync.src)) + ")";
    case Op::kCrossSet: return s + "(mode " + std::to_string(in.sync.mode) + ", id " + std::to_string(in.sync.id) + ")";
    case Op::kCrossWait: return s + "(id " + std::to_string(in.sync.id) + ")";
    case Op::kScalar: return s + "(" + std::to_string(in.sync.scalar_cycles) + " cycles)";
    case Op::kMmad:
      return s + " " + std::string(dtype_name(in.src_dtype)) + " m=" + std::to_string(in.cube.m) +
             " k=" + std::to_string(in.cube.k) + " n=" + std::to_string(in.cube.n) + " " + at(Space::kL0C, in.dst) +
             " <- " + at(Space::kL0A, in.src0) + ", " + at(Space::kL0B, in.src1);
    default: break;
  }
  if (is_vector_op(in.op)) {
    return s + " " + std::string(dtype_name(in.dtype)) + " repeat=" + std::to_string(in.vec.repeat) + " " +
           at(Space::kUb, in.vec.dst.addr) + " <- " + at(Space::kUb, in.vec.src0.addr);
  }
  return s + " " + std::to_string(payload_bytes(in)) + " B " + at(in.dst_space, in.dst) + " <- " +
         at(in.src_space, in.src0);
}

}  // namespace npusim::hw::isa

namespace npusim::hw::isa {
Pipe pipe_of(const Instr& in) {
  switch (in.op) {
    case Op::kCopy:
    case Op::kCopyPad: {
      const Space d = in.dst_space, s = in.src_space;
      if (s == Space::kGm && (d == Space::kUb || d == Space::kL1)) return Pipe::kMte2;
      if (d == Space::kGm && s == Space::kUb) return Pipe::kMte3;
      if (in.op == Op::kCopy && s == Space::kL1 && d == Space::kUb) return Pipe::kMte1;
      if (in.op == Op::kCopy && s == Space::kUb && d == Space::kL1) return Pipe::kMte3;
      return Pipe::kAll;
    }
    case Op::kCopyNd2Nz: return Pipe::kMte2;
    case Op::kLoad2d:
    case Op::kLoad3d:
    case Op::kLoadBias: return Pipe::kMte1;
    case Op::kMmad: return Pipe::kM;
    case Op::kFixpipe: return Pipe::kFix;
    case Op::kCopyL0cToUb: return Pipe::kV;
    case Op::kSetFlag: case Op::kWaitFlag: case Op::kBarrier: case Op::kCrossSet: case Op::kCrossWait:
    case Op::kScalar: return in.pipe;
    default: return Pipe::kV;
  }
}
}  // namespace npusim::hw::isa
