// Device helpers for ops that work on rows of fp32 values in the UB (rows/, reduce.cpp): the padded fp32
// row layout, conversions from and to T rows, and row reductions and row-scalar operations (see rows/row_kernel.cpp for
// how they work).
#pragma once

#include <limits>

#include "stack/ops/kernel_util.hpp"

namespace npusim::stack::ops {

constexpr float kLowest = -std::numeric_limits<float>::max();

// The fp32 layout of a tile: rows of `len` padded to a multiple of 64 lanes.
struct F32Rows {
  LocalTensor<float> t;
  std::uint64_t len, stride;  // stride = ceil_to(len, 64)
  LocalTensor<float> row(std::uint64_t r) const { return t[r * stride]; }
};

// T rows (ub_row<T>(len) apart, as the padded copies leave them) <-> fp32 rows.
template <class T>
void rows_to_f32(const F32Rows& d, const LocalTensor<T>& s, std::uint64_t nr, std::uint64_t stride = 0) {
  const std::uint64_t ts = stride ? stride : ub_row<T>(d.len);
  for (std::uint64_t r = 0; r < nr; ++r) convert(d.row(r), s[r * ts], d.len);
}
template <class T>
void rows_from_f32(const LocalTensor<T>& d, const F32Rows& s, std::uint64_t nr) {
  const std::uint64_t ts = ub_row<T>(s.len);
  for (std::uint64_t r = 0; r < nr; ++r) convert(d[r * ts], s.row(r), s.len);
}

// Sets the pad lanes (len .. stride) of each row to `v`.
inline void pad_rows(const F32Rows& x, std::uint64_t nr, float v) {
  const std::uint64_t tail = x.len % 64;
  if (tail == 0) return;
  const std::uint64_t bits[2] = {~((1ULL << tail) - 1), 0};
  for (std::uint64_t r = 0; r < nr; ++r) Duplicate(x.row(r)[x.len - tail], v, bits, 1, 1, 8);
}

// Scratch for row reductions: per row, the partials of each level (padded to 64 lanes).
struct ReduceScratch {
  LocalTensor<float> part;  // rows x part_stride
  std::uint64_t part_stride = 0;
  static std::uint64_t stride_for(std::uint64_t len) {
    std::uint64_t total = 0;
    for (std::uint64_t k = ceil_div(len, 64); k > 1; k = ceil_div(k, 64)) total += ceil_to(k, 64);
    return std::max<std::uint64_t>(total, 64);
  }
};

// One value per row of x (nr rows, pads already set to the identity) into out[0..nr).
inline void reduce_rows(bool max, const LocalTensor<float>& out, const F32Rows& x, std::uint64_t nr, const ReduceScratch& rs) {
  auto reduce = [&](const LocalTensor<float>& dst, const LocalTensor<float>& src, std::uint64_t lanes, std::uint64_t rep,
                    std::uint32_t dst_rep, std::uint32_t src_rep) {
    if (max) WholeReduceMax(dst, src, lanes, u8(rep), dst_rep, 1, u8(src_rep));
    else WholeReduceSum(dst, src, lanes, u8(rep), dst_rep, 1, u8(src_rep));
  };
  std::uint64_t k = x.stride / 64;  // values per row at this level (64-lane pieces)
  if (k == 1) {  // rows of at most 64: one instruction for all rows
    reduce(out, x.t, 64, nr, 1, u32(x.stride / 8));
    return;
  }
  // Per row: the 64-lane pieces into partials, level by level, until at most 64 remain. A level that feeds
  // another per-row level is padded with the identity up to a multiple of 64.
  const float identity = max ? kLowest : 0.0f;
  auto pad = [&](std::uint64_t r, std::uint64_t at, std::uint64_t n) {
    if (n <= 64 || n % 64 == 0) return;
    const std::uint64_t bits[2] = {~((1ULL << (n % 64)) - 1), 0};
    Duplicate(rs.part[r * rs.part_stride + at + n - n % 64], identity, bits, 1, 1, 8);
  };
  for (std::uint64_t r = 0; r < nr; ++r) {
    reduce(rs.part[r * rs.part_stride], x.row(r), 64, k, 1, 8);
    pad(r, 0, k);
  }
  std::uint64_t cur = 0, next = ceil_to(k, 64);
  while (k > 64) {
    const std::uint64_t k2 = ceil_div(k, 64);
    for (std::uint64_t r = 0; r < nr; ++r) {
      reduce(rs.part[r * rs.part_stride + next], rs.part[r * rs.part_stride + cur], 64, k2, 1, 8);
      pad(r, next, k2);
    }
    cur = next;
    next += ceil_to(k2, 64);
    k = k2;
  }
  // The last level of every row at once: k lanes per row, rows part_stride apart.
  reduce(out, rs.part[cur], k, nr, 1, u32(rs.part_stride / 8));
}

// x[r][:] = op(x[r][:], v[r]) for each row, through a Brcb of v into bc ([rows][8]).
enum class RowOp { kSub, kMul, kDiv };
inline void row_scalar(RowOp op, const F32Rows& x, std::uint64_t nr, const LocalTensor<float>& v, const LocalTensor<float>& bc) {
  Brcb(bc, v, u8(ceil_div(nr, 8)), BrcbRepeatParams{1, 8});
  const BinaryRepeatParams p{1, 1, 0, 8, 8, 0};
  const std::uint8_t rep = u8(x.stride / 64);
  for (std::uint64_t r = 0; r < nr; ++r) {
    const LocalTensor<float> row = x.row(r), b = bc[r * 8];
    if (op == RowOp::kSub) Sub(row, row, b, 64, rep, p);
    else if (op == RowOp::kMul) Mul(row, row, b, 64, rep, p);
    else Div(row, row, b, 64, rep, p);
  }
}

}  // namespace npusim::stack::ops
