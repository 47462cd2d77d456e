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
RowKernel<T>::RowKernel(const RowArgs& a, std::uint64_t first) : a_(a), first_(first) {
  count_ = std::min(a.per_block, a.rows - first);
  tr_ = a.tile;
  rope_ = is_rope(a.kind);
  halves_ = loads_halves(a.kind);
  len_ = halves_ ? a.h / 2 : a.h;  // the row length each fp32 buffer holds
  fs_ = ceil_to(len_, 64);
  ts_ = ub_row<T>(len_);
  // LayerNorm/RMSNorm of 16-bit types take their row statistics from the T rows (128 lanes per repeat; squares
  // rounded once to T, sums in fp32 partials of 128): the input rows are then padded to 128 lanes in UB.
  stats16_ = is_norm(a.kind) && kEs == 2;
  tsi_ = stats16_ ? ceil_to(len_, 128) : ts_;
  // Queues hold several pieces per buffer (both halves of the rows; cos and sin) so that chips with four event
  // ids per pipe pair run them too: in, out and the tables take at most three.
  piece_ = tr_ * ts_;
  const std::uint64_t tables = a.kind == RowKind::kRopeHalf ? 4 : 2;  // c, s (, c2, s2)
  in_piece_ = stats16_ ? tr_ * tsi_ : piece_;
  pipe_.InitBuffer(qin_, 2, (halves_ || a.add ? 2 : 1) * in_piece_ * kEs);
  // The output pieces (both halves for RoPE), then the rows' mean and rstd in fp32 when they are written.
  out_t_ = (a.kind == RowKind::kRopeHalf ? 2 : 1) * piece_ * kEs;
  stat_bytes_ = ceil_to(tr_ * 4, 32);
  pipe_.InitBuffer(qout_, 2, out_t_ + (a.stats ? 2 * stat_bytes_ : 0));
  if (a.add) pipe_.InitBuffer(qsum_, 1, in_piece_ * kEs);
  pipe_.InitBuffer(fx_, tr_ * fs_ * 4);
  pipe_.InitBuffer(ft_, tr_ * fs_ * 4);
  if (halves_) pipe_.InitBuffer(fx2_, tr_ * fs_ * 4);
  if (rope_) {
    pipe_.InitBuffer(qcs_, 1, tables * piece_ * kEs);
    pipe_.InitBuffer(fc_, tr_ * fs_ * 4);
    pipe_.InitBuffer(fsin_, tr_ * fs_ * 4);
    if (a.kind == RowKind::kRopeHalf) {
      pipe_.InitBuffer(fc2_, tr_ * fs_ * 4);
      pipe_.InitBuffer(fs2_, tr_ * fs_ * 4);
    }
  }
  k16_ = tsi_ / 128;         // 128-lane pieces per row
  p16_ = ceil_to(k16_, 64);  // their partials' stride
  if (stats16_) {
    pipe_.InitBuffer(fsq_, tr_ * tsi_ * kEs);
    for (auto* b : {&fpt_, &fpt2_}) pipe_.InitBuffer(*b, tr_ * p16_ * kEs);
    for (auto* b : {&fpf_, &fpf2_}) pipe_.InitBuffer(*b, tr_ * p16_ * 4);
  }
  if (reduces_rows(a.kind)) {
    rs_.part_stride = ReduceScratch::stride_for(len_);
    pipe_.InitBuffer(fpart_, tr_ * rs_.part_stride * 4);
    rs_.part = fpart_.Get<float>();
  }
  const std::uint64_t vec = ceil_to(tr_, 8);
  pipe_.InitBuffer(fv_, 3 * vec * 4);
  pipe_.InitBuffer(fbc_, 2 * vec * 32);
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
  if (a.add) copy_rows_in(in[in_piece_], a.res + row0 * a.h * kEs, nr, len_, a.h, tsi_);
  if (rope_) rope_tables_in(pos, npos);
  qin_.EnQue(in);
  in = qin_.template DeQue<T>();
  LocalTensor<T> sum;
  if (a.add) {  // x + residual, rounded to T as an unfused Add would leave it; the norm reads the sum
    sum = qsum_.template AllocTensor<T>();
    Add(sum, in, in[in_piece_], nr * tsi_);
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
