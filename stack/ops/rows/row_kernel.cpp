// The row ops' short path (row_kernel.hpp): buffers, the tile loop, loads and stores. The ops' own steps are in
// softmax.cpp, norms.cpp, swiglu.cpp and rope.cpp.
//
// Row reductions (max, sum) go in levels of 64 lanes: each row's 64-lane pieces reduce into its own partials (the
// row padded to a multiple of 64 with the identity), then one instruction reduces every row's partials at once. A
// per-row scalar is broadcast with Brcb into a 32 B block per row and applied with a zero source stride.
#include "stack/ops/rows/row_kernel.hpp"

#include <algorithm>

namespace npusim::stack::ops::rows {

template <class T>
RowKernel<T>::RowKernel(const RowArgs& a, std::uint64_t first)
    : a_(a), first_(first), layout_(row_layout(a.kind, a.h, kEs, a.add, a.stats, a.tile)) {
  const RowLayout& l = layout_;
  count_ = std::min(a.per_block, a.rows - first);
  tr_ = l.tile;
  rope_ = is_rope(a.kind);
  halves_ = loads_halves(a.kind);
  stats16_ = is_norm(a.kind) && kEs == 2;
  len_ = l.len;
  fs_ = l.fs;
  ts_ = l.ts;
  tsi_ = l.tsi;
  piece_ = l.piece;
  in_piece_ = l.in_piece;
  res_at_ = in_piece_ + kBankSkew / kEs;  // the residual's place in the input buffer (row_tiling.cpp)
  out_t_ = l.out_bytes;
  stat_bytes_ = l.stat_bytes;
  k16_ = l.k16;
  p16_ = l.p16;
  // The buffers, exactly as the tiling planned and counted them.
  init_buffer(pipe_, qin_, l.buffers, "in");
  init_buffer(pipe_, qout_, l.buffers, "out");
  if (a.add) init_buffer(pipe_, qsum_, l.buffers, "sum");
  init_buffer(pipe_, fx_, l.buffers, "x");
  init_buffer(pipe_, ft_, l.buffers, "t");
  if (halves_) init_buffer(pipe_, fx2_, l.buffers, "x2");
  if (rope_) {
    init_buffer(pipe_, qcs_, l.buffers, "tables");
    init_buffer(pipe_, fc_, l.buffers, "c");
    init_buffer(pipe_, fsin_, l.buffers, "s");
    if (a.kind == RowKind::kRopeHalf) {
      init_buffer(pipe_, fc2_, l.buffers, "c2");
      init_buffer(pipe_, fs2_, l.buffers, "s2");
    }
  }
  if (stats16_) {
    init_buffer(pipe_, fsq_, l.buffers, "sq");
    init_buffer(pipe_, fpt_, l.buffers, "pt");
    init_buffer(pipe_, fpt2_, l.buffers, "pt2");
    init_buffer(pipe_, fpf_, l.buffers, "pf");
    init_buffer(pipe_, fpf2_, l.buffers, "pf2");
  }
  if (reduces_rows(a.kind)) {
    rs_.part_stride = l.part_stride;
    init_buffer(pipe_, fpart_, l.buffers, "part");
    rs_.part = fpart_.Get<float>();
  }
  const std::uint64_t vec = l.vec;
  init_buffer(pipe_, fv_, l.buffers, "v");
  init_buffer(pipe_, fbc_, l.buffers, "bc");
  v0_ = fv_.Get<float>();
  v1_ = fv_.Get<float>()[vec];
  v2_ = fv_.Get<float>()[2 * vec];
  bc_ = fbc_.Get<float>();
  bc2_ = fbc_.Get<float>()[vec * 8];
  x_ = F32Rows{fx_.Get<float>(), len_, fs_};
  tm_ = F32Rows{ft_.Get<float>(), len_, fs_};
  x2_ = F32Rows{halves_ ? fx2_.Get<float>() : LocalTensor<float>{}, len_, fs_};
  if (is_norm(a.kind)) norm_setup();
  if (a.kind == RowKind::kRopeInterleaved) rope_setup();
  inv_h_ = 1.0f / static_cast<float>(len_);
}

template <class T>
void RowKernel<T>::run() {
  for (std::uint64_t done = 0; done < count_;) {
    const std::uint64_t row0 = first_ + done;
    std::uint64_t nr = std::min(tr_, count_ - done);
    // RoPE: the tile's positions stay contiguous in cos/sin; with heads > 1 a tile holds whole positions.
    if (rope_) nr = std::min(nr, (a_.seq - (row0 / a_.heads) % a_.seq) * a_.heads);
    tile(row0, nr);
    done += nr;
  }
}

template <class T>
void RowKernel<T>::tile(std::uint64_t row0, std::uint64_t nr) {
  const RowArgs& a = a_;
  const std::uint64_t pos = rope_ ? (row0 / a.heads) % a.seq : 0, npos = rope_ ? ceil_div(nr, a.heads) : 0;
  // Loads: the rows (or their two halves), and for RoPE the cos/sin rows of the positions.
  LocalTensor<T> in = qin_.template AllocTensor<T>();
  copy_rows_in(in, a.x + row0 * a.h * kEs, nr, len_, a.h, tsi_);
  if (halves_) copy_rows_in(in[piece_], a.x + (row0 * a.h + len_) * kEs, nr, len_, a.h);
  if (a.add) copy_rows_in(in[res_at_], a.res + row0 * a.h * kEs, nr, len_, a.h, tsi_);
  if (rope_) rope_tables_in(pos, npos);
  qin_.EnQue(in);
  in = qin_.template DeQue<T>();
  LocalTensor<T> sum;
  if (a.add) {  // x + residual, rounded to T as an unfused Add would leave it; the norm reads the sum
    sum = qsum_.template AllocTensor<T>();
    Add(sum, in, in[res_at_], nr * tsi_);
    qin_.FreeTensor(in);
    in = sum;
  }
  if (stats16_) norm_stats16(in, nr);
  rows_to_f32(x_, in, nr, tsi_);
  if (halves_) rows_to_f32(x2_, in[piece_], nr);
  if (a.add) {
    qsum_.EnQue(sum);
    sum = qsum_.template DeQue<T>();
    if (a.sum) copy_rows_out(a.sum + row0 * a.h * kEs, sum, nr, len_, a.h, tsi_);
    qsum_.FreeTensor(sum);
  } else {
    qin_.FreeTensor(in);
  }
  LocalTensor<T> out = qout_.template AllocTensor<T>();
  LocalTensor<float> mean_out, rstd_out;
  if (a.stats) {
    mean_out = out[out_t_ / kEs].template ReinterpretCast<float>();
    rstd_out = mean_out[stat_bytes_ / 4];
  }
  switch (a.kind) {
    case RowKind::kSoftmax: softmax(nr); break;
    case RowKind::kLogSoftmax: log_softmax(nr); break;
    case RowKind::kLayerNorm:
    case RowKind::kRmsNorm: norm(nr, mean_out, rstd_out); break;
    case RowKind::kSwiGlu: swiglu(nr); break;
    case RowKind::kRopeHalf: rope_half(nr, npos); break;
    case RowKind::kRopeInterleaved: rope_interleaved(nr); break;
  }
  rows_from_f32(out, x_, nr);
  if (a.kind == RowKind::kRopeHalf) rows_from_f32(out[piece_], x2_, nr);
  if (is_norm(a.kind)) norm_affine(out, nr);
  qout_.EnQue(out);
  out = qout_.template DeQue<T>();
  copy_rows_out(a.out + row0 * a.ho * kEs, out, nr, len_, a.ho);
  if (a.kind == RowKind::kRopeHalf) copy_rows_out(a.out + (row0 * a.h + len_) * kEs, out[piece_], nr, len_, a.h);
  if (a.stats) {
    copy_out(a.mean + row0 * 4, mean_out, nr);
    copy_out(a.rstd + row0 * 4, rstd_out, nr);
  }
  qout_.FreeTensor(out);
}

template <class T>
void row_kernel(const RowArgs& a) {
  const std::uint64_t first = GetBlockIdx() * a.per_block;
  if (first >= a.rows) return;
  RowKernel<T>(a, first).run();
}

template void row_kernel<half>(const RowArgs&);
template void row_kernel<bfloat16_t>(const RowArgs&);
template void row_kernel<float>(const RowArgs&);

}  // namespace npusim::stack::ops::rows
