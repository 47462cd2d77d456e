// The row math of the vector kernels: reductions along rows, per-row values applied to every element of their row,
// and masks, on fp32 tiles in the UB. One library for the three layouts the kernels keep their rows in:
//   - padded rows (F32Rows): each row padded to a multiple of 64 lanes, any length; one instruction per row and
//     level, its 64-lane pieces as repeats (the row ops in rows/, reduce.cpp);
//   - ND tiles (NdTile): rows of `cols` (16, 32 or a multiple of 64) `stride` apart, few columns and many rows; one
//     instruction per 64-column chunk, the rows as repeats (FlashAttention's score tiles on split chips);
//   - NZ tiles (NzTile): 16 x 16 fractals in column blocks as the Cube leaves them (FlashAttention on coupled chips).
// The instruction each layout issues is chosen for its shape (see docs/ops.md, "Row math"); the pieces they share
// (which reduction, which row operation) are defined once at the top.
#pragma once

#include <algorithm>
#include <limits>

#include "stack/ops/kernel_util.hpp"

namespace npusim::stack::ops {

constexpr float kLowest = -std::numeric_limits<float>::max();

// --- What the layouts share ------------------------------------------------------------------------------------

// WholeReduceMax or WholeReduceSum, repeat form.
inline void whole_reduce(bool max, const LocalTensor<float>& dst, const LocalTensor<float>& src, std::uint64_t lanes,
                         std::uint8_t repeat, std::uint32_t dst_rep, std::uint32_t src_blk, std::uint8_t src_rep) {
  if (max)
    WholeReduceMax(dst, src, lanes, repeat, dst_rep, src_blk, src_rep);
  else
    WholeReduceSum(dst, src, lanes, repeat, dst_rep, src_blk, src_rep);
}

// dst = max(a, b) or a + b, element by element (count form): two partial reductions combined.
inline void combine(bool max, const LocalTensor<float>& dst, const LocalTensor<float>& a, const LocalTensor<float>& b,
                    std::uint64_t count) {
  if (max)
    Max(dst, a, b, count);
  else
    Add(dst, a, b, count);
}

// dst = op(x, b) in the repeat form, b holding each row's value as broadcast blocks (Brcb); dst may be x.
enum class RowOp { kSub, kMul, kDiv };
inline void row_op(RowOp op, const LocalTensor<float>& dst, const LocalTensor<float>& x, const LocalTensor<float>& b,
                   std::uint64_t mask, std::uint8_t repeat, const BinaryRepeatParams& p) {
  if (op == RowOp::kSub)
    Sub(dst, x, b, mask, repeat, p);
  else if (op == RowOp::kMul)
    Mul(dst, x, b, mask, repeat, p);
  else
    Div(dst, x, b, mask, repeat, p);
}
inline void row_op(RowOp op, const LocalTensor<float>& x, const LocalTensor<float>& b, std::uint64_t mask,
                   std::uint8_t repeat, const BinaryRepeatParams& p) {
  row_op(op, x, x, b, mask, repeat, p);
}

// --- Padded rows ---------------------------------------------------------------------------------------------

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
inline void reduce_rows(bool max, const LocalTensor<float>& out, const F32Rows& x, std::uint64_t nr,
                        const ReduceScratch& rs) {
  auto reduce = [max](const LocalTensor<float>& dst, const LocalTensor<float>& src, std::uint64_t lanes,
                      std::uint64_t rep, std::uint32_t dst_rep,
                      std::uint32_t src_rep) { whole_reduce(max, dst, src, lanes, u8(rep), dst_rep, 1, u8(src_rep)); };
  std::uint64_t k = x.stride / 64;  // values per row at this level (64-lane pieces)
  if (k == 1) {                     // rows of at most 64: one instruction for all rows
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
inline void row_scalar(RowOp op, const F32Rows& x, std::uint64_t nr, const LocalTensor<float>& v,
                       const LocalTensor<float>& bc) {
  Brcb(bc, v, u8(ceil_div(nr, 8)), BrcbRepeatParams{1, 8});
  const BinaryRepeatParams p{1, 1, 0, 8, 8, 0};
  const std::uint8_t rep = u8(x.stride / 64);
  for (std::uint64_t r = 0; r < nr; ++r) row_op(op, x.row(r), bc[r * 8], 64, rep, p);
}

// --- ND tiles --------------------------------------------------------------------------------------------------

// Rows of `cols` elements `stride` apart (stride a multiple of 8; nd_row_reduce needs cols of at most 64 or a
// multiple of 64).
struct NdTile {
  LocalTensor<float> t;
  std::uint32_t cols, stride;
};

// Sets columns [c0, cols) of `rows` rows from row r to v.
inline void nd_fill_columns(const NdTile& x, std::uint32_t r, std::uint32_t rows, std::uint32_t c0, float v) {
  for (std::uint32_t h = 0; h < x.cols; h += 64) {
    const std::uint32_t lanes = std::min<std::uint32_t>(64, x.cols - h);
    if (c0 >= h + lanes) continue;
    const std::uint32_t lo = c0 > h ? c0 - h : 0;
    const std::uint64_t upto = lanes == 64 ? ~0ULL : (1ULL << lanes) - 1;  // lanes of this row only
    const std::uint64_t bits[2] = {upto & ~((1ULL << lo) - 1), 0};
    Duplicate(x.t[static_cast<std::uint64_t>(r) * x.stride + h], v, bits, u8(rows), 1, u8(x.stride / 8));
  }
}

// dst[r][c] = op(x[r][c], bc[r]) for `rows` rows (dst of x's shape, or x itself), bc holding one 8-lane block per
// row (Brcb).
inline void nd_row_op(RowOp op, const NdTile& dst, const NdTile& x, const LocalTensor<float>& bc, std::uint32_t rows) {
  const BinaryRepeatParams p{1, 1, 0, u8(dst.stride / 8), u8(x.stride / 8), 1};
  for (std::uint32_t h = 0; h < x.cols; h += 64)
    row_op(op, dst.t[h], x.t[h], bc, std::min<std::uint32_t>(64, x.cols - h), u8(rows), p);
}
inline void nd_row_op(RowOp op, const NdTile& x, const LocalTensor<float>& bc, std::uint32_t rows) {
  nd_row_op(op, x, x, bc, rows);
}

// x[r][c] = a x[r][c] + bc[r] for `rows` rows (FusedMulAdd), `a` one 8-lane block of the factor, bc one 8-lane block
// per row (Brcb): a scale and a per-row offset in one pass.
inline void nd_row_scale_add(const NdTile& x, const LocalTensor<float>& a, const LocalTensor<float>& bc,
                             std::uint32_t rows) {
  const std::uint8_t rep = u8(x.stride / 8);
  const BinaryRepeatParams p{1, 0, 0, rep, 0, 1};
  for (std::uint32_t h = 0; h < x.cols; h += 64)
    FusedMulAdd(x.t[h], a, bc, std::min<std::uint32_t>(64, x.cols - h), u8(rows), p);
}

// One value per row of `rows` rows into `out`, with `parts` (one vector of `vec` elements per 64-column chunk) as
// scratch: each chunk reduced with the rows as repeats, then the chunks combined.
inline void nd_row_reduce(bool max, const LocalTensor<float>& out, const NdTile& x, const LocalTensor<float>& parts,
                          std::uint32_t rows, std::uint32_t vec) {
  const std::uint32_t chunks = u32(ceil_div(x.cols, 64)), lanes = std::min<std::uint32_t>(64, x.cols);
  for (std::uint32_t h = 0; h < chunks; ++h)
    whole_reduce(max, chunks == 1 ? out : parts[h * vec], x.t[h * 64], lanes, u8(rows), 1, 1, u8(x.stride / 8));
  if (chunks == 1) return;
  // The partials fold into `out` and the first partial's slot by turns, so that no combine reads and writes the
  // same blocks (a read and a write of one bank conflict, docs/hw.md) when the turns end on `out`: an even number
  // of chunks (block widths of 128 and 256); with an odd number the first combine is in place.
  const std::uint32_t combines = chunks - 1;
  auto target = [&](std::uint32_t k) { return (combines - k) % 2 == 0 ? out : parts; };
  combine(max, target(1), parts, parts[vec], rows);
  for (std::uint32_t h = 2; h < chunks; ++h) combine(max, target(h), target(h - 1), parts[h * vec], rows);
}

// --- NZ tiles --------------------------------------------------------------------------------------------------

// M1 row fractals by N1 column blocks, fractal (fm, fn) at (fn * M1 + fm) x 256 elements, 16 x 16 row-major inside.
// A column block (M1 x 256 elements) is contiguous.
struct NzTile {
  LocalTensor<float> t;
  std::uint32_t m1, n1;
  LocalTensor<float> block(std::uint32_t fn) const { return t[static_cast<std::uint64_t>(fn) * m1 * 256]; }
  std::uint64_t block_elems() const { return static_cast<std::uint64_t>(m1) * 256; }
  std::uint64_t elems() const { return block_elems() * n1; }
};

// One value per row (16 m1 rows) into `out`: the column blocks combined into `part` (one column block of scratch),
// then its 16 lanes per row reduced.
inline void nz_row_reduce(bool max, const LocalTensor<float>& out, const NzTile& x, const LocalTensor<float>& part) {
  LocalTensor<float> src = x.block(0);
  if (x.n1 > 1) {
    combine(max, part, x.block(0), x.block(1), x.block_elems());
    for (std::uint32_t fn = 2; fn < x.n1; ++fn) combine(max, part, part, x.block(fn), x.block_elems());
    src = part;
  }
  // A row of a column block is 16 lanes (2 blocks); rows are 2 blocks apart.
  whole_reduce(max, out, src, 16, u8(x.m1 * 16), 1, 1, 2);
}

// A per-row vector (16 m1 values) broadcast into one column block `bc`: row r's value fills its 16 lanes.
inline void nz_row_broadcast(const LocalTensor<float>& bc, const LocalTensor<float>& v, std::uint32_t m1) {
  const std::uint8_t rep = u8(ceil_div(m1 * 16, 8));
  Brcb(bc, v, rep, BrcbRepeatParams{2, 16});     // value r into block 2r
  Brcb(bc[8], v, rep, BrcbRepeatParams{2, 16});  // and block 2r + 1
}

// x = op(x, bc) for every column block, bc from nz_row_broadcast.
inline void nz_row_op(RowOp op, const NzTile& x, const LocalTensor<float>& bc) {
  for (std::uint32_t fn = 0; fn < x.n1; ++fn) {
    const LocalTensor<float> b = x.block(fn);
    if (op == RowOp::kSub)
      Sub(b, b, bc, x.block_elems());
    else if (op == RowOp::kMul)
      Mul(b, b, bc, x.block_elems());
    else
      Div(b, b, bc, x.block_elems());
  }
}

// Lane bits of a 64-lane repeat covering 4 rows of 16 columns of a fractal: the columns c of rows r with
// selected(r, c) are set.
template <class F>
std::uint64_t nz_row_group_bits(std::uint32_t first_row, F selected) {
  std::uint64_t bits = 0;
  for (std::uint32_t rr = 0; rr < 4; ++rr)
    for (std::uint32_t c = 0; c < 16; ++c)
      if (selected(first_row + rr, c)) bits |= 1ULL << (rr * 16 + c);
  return bits;
}

}  // namespace npusim::stack::ops
