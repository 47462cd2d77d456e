// The row ops' tiling: how many rows a tile of the short path holds in the UB (each buffer of RowKernel counted),
// or, when a row does not fit, the chunk the two-pass path streams it in.
#include "stack/ops/rows/row_ops.hpp"

#include <algorithm>

#include "common/util/error.hpp"

namespace npusim::stack::ops::rows {

void short_path_bytes(RowKind kind, std::uint64_t h, std::uint64_t es, bool add, bool stats, std::uint64_t* per_row,
                      std::uint64_t* fixed) {
  const bool halves = loads_halves(kind);
  const std::uint64_t len = halves ? h / 2 : h, fs = ceil_to(len, 64) * 4, ts = ceil_to(len * es, 32);
  std::uint64_t f32 = 2, tq = 4;  // X and Tm; two in and two out buffers of T
  if (halves) {
    f32 += 1;
    tq += 2;
  }
  if (kind == RowKind::kRopeHalf) {
    f32 += 4;
    tq += 6;
  }
  if (kind == RowKind::kRopeInterleaved) {  // C, S, offsets
    f32 += 3;
    tq += 2;
  }
  if (add) tq += 3;    // two residual buffers and the sum
  if (stats) tq += 1;  // the mean and rstd of two output buffers (8 B a row, counted generously)
  *per_row = f32 * fs + tq * ts + 4 * 3 + 64;  // + the row's three per-row values and its two Brcb blocks
  if (reduces_rows(kind)) *per_row += ReduceScratch::stride_for(len) * 4;
  *fixed = 2 * fs + ts + 256;
  if (is_norm(kind) && es == 2) {  // 16-bit norms take their sums from the T rows (RowKernel::norm_stats16)
    const std::uint64_t tsi = ceil_to(len, 128) * es, p16 = ceil_to(ceil_to(len, 128) / 128, 64);
    *per_row += (add ? 6 : 3) * tsi - (add ? 5 : 2) * ts + 2 * p16 * (es + 4);
  }
}

// x (and the residual) in, gamma (and beta), out, each twice; the sum; X and a temporary in fp32; the reduction
// partials, the per-row scalars and two Brcb targets; the statistics; and a margin for the 32 B alignment of each
// buffer.
std::uint64_t long_row_bytes(RowKind kind, std::uint64_t c, std::uint64_t es, bool add, bool stats) {
  const bool ln = kind == RowKind::kLayerNorm, norm = is_norm(kind);
  const std::uint64_t t_bufs = 2 * (add ? 2 : 1) + (norm ? 2 * (ln ? 2 : 1) : 0) + 2 + (add ? 1 : 0);
  return t_bufs * c * es + 2 * c * 4 + ReduceScratch::stride_for(c) * 4 + 7 * 32 + 2 * 256 + (stats ? 64 : 0) + 256;
}

namespace {

// Columns per chunk: the largest multiple of 64 (at most 255 repeats of 64 lanes) whose buffers fit the UB; 0 when
// not even 64 columns fit.
std::uint64_t long_row_chunk(const RowProblem& p, std::uint64_t ub) {
  for (std::uint64_t c = std::min<std::uint64_t>(255 * 64, ceil_to(p.h, 64)); c >= 64; c -= 64)
    if (long_row_bytes(p.kind, c, p.es, p.add, p.stats) <= ub) return c;
  return 0;
}

}  // namespace

RowTiling plan_rows(const RowProblem& p, const config::ChipConfig& chip, const std::string& op) {
  std::uint64_t per_row = 0, fixed = 0;
  short_path_bytes(p.kind, p.h, p.es, p.add, p.stats, &per_row, &fixed);
  const std::uint64_t len = loads_halves(p.kind) ? p.h / 2 : p.h;
  const std::uint64_t ub = chip.buffers.ub.size, cores = chip.vector_units();
  const std::uint64_t forced = p.chunk;
  if (forced > 16320) throw InputError(op + ": chunk=" + std::to_string(forced) + " is more than 16320 columns");
  if (forced % 64) throw InputError(op + ": chunk=" + std::to_string(forced) + " is not a multiple of 64");
  if (forced && long_row_bytes(p.kind, forced, p.es, p.add, p.stats) > ub)
    throw InputError(op + ": chunk=" + std::to_string(forced) + " needs " +
                     std::to_string(long_row_bytes(p.kind, forced, p.es, p.add, p.stats)) + " B of UB, chip " +
                     chip.name + " has " + std::to_string(ub));
  RowTiling t;
  const bool reduces = reduces_rows(p.kind);
  if (forced || ceil_to(len, 64) / 64 > 255 || fixed + per_row > ub) {
    t.chunk = forced ? forced : reduces ? long_row_chunk(p, ub) : 0;
    if (t.chunk == 0)
      throw InputError(op + ": a row of " + std::to_string(p.h) + " elements does not fit the UB of chip " + chip.name +
                       (reduces ? " even in chunks of 64" : ""));
    t.per_block = ceil_div(p.rows, cores);
    t.tile = 1;
    return t;
  }
  // Blocks and tiles hold whole positions when the heads of a position share a table row.
  t.per_block = ceil_div(p.rows / p.heads, cores) * p.heads;
  t.tile = std::min<std::uint64_t>({255, (ub - fixed) / per_row, t.per_block}) / p.heads * p.heads;
  if (t.tile == 0)
    throw InputError(op + ": the " + std::to_string(p.heads) + " heads of a position do not fit the UB of chip " +
                     chip.name);
  return t;
}

}  // namespace npusim::stack::ops::rows
