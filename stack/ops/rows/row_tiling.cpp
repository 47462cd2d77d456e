// The row ops' tiling: how many rows a tile of the short path holds in the UB (each buffer of RowKernel counted),
// or, when a row does not fit, the chunk the two-pass path streams it in.
#include "stack/ops/rows/row_ops.hpp"

#include <algorithm>

#include "common/util/error.hpp"

namespace npusim::stack::ops::rows {

namespace {

// Elements of a row of n elements of es bytes in UB (rows start 32 B-aligned): kernel_util.hpp's ub_row.
std::uint64_t ub_row(std::uint64_t n, std::uint64_t es) {
  return ceil_to(n * es, 32) / es;
}

}  // namespace

RowLayout row_layout(RowKind kind, std::uint64_t h, std::uint64_t es, bool add, bool stats, std::uint64_t tile) {
  RowLayout l;
  const bool halves = loads_halves(kind), rope = is_rope(kind), stats16 = is_norm(kind) && es == 2;
  const std::uint64_t tr = tile;
  l.tile = tr;
  l.len = halves ? h / 2 : h;
  l.fs = ceil_to(l.len, 64);
  l.ts = ub_row(l.len, es);
  // 16-bit norms take their row statistics from the T rows, 128 lanes per repeat: their input rows are padded to 128.
  l.tsi = stats16 ? ceil_to(l.len, 128) : l.ts;
  l.piece = tr * l.ts;
  l.in_piece = stats16 ? tr * l.tsi : l.piece;
  l.out_bytes = (kind == RowKind::kRopeHalf ? 2 : 1) * l.piece * es;
  l.stat_bytes = ceil_to(tr * 4, 32);
  l.k16 = l.tsi / 128;
  l.p16 = ceil_to(l.k16, 64);
  l.part_stride = ReduceScratch::stride_for(l.len);
  l.vec = ceil_to(tr, 8);
  BufferPlan& b = l.buffers;
  const std::uint64_t f32_rows = tr * l.fs * 4;
  // Queues hold several pieces per buffer (both halves; cos and sin) so that chips with four event ids per pipe
  // pair run them too: in, out and the tables take at most three.
  // With a residual, it follows x skewed by kBankSkew: the Add reads the two in the same cycles.
  b.add("in", (halves || add ? 2 : 1) * l.in_piece * es + (add ? kBankSkew : 0), 2);
  b.add("out", l.out_bytes + (stats ? 2 * l.stat_bytes : 0), 2);  // the rows, then their mean and rstd in fp32
  if (add) b.add("sum", l.in_piece * es);
  b.add("x", f32_rows);
  b.add("t", f32_rows);
  if (halves) b.add("x2", f32_rows);
  if (rope) {
    b.add("tables", (kind == RowKind::kRopeHalf ? 4 : 2) * l.piece * es);  // c, s (, c2, s2)
    for (const char* name : {"c", "s"}) b.add(name, f32_rows);
    if (kind == RowKind::kRopeHalf)
      for (const char* name : {"c2", "s2"}) b.add(name, f32_rows);
  }
  if (stats16) {
    b.add("sq", tr * l.tsi * es);
    for (const char* name : {"pt", "pt2"}) b.add(name, tr * l.p16 * es);
    for (const char* name : {"pf", "pf2"}) b.add(name, tr * l.p16 * 4);
  }
  if (reduces_rows(kind)) b.add("part", tr * l.part_stride * 4);
  b.add("v", 3 * l.vec * 4);    // three per-row scalars
  b.add("bc", 2 * l.vec * 32);  // two of them broadcast to a 32 B block per row
  if (is_norm(kind)) b.add("gamma", l.ts * es);
  // beta starts half the UB's bank groups after gamma (kBankSkew), so the FusedMulAdd reading a row, gamma and
  // beta does not read three blocks of one bank group a cycle.
  if (kind == RowKind::kLayerNorm) b.add("beta", l.ts * es + kBankSkew);
  if (kind == RowKind::kRopeInterleaved) {
    b.add("off", f32_rows);  // the pair-swapping gather offsets
    b.add("sign", l.fs * 4);
  }
  return l;
}

BufferPlan long_row_buffers(RowKind kind, std::uint64_t c, std::uint64_t es, bool add, bool stats) {
  BufferPlan b;
  b.add("in", (add ? 2 : 1) * c * es, 2);                                              // x (and the residual)
  if (is_norm(kind)) b.add("par", (kind == RowKind::kLayerNorm ? 2 : 1) * c * es, 2);  // gamma (and beta)
  b.add("out", c * es, 2);
  if (add) b.add("sum", c * es);
  if (stats) b.add("stat", 64);
  b.add("x", c * 4);
  b.add("t", c * 4);
  b.add("part", ReduceScratch::stride_for(c) * 4);
  b.add("v", 7 * 32);    // per-row scalars, one 32 B block each
  b.add("bc", 2 * 256);  // a Brcb repeat writes 8 blocks
  return b;
}

namespace {

// UB bytes the chunked path takes for chunks of c columns.
std::uint64_t long_row_bytes(const RowProblem& p, std::uint64_t c, std::uint64_t align) {
  return long_row_buffers(p.kind, c, p.es, p.add, p.stats).total(align);
}

// Columns per chunk: the largest multiple of 64 (at most 255 repeats of 64 lanes) whose buffers fit the UB; 0 when
// not even 64 columns fit.
std::uint64_t long_row_chunk(const RowProblem& p, std::uint64_t ub, std::uint64_t align) {
  for (std::uint64_t c = std::min<std::uint64_t>(255 * 64, ceil_to(p.h, 64)); c >= 64; c -= 64)
    if (long_row_bytes(p, c, align) <= ub) return c;
  return 0;
}

// The most rows (a multiple of `heads`, at most `most`) whose short-path buffers fit the UB; 0 when not even `heads`
// rows fit. The buffers grow with the rows, so the largest fitting count is found by bisection.
std::uint64_t short_path_tile(const RowProblem& p, std::uint64_t most, std::uint64_t ub, std::uint64_t align) {
  const auto fits = [&](std::uint64_t units) {
    return row_layout(p.kind, p.h, p.es, p.add, p.stats, units * p.heads).buffers.total(align) <= ub;
  };
  std::uint64_t lo = 0, hi = most / p.heads;  // fits(lo) holds (or lo = 0); the answer is in [lo, hi]
  while (lo < hi) {
    const std::uint64_t mid = lo + (hi - lo + 1) / 2;
    if (fits(mid))
      lo = mid;
    else
      hi = mid - 1;
  }
  return lo * p.heads;
}

}  // namespace

RowTiling plan_rows(const RowProblem& p, const config::ChipConfig& chip, const std::string& op) {
  const std::uint64_t len = loads_halves(p.kind) ? p.h / 2 : p.h;
  const std::uint64_t ub = chip.buffers.ub.size, align = std::max<std::uint64_t>(chip.buffers.ub.align, 1);
  const std::uint64_t cores = chip.vector_units();
  const std::uint64_t forced = p.chunk;
  if (forced > 16320) throw InputError(op + ": chunk=" + std::to_string(forced) + " is more than 16320 columns");
  if (forced % 64) throw InputError(op + ": chunk=" + std::to_string(forced) + " is not a multiple of 64");
  if (forced && long_row_bytes(p, forced, align) > ub)
    throw InputError(op + ": chunk=" + std::to_string(forced) + " needs " +
                     std::to_string(long_row_bytes(p, forced, align)) + " B of UB, chip " + chip.name + " has " +
                     std::to_string(ub));
  RowTiling t;
  const bool reduces = reduces_rows(p.kind);
  const bool one_row_fits = row_layout(p.kind, p.h, p.es, p.add, p.stats, 1).buffers.total(align) <= ub;
  if (forced || ceil_to(len, 64) / 64 > 255 || !one_row_fits) {
    t.chunk = forced ? forced : reduces ? long_row_chunk(p, ub, align) : 0;
    if (t.chunk == 0)
      throw InputError(op + ": a row of " + std::to_string(p.h) + " elements does not fit the UB of chip " + chip.name +
                       (reduces ? " even in chunks of 64" : ""));
    t.per_block = ceil_div(p.rows, cores);
    t.tile = 1;
    return t;
  }
  // Blocks and tiles hold whole positions when the heads of a position share a table row.
  t.per_block = ceil_div(p.rows / p.heads, cores) * p.heads;
  t.tile = short_path_tile(p, std::min<std::uint64_t>(255, t.per_block), ub, align);
  if (t.tile == 0)
    throw InputError(op + ": the " + std::to_string(p.heads) + " heads of a position do not fit the UB of chip " +
                     chip.name);
  return t;
}

}  // namespace npusim::stack::ops::rows
