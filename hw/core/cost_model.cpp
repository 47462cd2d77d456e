#include "hw/core/cost_model.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <vector>

#include "common/util/arith.hpp"

namespace npusim::hw::core {

std::uint64_t mmad_cycles(const config::CubeParams& cube, const config::FractalParams& f, std::uint64_t m,
                          std::uint64_t k, std::uint64_t n) {
  if (m == 0 || k == 0 || n == 0) return 0;
  return ceil_div(m, f.m) * ceil_div(n, f.n) * ceil_div(k, f.k) * f.cycles + cube.latency;
}

std::uint64_t vector_datapath_cycles(const config::VectorParams& vec, std::uint64_t repeats) {
  return ceil_div(vec.cycles_per_repeat * repeats * isa::kRepeatBytes, vec.bytes_per_repeat);
}

std::uint64_t vector_cycles(const config::VectorParams& vec, std::uint64_t op_latency, std::uint64_t repeats) {
  if (repeats == 0) return 0;
  return op_latency + vector_datapath_cycles(vec, repeats) - 1;
}

std::uint64_t copy_cycles(const config::PathParams& path, std::uint64_t bytes) {
  if (bytes == 0) return 0;
  // A fractional rate (e.g. 86 B/cycle) still moves whole bytes: the last cycle is partly used.
  return path.setup_cycles + static_cast<std::uint64_t>(std::ceil(static_cast<double>(bytes) / path.bytes_per_cycle));
}

}  // namespace npusim::hw::core

