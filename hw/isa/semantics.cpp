#include "hw/isa/semantics.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "common/util/arith.hpp"
#include "common/util/error.hpp"

namespace npusim::hw::isa {
namespace {

constexpr std::uint64_t kFractalBytes = 512;

// double -> float with a rounding mode (for int32 -> fp32 casts, where the int is exact in double).
float narrow(double d, Round mode) {
  float f = static_cast<float>(d);  // to nearest, ties to even
  if (static_cast<double>(f) == d || std::isnan(d)) return f;
  const float up = static_cast<double>(f) > d ? f : std::nextafter(f, std::numeric_limits<float>::infinity());
  const float down = static_cast<double>(f) < d ? f : std::nextafter(f, -std::numeric_limits<float>::infinity());
  switch (mode) {
    case Round::kNearestEven: return f;
    case Round::kNearestAway: {
      const double du = static_cast<double>(up) - d, dd = d - static_cast<double>(down);
      if (du == dd) return d > 0 ? up : down;
      return du < dd ? up : down;
    }
    case Round::kFloor: return down;
    case Round::kCeil: return up;
    case Round::kTowardZero: return d > 0 ? down : up;
  }
  return f;
}

std::int64_t load_i(const std::uint8_t* p, DType t) {
  if (t == DType::kInt8) return static_cast<std::int8_t>(*p);
  std::int32_t i;
  std::memcpy(&i, p, 4);
  return i;
}

void store_i(std::uint8_t* p, DType t, std::int64_t v) {
  if (t == DType::kInt8) {
    *p = static_cast<std::uint8_t>(static_cast<std::int8_t>(v));
    return;
  }
  const auto i = static_cast<std::int32_t>(static_cast<std::uint32_t>(v));  // two's complement wrap
  std::memcpy(p, &i, 4);
}

[[noreturn]] void unsupported(const Instr& in, std::string_view what) {
  throw InputError(std::string(op_name(in.op)) + ": " + std::string(what) + " (" + format_loc(in.where) + ")");
}

// Address of lane `l` of repeat `r` of a strided operand with elements of `esize` bytes.
std::uint64_t lane_addr(const VecOperand& o, std::uint32_t r, std::uint32_t l, std::uint32_t esize) {
  const std::uint32_t per_block = 32 / esize;
  return o.addr + static_cast<std::uint64_t>(r) * o.rep_stride +
         static_cast<std::uint64_t>(l / per_block) * o.blk_stride + static_cast<std::uint64_t>(l % per_block) * esize;
}

std::uint64_t operand_extent(const VecOperand& o, std::uint32_t repeat, std::uint32_t lanes, std::uint32_t esize) {
  const std::uint64_t blocks = ceil_div(static_cast<std::uint64_t>(lanes) * esize, 32);
  return static_cast<std::uint64_t>(repeat - 1) * o.rep_stride + (blocks - 1) * o.blk_stride + 32;
}

// Local-buffer view of the whole UB for vector instructions.
struct Ub {
  std::uint8_t* base;
  std::uint8_t* at(std::uint64_t a) const { return base + a; }
};

float apply_binary(Op op, float a, float b) {
  switch (op) {
    case Op::kAdd: case Op::kAdds: return a + b;
    case Op::kSub: return a - b;
    case Op::kMul: case Op::kMuls: return a * b;
    case Op::kDiv: return a / b;
    // NaN propagates; otherwise the larger (smaller) operand, the first one on ties.
    case Op::kMax: case Op::kMaxs: return (std::isnan(a) || std::isnan(b)) ? std::numeric_limits<float>::quiet_NaN()
                                                                        : (a >= b ? a : b);
    case Op::kMin: case Op::kMins: return (std::isnan(a) || std::isnan(b)) ? std::numeric_limits<float>::quiet_NaN()
                                                                        : (a <= b ? a : b);
    default: return 0;
  }
}

std::int64_t apply_binary_int(const Instr& in, std::int64_t a, std::int64_t b) {
  switch (in.op) {
    case Op::kAdd: case Op::kAdds: return a + b;
    case Op::kSub: return a - b;
    case Op::kMul: case Op::kMuls: return a * b;
    case Op::kMax: case Op::kMaxs: return std::max(a, b);
    case Op::kMin: case Op::kMins: return std::min(a, b);
    default: unsupported(in, "not defined for int32");
  }
}

float apply_unary(Op op, float x, DType t) {
  // fp32 results are computed in double and rounded once, so they are within 1 ulp; fp16/bf16 ones in float.
  const bool wide = t == DType::kFp32;
  switch (op) {
    case Op::kExp: return wide ? static_cast<float>(std::exp(static_cast<double>(x))) : std::exp(x);
    case Op::kLn: return wide ? static_cast<float>(std::log(static_cast<double>(x))) : std::log(x);
    case Op::kAbs: return std::fabs(x);
    case Op::kSqrt: return std::sqrt(x);
    case Op::kRsqrt: return static_cast<float>(1.0 / std::sqrt(static_cast<double>(x)));
    case Op::kReciprocal: return wide ? 1.0f / x : static_cast<float>(1.0 / static_cast<double>(x));
    case Op::kRelu: return std::isnan(x) ? x : (x > 0 ? x : 0.0f);
    default: return 0;
  }
}

void exec_vector_elementwise(const Instr& in, Ub ub) {
  const VecArgs& v = in.vec;
  const std::uint32_t lanes = vector_lanes(in);
  const std::uint32_t ds = dtype_bytes(in.dtype);
  const std::uint32_t ss = dtype_bytes(in.op == Op::kCast ? in.src_dtype : in.dtype);
  const bool binary = in.op >= Op::kAdd && in.op <= Op::kMin;
  const bool with_scalar = in.op >= Op::kAdds && in.op <= Op::kMins;
  const bool integer = in.dtype == DType::kInt32;
  if (in.op == Op::kFusedMulAdd && !is_float(in.dtype)) unsupported(in, "FusedMulAdd takes float element types");
  if (in.op != Op::kCast && in.op != Op::kDuplicate && in.op != Op::kBrcb && !is_float(in.dtype) && !integer) {
    unsupported(in, "element type " + std::string(dtype_name(in.dtype)) + " is not supported");
  }
  if (integer && !(binary || with_scalar || in.op == Op::kAbs || in.op == Op::kRelu || in.op == Op::kCast ||
                   in.op == Op::kDuplicate || in.op == Op::kBrcb)) {
    unsupported(in, "not defined for int32");
  }
  // The scalar operand has the element type (Ascend C passes it as a T): round it once.
  float scalar = static_cast<float>(v.scalar);
  if (with_scalar && is_float(in.dtype)) {
    std::uint8_t tmp[4];
    store_float(tmp, in.dtype, scalar);
    scalar = load_float(tmp, in.dtype);
  }
  for (std::uint32_t r = 0; r < v.repeat; ++r) {
    for (std::uint32_t l = 0; l < lanes; ++l) {
      if (!v.mask.test(l)) continue;
      std::uint8_t* d = ub.at(lane_addr(v.dst, r, l, ds));
      if (in.op == Op::kBrcb) {
        const std::uint64_t src = v.src0.addr + (static_cast<std::uint64_t>(r) * 8 + l / (32 / ds)) * ds;
        std::memmove(d, ub.at(src), ds);
        continue;
      }
      if (in.op == Op::kDuplicate) {
        if (is_float(in.dtype)) store_float(d, in.dtype, static_cast<float>(v.scalar));
        else store_i(d, in.dtype, static_cast<std::int64_t>(v.scalar));
        continue;
      }
      const std::uint8_t* a = ub.at(lane_addr(v.src0, r, l, ss));
      if (in.op == Op::kCast) {
        if (is_float(in.src_dtype) || !is_float(in.dtype)) {
          if (!is_float(in.src_dtype) && !is_float(in.dtype)) store_i(d, in.dtype, load_i(a, in.src_dtype));
          else store_float(d, in.dtype, load_float(a, in.src_dtype), v.round);
        } else {
          // Integer -> float: exact in double, then one rounding (two for fp16/bf16 targets of huge ints, which
          // overflow anyway).
          const double x = static_cast<double>(load_i(a, in.src_dtype));
          store_float(d, in.dtype, narrow(x, in.dtype == DType::kFp32 ? v.round : Round::kNearestEven), v.round);
        }
        continue;
      }
      if (integer) {
        const std::int64_t x = load_i(a, in.dtype);
        std::int64_t y;
        if (binary) y = apply_binary_int(in, x, load_i(ub.at(lane_addr(v.src1, r, l, ss)), in.dtype));
        else if (with_scalar) y = apply_binary_int(in, x, static_cast<std::int64_t>(v.scalar));
        else if (in.op == Op::kAbs) y = x < 0 ? -x : x;
        else y = x > 0 ? x : 0;  // relu
        store_i(d, in.dtype, y);
        continue;
      }
      const float x = load_float(a, in.dtype);
      float y;
      if (in.op == Op::kFusedMulAdd) {
        const double acc = static_cast<double>(x) * load_float(d, in.dtype) + load_float(ub.at(lane_addr(v.src1, r, l, ss)), in.dtype);
        store_float(d, in.dtype, static_cast<float>(acc));  // fp32: one rounding of the exact a*d+b (via double)
        continue;
      }
      if (binary) y = apply_binary(in.op, x, load_float(ub.at(lane_addr(v.src1, r, l, ss)), in.dtype));
      else if (with_scalar) y = apply_binary(in.op, x, scalar);
      else y = apply_unary(in.op, x, in.dtype);
      store_float(d, in.dtype, y);
    }
  }
}

// Pairwise (tree) reduction in fp32 over the selected values, in lane order.
float tree_sum(std::vector<float>& v) {
  if (v.empty()) return 0;
  while (v.size() > 1) {
    std::size_t out = 0;
    for (std::size_t i = 0; i + 1 < v.size(); i += 2) v[out++] = v[i] + v[i + 1];
    if (v.size() % 2) v[out++] = v.back();
    v.resize(out);
  }
  return v[0];
}

float reduce_values(Op op, std::vector<float>& vals) {
  switch (op) {
    case Op::kReduceSum: case Op::kBlockReduceSum: return tree_sum(vals);
    case Op::kReduceMax: case Op::kBlockReduceMax: {
      float m = -std::numeric_limits<float>::infinity();
      for (float x : vals) m = (std::isnan(x) || std::isnan(m)) ? std::numeric_limits<float>::quiet_NaN() : std::max(m, x);
      return m;
    }
    default: {
      float m = std::numeric_limits<float>::infinity();
      for (float x : vals) m = (std::isnan(x) || std::isnan(m)) ? std::numeric_limits<float>::quiet_NaN() : std::min(m, x);
      return m;
    }
  }
}

void exec_reduce(const Instr& in, Ub ub) {
  const VecArgs& v = in.vec;
  if (!is_float(in.dtype)) unsupported(in, "reductions take fp16, bf16 or fp32");
  const std::uint32_t lanes = vector_lanes(in);
  const std::uint32_t es = dtype_bytes(in.dtype);
  const std::uint32_t per_block = 32 / es;
  const bool per_block_mode = in.op >= Op::kBlockReduceSum;
  std::vector<float> vals;
  vals.reserve(lanes);
  for (std::uint32_t r = 0; r < v.repeat; ++r) {
    const std::uint32_t groups = per_block_mode ? lanes / per_block : 1;
    const std::uint32_t width = per_block_mode ? per_block : lanes;
    for (std::uint32_t g = 0; g < groups; ++g) {
      vals.clear();
      for (std::uint32_t l = g * width; l < (g + 1) * width; ++l) {
        if (v.mask.test(l)) vals.push_back(load_float(ub.at(lane_addr(v.src0, r, l, es)), in.dtype));
      }
      const float result = reduce_values(in.op, vals);
      const std::uint64_t index = static_cast<std::uint64_t>(r) * v.dst_rep_elems + g;
      store_float(ub.at(v.dst.addr + index * es), in.dtype, result);
    }
  }
}

bool compare(CmpMode m, float a, float b) {
  switch (m) {
    case CmpMode::kLt: return a < b;
    case CmpMode::kGt: return a > b;
    case CmpMode::kEq: return a == b;
    case CmpMode::kLe: return a <= b;
    case CmpMode::kGe: return a >= b;
    case CmpMode::kNe: return a != b;
  }
  return false;
}

void exec_compare_select(const Instr& in, Ub ub) {
  const VecArgs& v = in.vec;
  const std::uint32_t lanes = vector_lanes(in);
  const std::uint32_t es = dtype_bytes(in.dtype);
  const std::uint32_t mask_bytes = lanes / 8;
  for (std::uint32_t r = 0; r < v.repeat; ++r) {
    if (in.op == Op::kCompare) {
      std::uint8_t* bits = ub.at(v.dst.addr + static_cast<std::uint64_t>(r) * mask_bytes);
      std::memset(bits, 0, mask_bytes);
      for (std::uint32_t l = 0; l < lanes; ++l) {
        if (!v.mask.test(l)) continue;
        const float a = load_float(ub.at(lane_addr(v.src0, r, l, es)), in.dtype);
        const float b = load_float(ub.at(lane_addr(v.src1, r, l, es)), in.dtype);
        if (compare(v.cmp, a, b)) bits[l / 8] |= static_cast<std::uint8_t>(1u << (l % 8));
      }
    } else {
      const std::uint8_t* bits = ub.at(in.src1 + static_cast<std::uint64_t>(r) * mask_bytes);
      for (std::uint32_t l = 0; l < lanes; ++l) {
        if (!v.mask.test(l)) continue;
        const bool pick_a = (bits[l / 8] >> (l % 8)) & 1;
        const VecOperand& src = pick_a ? v.src0 : v.src1;
        std::memcpy(ub.at(lane_addr(v.dst, r, l, es)), ub.at(lane_addr(src, r, l, es)), es);
      }
    }
  }
}

void transpose_fractal(std::uint8_t* dst, const std::uint8_t* src) {
  std::uint8_t tmp[kFractalBytes];
  for (int i = 0; i < 16; ++i)
    for (int j = 0; j < 16; ++j) std::memcpy(tmp + (j * 16 + i) * 2, src + (i * 16 + j) * 2, 2);
  std::memcpy(dst, tmp, kFractalBytes);
}

// Moves `bytes` from (src_space, src) to (dst_space, dst) through the view.
void move(MemoryView& mem, Space dst_space, std::uint64_t dst, Space src_space, std::uint64_t src,
          std::uint64_t bytes, std::vector<std::uint8_t>& scratch) {
  if (bytes == 0) return;
  if (src_space == Space::kGm && dst_space == Space::kGm) {
    scratch.resize(bytes);
    mem.gm_read(src, scratch.data(), bytes);
    mem.gm_write(dst, scratch.data(), bytes);
  } else if (src_space == Space::kGm) {
    mem.gm_read(src, mem.local(dst_space, dst, bytes), bytes);
  } else if (dst_space == Space::kGm) {
    mem.gm_write(dst, mem.local(src_space, src, bytes), bytes);
  } else {
    std::memmove(mem.local(dst_space, dst, bytes), mem.local(src_space, src, bytes), bytes);
  }
}

void exec_copy(const Instr& in, MemoryView& mem) {
  std::vector<std::uint8_t> scratch;
  const CopyArgs& c = in.copy;
  for (std::uint32_t i = 0; i < c.nburst; ++i) {
    move(mem, in.dst_space, in.dst + static_cast<std::uint64_t>(i) * (c.burst_bytes + c.dst_gap), in.src_space,
         in.src0 + static_cast<std::uint64_t>(i) * (c.burst_bytes + c.src_gap), c.burst_bytes, scratch);
  }
}

std::uint64_t pad_burst_bytes(const CopyArgs& c) {
  return ceil_to(static_cast<std::uint64_t>(c.left_pad + c.right_pad) * c.elem_bytes + c.burst_bytes, 32);
}

void exec_copy_pad(const Instr& in, MemoryView& mem) {
  const CopyArgs& c = in.copy;
  const std::uint64_t ub_burst = pad_burst_bytes(c);
  for (std::uint32_t i = 0; i < c.nburst; ++i) {
    if (in.src_space == Space::kGm) {
      std::uint8_t* d = mem.local(in.dst_space, in.dst + i * (ub_burst + c.dst_gap), ub_burst);
      // Pad elements fill everything in the 32 B-aligned UB burst that is not data.
      for (std::uint64_t off = 0; off + c.elem_bytes <= ub_burst; off += c.elem_bytes)
        std::memcpy(d + off, &c.pad_value, c.elem_bytes);
      mem.gm_read(in.src0 + i * (static_cast<std::uint64_t>(c.burst_bytes) + c.src_gap),
                  d + static_cast<std::uint64_t>(c.left_pad) * c.elem_bytes, c.burst_bytes);
    } else {
      const std::uint64_t ub_stride = ceil_to(c.burst_bytes, 32) + c.src_gap;
      mem.gm_write(in.dst + i * (static_cast<std::uint64_t>(c.burst_bytes) + c.dst_gap),
                   mem.local(in.src_space, in.src0 + i * ub_stride, c.burst_bytes), c.burst_bytes);
    }
  }
}

void exec_nd2nz(const Instr& in, MemoryView& mem) {
  const CopyArgs& c = in.copy;
  const std::uint32_t es = dtype_bytes(in.dtype);
  const std::uint32_t c0 = 32 / es;
  std::vector<std::uint8_t> row(static_cast<std::size_t>(c.cols) * es);
  for (std::uint32_t r = 0; r < c.rows; ++r) {
    mem.gm_read(in.src0 + static_cast<std::uint64_t>(r) * c.src_row_stride * es, row.data(), row.size());
    for (std::uint32_t col0 = 0; col0 < c.cols; col0 += c0) {
      const std::uint32_t n = std::min(c0, c.cols - col0);
      const std::uint64_t idx = nz_index(r, col0, c.dst_rows, c0);
      std::memcpy(mem.local(in.dst_space, in.dst + idx * es, static_cast<std::uint64_t>(n) * es),
                  row.data() + static_cast<std::size_t>(col0) * es, static_cast<std::size_t>(n) * es);
    }
  }
}

// img2col (Img2colArgs): each destination element from its tap of the map, or the pad value.
void exec_load3d(const Instr& in, MemoryView& mem) {
  const Img2colArgs& g = in.img2col;
  const std::uint32_t es = dtype_bytes(in.dtype), c0 = 32 / es;
  const std::uint32_t wo = img2col_out(g.l1_w, g.pad[0] + g.pad[1], g.kw, g.sw, g.dw);
  const std::uint32_t ho = img2col_out(g.l1_h, g.pad[2] + g.pad[3], g.kh, g.sh, g.dh);
  const std::uint64_t rows = ceil_to(g.m_ext, 16), k1 = g.k_ext / c0, taps = std::uint64_t{g.kh} * g.kw;
  const std::uint64_t plane = std::uint64_t{g.l1_h} * g.l1_w * 32;
  const std::uint8_t* map = mem.local(Space::kL1, in.src0, g.channels / c0 * plane);
  std::uint8_t* out = mem.local(in.dst_space, in.dst, rows * g.k_ext * es);
  for (std::uint64_t i = 0; i < rows; ++i) {
    const std::uint64_t m = g.m_start + i;
    const bool row_in = m < std::uint64_t{ho} * wo;
    const std::int64_t h0 = row_in ? static_cast<std::int64_t>(m / wo * g.sh) - g.pad[2] : 0;
    const std::int64_t w0 = row_in ? static_cast<std::int64_t>(m % wo * g.sw) - g.pad[0] : 0;
    for (std::uint64_t kb = 0; kb < k1; ++kb) {
      const std::uint64_t kblock = g.k_start / c0 + kb, c1 = kblock / taps, tap = kblock % taps;
      const std::int64_t h = h0 + static_cast<std::int64_t>(tap / g.kw * g.dh);
      const std::int64_t w = w0 + static_cast<std::int64_t>(tap % g.kw * g.dw);
      std::uint8_t* d = out + ((i / 16 * k1 + kb) * 16 + i % 16) * 32;
      if (row_in && h >= 0 && h < g.l1_h && w >= 0 && w < g.l1_w) {
        std::memcpy(d, map + c1 * plane + (static_cast<std::uint64_t>(h) * g.l1_w + static_cast<std::uint64_t>(w)) * 32,
                    32);
      } else {
        for (std::uint32_t e = 0; e < c0; ++e) std::memcpy(d + e * es, &g.pad_value, es);
      }
    }
  }
}

void exec_load2d(const Instr& in, MemoryView& mem) {
  const CopyArgs& c = in.copy;
  if (c.transpose && dtype_bytes(in.dtype) != 2) unsupported(in, "transposing loads take 16-bit element types");
  for (std::uint32_t i = 0; i < c.repeat; ++i) {
    const std::uint8_t* s = mem.local(in.src_space, in.src0 + static_cast<std::uint64_t>(i) * c.src_stride, kFractalBytes);
    std::uint8_t* d = mem.local(in.dst_space, in.dst + static_cast<std::uint64_t>(i) * kFractalBytes, kFractalBytes);
    if (c.transpose) transpose_fractal(d, s);
    else std::memmove(d, s, kFractalBytes);
  }
}

void exec_load_bias(const Instr& in, MemoryView& mem) {
  const std::uint32_t es = dtype_bytes(in.src_dtype);
  const std::uint8_t* s = mem.local(in.src_space, in.src0, static_cast<std::uint64_t>(in.copy.cols) * es);
  std::uint8_t* d = mem.local(in.dst_space, in.dst, static_cast<std::uint64_t>(in.copy.cols) * 4);
  for (std::uint32_t i = 0; i < in.copy.cols; ++i) {
    const float v = load_float(s + static_cast<std::size_t>(i) * es, in.src_dtype);
    std::memcpy(d + static_cast<std::size_t>(i) * 4, &v, 4);
  }
}

void exec_mmad(const Instr& in, MemoryView& mem) {
  const CubeArgs& q = in.cube;
  const DType a_t = in.src_dtype;
  const bool integer = a_t == DType::kInt8;
  if (integer != (in.dtype == DType::kInt32)) unsupported(in, "int8 inputs accumulate in int32, float inputs in fp32");
  const std::uint32_t es = dtype_bytes(a_t);
  const std::uint32_t k0 = 32 / es;
  const std::uint64_t m1 = ceil_div(q.m, 16), k1 = ceil_div(q.k, k0), n1 = ceil_div(q.n, 16);
  const std::uint8_t* a = mem.local(Space::kL0A, in.src0, m1 * k1 * kFractalBytes);
  const std::uint8_t* b = mem.local(Space::kL0B, in.src1, k1 * n1 * kFractalBytes);
  std::uint8_t* c = mem.local(Space::kL0C, in.dst, m1 * n1 * 1024);
  const std::uint8_t* bias = q.has_bias ? mem.local(Space::kBiasTable, q.bias, static_cast<std::uint64_t>(q.n) * 4) : nullptr;
  auto a_at = [&](std::uint64_t r, std::uint64_t kk) {
    return a + (((r / 16) * k1 + kk / k0) * 16 * k0 + (r % 16) * k0 + kk % k0) * es;
  };
  auto b_at = [&](std::uint64_t kk, std::uint64_t col) {
    return b + (((kk / k0) * n1 + col / 16) * 16 * k0 + (col % 16) * k0 + kk % k0) * es;
  };
  // Accumulation order: k ascending, one rounding per multiply-add in fp32 (products of fp16/bf16 are exact).
  // The operands are decoded once; each output row then accumulates k by k over all its columns.
  if (integer) {
    for (std::uint64_t r = 0; r < q.m; ++r) {
      for (std::uint64_t col = 0; col < q.n; ++col) {
        std::uint8_t* out = c + l0c_index(r, col, m1) * 4;
        std::int64_t acc = q.init ? (bias ? load_i(bias + col * 4, DType::kInt32) : 0) : load_i(out, DType::kInt32);
        for (std::uint64_t kk = 0; kk < q.k; ++kk) acc += load_i(a_at(r, kk), a_t) * load_i(b_at(kk, col), a_t);
        store_i(out, DType::kInt32, acc);
      }
    }
    return;
  }
  thread_local std::vector<float> av, bv, acc;
  av.resize(static_cast<std::size_t>(q.m) * q.k);
  bv.resize(static_cast<std::size_t>(q.k) * q.n);
  acc.resize(q.n);
  for (std::uint64_t r = 0; r < q.m; ++r)
    for (std::uint64_t kk = 0; kk < q.k; ++kk) av[r * q.k + kk] = load_float(a_at(r, kk), a_t);
  for (std::uint64_t kk = 0; kk < q.k; ++kk)
    for (std::uint64_t col = 0; col < q.n; ++col) bv[kk * q.n + col] = load_float(b_at(kk, col), a_t);
  for (std::uint64_t r = 0; r < q.m; ++r) {
    for (std::uint64_t col = 0; col < q.n; ++col) {
      const std::uint8_t* out = c + l0c_index(r, col, m1) * 4;
      acc[col] = q.init ? (bias ? load_float(bias + col * 4, DType::kFp32) : 0.0f) : load_float(out, DType::kFp32);
    }
    const float* arow = av.data() + r * q.k;
    for (std::uint64_t kk = 0; kk < q.k; ++kk) {
      const float a = arow[kk];
      const float* brow = bv.data() + kk * q.n;
      for (std::uint64_t col = 0; col < q.n; ++col) acc[col] += a * brow[col];
    }
    for (std::uint64_t col = 0; col < q.n; ++col) std::memcpy(c + l0c_index(r, col, m1) * 4, &acc[col], 4);
  }
}

void exec_fixpipe(const Instr& in, MemoryView& mem) {
  const CubeArgs& q = in.cube;
  const std::uint64_t m1 = q.src_rows / 16, n1 = ceil_div(q.n, 16);
  const std::uint8_t* c = mem.local(Space::kL0C, in.src0, m1 * n1 * 1024);
  const std::uint32_t ds = dtype_bytes(in.dtype);
  const bool int_src = in.src_dtype == DType::kInt32;
  std::vector<std::uint8_t> row(static_cast<std::size_t>(q.n) * ds);
  for (std::uint64_t r = 0; r < q.m; ++r) {
    for (std::uint64_t col = 0; col < q.n; ++col) {
      const std::uint8_t* s = c + l0c_index(r, col, m1) * 4;
      std::uint8_t* d = row.data() + col * ds;
      if (int_src && !is_float(in.dtype)) {
        std::int64_t v = load_i(s, DType::kInt32);
        if (q.relu && v < 0) v = 0;
        store_i(d, in.dtype, v);
      } else {
        float v = load_float(s, in.src_dtype);
        if (q.relu && v < 0) v = 0;
        store_float(d, in.dtype, v);
      }
    }
    if (in.dst_space == Space::kGm) {
      mem.gm_write(in.dst + r * q.dst_row_stride * ds, row.data(), row.size());
    } else {
      const std::uint32_t c0 = 32 / ds;
      for (std::uint64_t col = 0; col < q.n; ++col) {
        std::memcpy(mem.local(in.dst_space, in.dst + nz_index(r, col, q.src_rows, c0) * ds, ds), row.data() + col * ds, ds);
      }
    }
  }
}

}  // namespace

Mask Mask::count(std::uint32_t n) {
  Mask m;
  m.bits[0] = n >= 64 ? ~0ULL : ((1ULL << n) - 1);
  m.bits[1] = n >= 128 ? ~0ULL : (n <= 64 ? 0 : ((1ULL << (n - 64)) - 1));
  return m;
}

void execute(const Instr& in, MemoryView& mem) {
  switch (in.op) {
    case Op::kCopy:
    case Op::kCopyL0cToUb: exec_copy(in, mem); return;
    case Op::kCopyPad: exec_copy_pad(in, mem); return;
    case Op::kCopyNd2Nz: exec_nd2nz(in, mem); return;
    case Op::kLoad2d: exec_load2d(in, mem); return;
    case Op::kLoad3d: exec_load3d(in, mem); return;
    case Op::kLoadBias: exec_load_bias(in, mem); return;
    case Op::kMmad: exec_mmad(in, mem); return;
    case Op::kFixpipe: exec_fixpipe(in, mem); return;
    case Op::kSetFlag: case Op::kWaitFlag: case Op::kBarrier: case Op::kCrossSet: case Op::kCrossWait:
    case Op::kScalar: return;
    default: break;
  }
  // Vector instructions address the whole UB.
  Ub ub{mem.local(Space::kUb, 0, 0)};
  switch (in.op) {
    case Op::kReduceSum: case Op::kReduceMax: case Op::kReduceMin:
    case Op::kBlockReduceSum: case Op::kBlockReduceMax: case Op::kBlockReduceMin: exec_reduce(in, ub); return;
    case Op::kCompare: case Op::kSelect: exec_compare_select(in, ub); return;
    case Op::kGather: {
      const std::uint32_t ds = dtype_bytes(in.dtype), lanes = vector_lanes(in);
      for (std::uint32_t r = 0; r < in.vec.repeat; ++r) {
        for (std::uint32_t l = 0; l < lanes; ++l) {
          if (!in.vec.mask.test(l)) continue;
          const std::uint64_t i = static_cast<std::uint64_t>(r) * lanes + l;
          std::uint32_t off = 0;
          std::memcpy(&off, mem.local(Space::kUb, in.vec.src1.addr + i * 4, 4), 4);
          // The gathered element is bounds-checked like any access (offsets are data).
          std::memmove(mem.local(Space::kUb, in.vec.dst.addr + i * ds, ds), mem.local(Space::kUb, in.vec.src0.addr + off, ds), ds);
        }
      }
      return;
    }
    case Op::kTranspose:
      if (dtype_bytes(in.dtype) != 2) unsupported(in, "Transpose takes 16-bit element types");
      for (std::uint32_t i = 0; i < in.vec.repeat; ++i)
        transpose_fractal(ub.at(in.vec.dst.addr + i * kFractalBytes), ub.at(in.vec.src0.addr + i * kFractalBytes));
      return;
    default: exec_vector_elementwise(in, ub); return;
  }
}

AccessList accesses(const Instr& in) {
  AccessList list;
  const CopyArgs& c = in.copy;
  switch (in.op) {
    case Op::kCopy:
    case Op::kCopyL0cToUb: {
      if (c.nburst == 0 || c.burst_bytes == 0) return list;
      list.add(in.src_space, in.src0, static_cast<std::uint64_t>(c.nburst) * c.burst_bytes + (c.nburst - 1ULL) * c.src_gap,
               false, "src");
      list.add(in.dst_space, in.dst, static_cast<std::uint64_t>(c.nburst) * c.burst_bytes + (c.nburst - 1ULL) * c.dst_gap,
               true, "dst");
      return list;
    }
    case Op::kCopyPad: {
      if (c.nburst == 0 || c.burst_bytes == 0) return list;
      const std::uint64_t gm_span = static_cast<std::uint64_t>(c.nburst) * c.burst_bytes;
      if (in.src_space == Space::kGm) {
        list.add(Space::kGm, in.src0, gm_span + (c.nburst - 1ULL) * c.src_gap, false, "src");
        list.add(in.dst_space, in.dst, c.nburst * pad_burst_bytes(c) + (c.nburst - 1ULL) * c.dst_gap, true, "dst");
      } else {
        list.add(in.src_space, in.src0, c.nburst * ceil_to(c.burst_bytes, 32) + (c.nburst - 1ULL) * c.src_gap, false,
                 "src");
        list.add(Space::kGm, in.dst, gm_span + (c.nburst - 1ULL) * c.dst_gap, true, "dst");
      }
      return list;
    }
    case Op::kCopyNd2Nz: {
      if (c.rows == 0 || c.cols == 0) return list;
      const std::uint32_t es = dtype_bytes(in.dtype);
      list.add(Space::kGm, in.src0, (static_cast<std::uint64_t>(c.rows - 1) * c.src_row_stride + c.cols) * es, false,
               "src");
      const std::uint64_t blocks = ceil_div(c.cols, 32 / es);
      list.add(in.dst_space, in.dst, ((blocks - 1) * c.dst_rows + c.rows) * 32, true, "dst");
      return list;
    }
    case Op::kLoad2d:
      if (c.repeat == 0) return list;
      list.add(in.src_space, in.src0, static_cast<std::uint64_t>(c.repeat - 1) * c.src_stride + kFractalBytes, false, "src");
      list.add(in.dst_space, in.dst, static_cast<std::uint64_t>(c.repeat) * kFractalBytes, true, "dst");
      return list;
    case Op::kLoad3d: {
      const Img2colArgs& g = in.img2col;
      if (g.m_ext == 0 || g.k_ext == 0) return list;
      list.add(in.src_space, in.src0, static_cast<std::uint64_t>(g.channels) * dtype_bytes(in.dtype) * g.l1_h * g.l1_w,
               false, "src");
      list.add(in.dst_space, in.dst, payload_bytes(in), true, "dst");
      return list;
    }
    case Op::kLoadBias:
      list.add(in.src_space, in.src0, static_cast<std::uint64_t>(c.cols) * dtype_bytes(in.src_dtype), false, "src");
      list.add(in.dst_space, in.dst, static_cast<std::uint64_t>(c.cols) * 4, true, "dst");
      return list;
    case Op::kMmad: {
      const CubeArgs& q = in.cube;
      if (q.m == 0 || q.k == 0 || q.n == 0) return list;
      const std::uint32_t k0 = 32 / dtype_bytes(in.src_dtype);
      const std::uint64_t m1 = ceil_div(q.m, 16), k1 = ceil_div(q.k, k0), n1 = ceil_div(q.n, 16);
      list.add(Space::kL0A, in.src0, m1 * k1 * kFractalBytes, false, "a");
      list.add(Space::kL0B, in.src1, k1 * n1 * kFractalBytes, false, "b");
      list.add(Space::kL0C, in.dst, m1 * n1 * 1024, true, "c");
      if (q.has_bias) list.add(Space::kBiasTable, q.bias, static_cast<std::uint64_t>(q.n) * 4, false, "bias");
      return list;
    }
    case Op::kFixpipe: {
      const CubeArgs& q = in.cube;
      if (q.m == 0 || q.n == 0) return list;
      const std::uint32_t ds = dtype_bytes(in.dtype);
      list.add(Space::kL0C, in.src0, (q.src_rows / 16) * ceil_div(q.n, 16) * 1024, false, "src");
      if (in.dst_space == Space::kGm) {
        list.add(Space::kGm, in.dst, ((q.m - 1ULL) * q.dst_row_stride + q.n) * ds, true, "dst");
      } else {
        list.add(in.dst_space, in.dst, ((ceil_div(q.n, 32 / ds) - 1) * q.src_rows + q.m) * 32, true, "dst");
      }
      return list;
    }
    case Op::kSetFlag: case Op::kWaitFlag: case Op::kBarrier: case Op::kCrossSet: case Op::kCrossWait:
    case Op::kScalar: return list;
    default: break;
  }
  // Vector instructions. A repeat touches the blocks up to its highest selected lane.
  const VecArgs& v = in.vec;
  if (v.repeat == 0) return list;
  std::uint32_t lanes = vector_lanes(in);
  if (in.op != Op::kTranspose && in.op != Op::kCompare && in.op != Op::kSelect) {
    std::uint32_t used = 0;
    for (std::uint32_t l = 0; l < lanes; ++l)
      if (v.mask.test(l)) used = l + 1;
    if (used == 0) return list;
    lanes = used;
  }
  const std::uint32_t ds = dtype_bytes(in.dtype);
  switch (in.op) {
    case Op::kReduceSum: case Op::kReduceMax: case Op::kReduceMin:
    case Op::kBlockReduceSum: case Op::kBlockReduceMax: case Op::kBlockReduceMin: {
      const std::uint64_t per_repeat = in.op >= Op::kBlockReduceSum ? lanes / (32 / ds) : 1;
      list.add(Space::kUb, v.src0.addr, operand_extent(v.src0, v.repeat, lanes, ds), false, "src");
      list.add(Space::kUb, v.dst.addr, ((v.repeat - 1ULL) * v.dst_rep_elems + per_repeat) * ds, true, "dst");
      return list;
    }
    case Op::kCompare:
      list.add(Space::kUb, v.src0.addr, operand_extent(v.src0, v.repeat, lanes, ds), false, "src0");
      list.add(Space::kUb, v.src1.addr, operand_extent(v.src1, v.repeat, lanes, ds), false, "src1");
      list.add(Space::kUb, v.dst.addr, static_cast<std::uint64_t>(v.repeat) * lanes / 8, true, "dst");
      return list;
    case Op::kSelect:
      list.add(Space::kUb, v.src0.addr, operand_extent(v.src0, v.repeat, lanes, ds), false, "src0");
      list.add(Space::kUb, v.src1.addr, operand_extent(v.src1, v.repeat, lanes, ds), false, "src1");
      list.add(Space::kUb, in.src1, static_cast<std::uint64_t>(v.repeat) * lanes / 8, false, "mask");
      list.add(Space::kUb, v.dst.addr, operand_extent(v.dst, v.repeat, lanes, ds), true, "dst");
      return list;
    case Op::kGather:  // contiguous dst and offsets; the source elements are checked as they are read
      list.add(Space::kUb, v.src1.addr, static_cast<std::uint64_t>(v.repeat) * lanes * 4, false, "offsets");
      list.add(Space::kUb, v.dst.addr, static_cast<std::uint64_t>(v.repeat) * lanes * ds, true, "dst");
      return list;
    case Op::kBrcb:
      list.add(Space::kUb, v.src0.addr, static_cast<std::uint64_t>(v.repeat) * 8 * ds, false, "src");
      list.add(Space::kUb, v.dst.addr, operand_extent(v.dst, v.repeat, lanes, ds), true, "dst");
      return list;
    case Op::kTranspose:
      list.add(Space::kUb, v.src0.addr, static_cast<std::uint64_t>(v.repeat) * kFractalBytes, false, "src");
      list.add(Space::kUb, v.dst.addr, static_cast<std::uint64_t>(v.repeat) * kFractalBytes, true, "dst");
      return list;
    default: break;
  }
  const std::uint32_t ss = dtype_bytes(in.op == Op::kCast ? in.src_dtype : in.dtype);
  if (in.op != Op::kDuplicate) list.add(Space::kUb, v.src0.addr, operand_extent(v.src0, v.repeat, lanes, ss), false, "src0");
  if (in.op == Op::kFusedMulAdd) list.add(Space::kUb, v.dst.addr, operand_extent(v.dst, v.repeat, lanes, ds), false, "dst (read)");
  if (in.op >= Op::kAdd && in.op <= Op::kFusedMulAdd)
    list.add(Space::kUb, v.src1.addr, operand_extent(v.src1, v.repeat, lanes, ss), false, "src1");
  list.add(Space::kUb, v.dst.addr, operand_extent(v.dst, v.repeat, lanes, ds), true, "dst");
  return list;
}

}  // namespace npusim::hw::isa