namespace npusim::hw::core {

std::uint64_t vector_op_latency(const config::VectorLatencies& l, isa::Op op) {
  using isa::Op;
  switch (op) {
    case Op::kAdd: return l.add;
    case Op::kSub: return l.sub;
    case Op::kMul: return l.mul;
    case Op::kDiv: return l.div;
    case Op::kMax: return l.max;
    case Op::kMin: return l.min;
    case Op::kFusedMulAdd: return l.mul;
    case Op::kAdds: return l.adds;
    case Op::kMuls: return l.muls;
    case Op::kMaxs: return l.maxs;
    case Op::kMins: return l.mins;
    case Op::kExp: return l.exp;
    case Op::kLn: return l.ln;
    case Op::kAbs: return l.abs;
    case Op::kSqrt: return l.sqrt;
    case Op::kRsqrt: return l.rsqrt;
    case Op::kReciprocal: return l.reciprocal;
    case Op::kRelu: return l.relu;
    case Op::kCast: return l.cast;
    case Op::kDuplicate: case Op::kBrcb: return l.duplicate;
    case Op::kReduceSum: case Op::kReduceMax: case Op::kReduceMin:
    case Op::kBlockReduceSum: case Op::kBlockReduceMax: case Op::kBlockReduceMin: return l.reduce;
    case Op::kCompare: return l.compare;
    case Op::kSelect: return l.select;
    case Op::kTranspose: return l.transpose;
    case Op::kGather: return l.gather;
    default: return 0;
  }
}

namespace {

// The distinct blocks one repeat touches: up to 8 per operand (a repeat is at most 256 B of its widest type), three
// operands read and one written. Fixed storage: this runs for every vector instruction.
struct BlockSet {
  std::array<std::uint64_t, 24> at{};
  std::size_t n = 0;
  void add(std::uint64_t block) {
    for (std::size_t i = 0; i < n; ++i)
      if (at[i] == block) return;  // a block several lanes or operands read is one access
    if (n < at.size()) at[n++] = block;
  }
};

// The most entries of keys[0, n) that share one value: counted in a small table when the keys are small (bank
// groups and banks of any real UB), pairwise otherwise.
std::uint64_t most_alike(const std::uint64_t* keys, std::size_t n) {
  std::uint64_t most = 0;
  std::array<std::uint8_t, 256> count;  // only the entries of the keys are set and read
  if (std::all_of(keys, keys + n, [](std::uint64_t k) { return k < 256; })) {
    for (std::size_t i = 0; i < n; ++i) count[keys[i]] = 0;
    for (std::size_t i = 0; i < n; ++i) most = std::max<std::uint64_t>(most, ++count[keys[i]]);
    return most;
  }
  for (std::size_t i = 0; i < n; ++i) {
    std::uint64_t same = 0;
    for (std::size_t j = 0; j < n; ++j) same += keys[j] == keys[i] ? 1 : 0;
    most = std::max(most, same);
  }
  return most;
}

}  // namespace

std::uint64_t vector_bank_cycles_per_repeat(const config::ChipConfig& cfg, const isa::Instr& in) {
  if (!cfg.vector.bank_conflicts || cfg.buffers.ub.bank_groups == 0 || in.op == isa::Op::kTranspose) return 0;
  const config::UbParams& ub = cfg.buffers.ub;
  const std::uint64_t groups = ub.bank_groups, block = cfg.vector.block_bytes;
  // The blocks of the first repeat, each counted once.
  BlockSet reads, writes;
  const std::uint32_t lanes = isa::vector_lanes(in);
  auto touch = [&](const isa::VecOperand& o, isa::DType t, BlockSet& out) {
    const std::uint64_t blocks = ceil_div(static_cast<std::uint64_t>(lanes) * isa::dtype_bytes(t), block);
    for (std::uint64_t b = 0; b < blocks; ++b) out.add((o.addr + b * o.blk_stride) / block);
  };
  const bool binary = in.op >= isa::Op::kAdd && in.op <= isa::Op::kFusedMulAdd;
  if (in.op == isa::Op::kFusedMulAdd) touch(in.vec.dst, in.dtype, reads);  // dst is read too
  const isa::DType src_t = in.op == isa::Op::kCast ? in.src_dtype : in.dtype;
  if (in.op == isa::Op::kBrcb)
    reads.add(in.vec.src0.addr / block);  // one block of 8 sources
  else if (in.op != isa::Op::kDuplicate)
    touch(in.vec.src0, src_t, reads);
  if (binary || in.op == isa::Op::kCompare || in.op == isa::Op::kSelect) touch(in.vec.src1, src_t, reads);
  const bool reduce = in.op >= isa::Op::kReduceSum && in.op <= isa::Op::kBlockReduceMin;
  if (!reduce && in.op != isa::Op::kCompare) touch(in.vec.dst, in.dtype, writes);
  // Block b sits in group b % groups, and in that group's bank of the (groups x bank_bytes)-sized stripe it falls
  // in (the UB holds banks / groups stripes, so the stripe is the bank's index in its group). A group serves one
  // read and one write a cycle, a bank a read or a write.
  const std::uint64_t stripe_blocks = std::max<std::uint64_t>(1, groups * ub.bank_bytes / block);
  const bool pow2 = (groups & (groups - 1)) == 0;  // the usual case: a mask instead of a division per block
  auto group_of = [&](std::uint64_t b) { return pow2 ? b & (groups - 1) : b % groups; };
  std::array<std::uint64_t, 24> read_groups{}, write_groups{};
  std::array<std::uint64_t, 32> banks{};
  std::size_t nb = 0;
  for (std::size_t i = 0; i < reads.n; ++i) {
    read_groups[i] = group_of(reads.at[i]);
    banks[nb++] = read_groups[i] + groups * (reads.at[i] / stripe_blocks);
  }
  for (std::size_t i = 0; i < writes.n; ++i) {
    write_groups[i] = group_of(writes.at[i]);
    banks[nb++] = write_groups[i] + groups * (writes.at[i] / stripe_blocks);
  }
  return std::max({most_alike(read_groups.data(), reads.n), most_alike(write_groups.data(), writes.n),
                   most_alike(banks.data(), nb)});
}

const config::PathParams* copy_path(const config::ChipConfig& cfg, const isa::Instr& in) {
  using isa::Space;
  const Space d = in.dst_space, s = in.src_space;
  switch (in.op) {
    case isa::Op::kFixpipe: return &cfg.fixpipe;
    case isa::Op::kCopyL0cToUb: return &cfg.mte.l0c_to_ub;
    case isa::Op::kLoad2d: return d == Space::kL0B ? &cfg.mte.l1_to_l0b : &cfg.mte.l1_to_l0a;
    case isa::Op::kLoad3d: return &cfg.mte.l1_to_l0a;  // img2col costs what a LoadData of its bytes does
    case isa::Op::kLoadBias: return &cfg.mte.l1_to_bt;
    case isa::Op::kCopyNd2Nz: return &cfg.mte.gm_to_l1;
    case isa::Op::kCopy:
    case isa::Op::kCopyPad:
      if (s == Space::kGm) return d == Space::kL1 ? &cfg.mte.gm_to_l1 : &cfg.mte.gm_to_ub;
      if (d == Space::kGm) return &cfg.mte.ub_to_gm;
      if (s == Space::kL1 && d == Space::kUb) return &cfg.mte.l1_to_ub;
      if (s == Space::kUb && d == Space::kL1) return &cfg.mte.ub_to_l1;
      return nullptr;
    default: return nullptr;
  }
}

InstrCost instr_cost(const config::ChipConfig& cfg, const isa::Instr& in) {
  using isa::Op;
  InstrCost c;
  if (const config::PathParams* path = copy_path(cfg, in)) {
    const std::uint64_t bytes = isa::payload_bytes(in);
    c.cycles = copy_cycles(*path, bytes);
    c.setup = bytes ? path->setup_cycles : 0;
    if (bytes && (in.src_space == isa::Space::kGm || in.dst_space == isa::Space::kGm)) {
      c.gm = true;
      c.gm_write = in.dst_space == isa::Space::kGm;
      c.gm_addr = c.gm_write ? in.dst : in.src0;
      c.gm_bytes = bytes;
    }
    return c;
  }
  if (in.op == Op::kMmad) {
    const config::FractalParams* f = &cfg.cube.fp16;
    switch (in.src_dtype) {
      case isa::DType::kBf16: f = &cfg.cube.bf16; break;
      case isa::DType::kInt8: f = &cfg.cube.int8; break;
      case isa::DType::kFp32: f = &cfg.cube.fp32; break;
      default: break;
    }
    c.cycles = mmad_cycles(cfg.cube, *f, in.cube.m, in.cube.k, in.cube.n);
    return c;
  }
  if (isa::is_vector_op(in.op)) {
    if (in.vec.repeat == 0) return c;
    // latency + the repeats' datapath time - 1 (vector_cycles), or the busiest bank group's when that is longer.
    const std::uint64_t datapath = vector_datapath_cycles(cfg.vector, in.vec.repeat);
    const std::uint64_t repeats = std::max(datapath, vector_bank_cycles_per_repeat(cfg, in) * in.vec.repeat);
    c.cycles = vector_op_latency(cfg.vector.latency, in.op) + repeats - 1;
    c.bank_cycles = repeats - datapath;
    return c;
  }
  return c;  // synchronisation: no occupancy
}

}  // namespace npusim::hw::core
