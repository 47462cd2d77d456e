// Rotary position embedding: the device steps of the short path (row_kernel.hpp) and the CPU reference.
//   half form (rotate_half): y1 = x1 c1 - x2 s1, y2 = x2 c2 + x1 s2, x = [x1, x2] loaded as two halves
//   interleaved (GPT-J):     y = x cos + swap_pairs(x) (-sin, +sin)
// cos and sin are S x D tables; row r of x is position (r / heads) mod S (heads > 1: the BSND layout, where the
// heads of a position share its table row).
#include "stack/ops/rows/row_kernel.hpp"
#include "stack/ops/rows/row_ops.hpp"

namespace npusim::stack::ops::rows {

// Interleaved RoPE: offsets that swap the two elements of each pair, and the sign pattern (-, +) of sin.
template <class T>
void RowKernel<T>::rope_setup() {
  init_buffer(pipe_, foff_, layout_.buffers, "off");
  init_buffer(pipe_, fsign_, layout_.buffers, "sign");
  const LocalTensor<std::uint32_t> off = foff_.Get<std::uint32_t>();
  const LocalTensor<float> sign = fsign_.Get<float>();
  for (std::uint64_t i = 0; i < fs_; ++i) {
    off.SetValue(i, u32((i ^ 1) * 4));
    sign.SetValue(i, (i % 2) ? 1.0f : -1.0f);
  }
  set_flag(PIPE_S, PIPE_V, 0);
  wait_flag(PIPE_S, PIPE_V, 0);
  const LocalTensor<std::int32_t> offi = foff_.Get<std::int32_t>();
  for (std::uint64_t r = 1; r < tr_; ++r) Adds(offi[r * fs_], offi, narrow<std::int32_t>(r * fs_ * 4), fs_);
}

// The cos/sin rows of the tile's positions (and their second halves for the half form) into the tables queue.
template <class T>
void RowKernel<T>::rope_tables_in(std::uint64_t pos, std::uint64_t npos) {
  const RowArgs& a = a_;
  LocalTensor<T> cs = qcs_.template AllocTensor<T>();
  copy_rows_in(cs, a.p1 + pos * a.h * kEs, npos, len_, a.h);
  copy_rows_in(cs[piece_], a.p2 + pos * a.h * kEs, npos, len_, a.h);
  if (a.kind == RowKind::kRopeHalf) {
    copy_rows_in(cs[2 * piece_], a.p1 + (pos * a.h + len_) * kEs, npos, len_, a.h);
    copy_rows_in(cs[3 * piece_], a.p2 + (pos * a.h + len_) * kEs, npos, len_, a.h);
  }
  qcs_.EnQue(cs);
}

template <class T>
void RowKernel<T>::rope_half(std::uint64_t nr, std::uint64_t npos) {
  const std::uint64_t all = nr * fs_;
  const F32Rows c1{fc_.Get<float>(), len_, fs_}, s1{fsin_.Get<float>(), len_, fs_}, c2{fc2_.Get<float>(), len_, fs_},
      s2{fs2_.Get<float>(), len_, fs_};
  LocalTensor<T> cs = qcs_.template DeQue<T>();
  rows_to_f32(c1, cs, npos);
  rows_to_f32(s1, cs[piece_], npos);
  rows_to_f32(c2, cs[2 * piece_], npos);
  rows_to_f32(s2, cs[3 * piece_], npos);
  qcs_.FreeTensor(cs);
  const F32Rows &x1 = x_, &x2 = x2_, &tm = tm_;
  if (a_.heads == 1) {
    Mul(tm.t, x2.t, s1.t, all);  // x2 s1
    Mul(s2.t, x1.t, s2.t, all);  // x1 s2
    Mul(x1.t, x1.t, c1.t, all);  // x1 c1
    Sub(x1.t, x1.t, tm.t, all);  // y1
    Mul(x2.t, x2.t, c2.t, all);  // x2 c2
    Add(x2.t, x2.t, s2.t, all);  // y2
    return;
  }
  // Each position's tables apply to its `heads` rows (a zero repeat stride on the table).
  const std::uint64_t heads = a_.heads, rows_here = std::min(heads, nr), len = len_, fs = fs_;
  const auto rows_op = [&](const F32Rows& d, const F32Rows& x, const F32Rows& t) {
    for (std::uint64_t q = 0; q < npos; ++q)
      for (std::uint64_t c = 0; c < len; c += 64)
        Mul(d.row(q * heads)[c], x.row(q * heads)[c], t.row(q)[c], std::min<std::uint64_t>(64, len - c),
            u8(std::min(rows_here, nr - q * heads)), BinaryRepeatParams{1, 1, 1, u8(fs / 8), u8(fs / 8), 0});
  };
  rows_op(tm, x2, s1);         // x2 s1
  rows_op(x2, x2, c2);         // x2 c2
  rows_op(c2, x1, s2);         // x1 s2 (c2 free now; rows of the tile reuse it)
  rows_op(x1, x1, c1);         // x1 c1
  Sub(x1.t, x1.t, tm.t, all);  // y1
  Add(x2.t, x2.t, c2.t, all);  // y2
}

template <class T>
void RowKernel<T>::rope_interleaved(std::uint64_t nr) {
  const std::uint64_t all = nr * fs_;
  const F32Rows c{fc_.Get<float>(), len_, fs_}, s{fsin_.Get<float>(), len_, fs_};
  LocalTensor<T> cs = qcs_.template DeQue<T>();
  rows_to_f32(c, cs, nr);
  rows_to_f32(s, cs[piece_], nr);
  qcs_.FreeTensor(cs);
  Gather(tm_.t, x_.t, foff_.Get<std::uint32_t>(), all);
  for (std::uint64_t r = 0; r < nr; ++r) Mul(s.row(r), s.row(r), fsign_.Get<float>(), fs_);
  Mul(tm_.t, tm_.t, s.t, all);
  Mul(x_.t, x_.t, c.t, all);
  Add(x_.t, x_.t, tm_.t, all);
}

template void RowKernel<half>::rope_setup();
template void RowKernel<bfloat16_t>::rope_setup();
template void RowKernel<float>::rope_setup();
template void RowKernel<half>::rope_tables_in(std::uint64_t, std::uint64_t);
template void RowKernel<bfloat16_t>::rope_tables_in(std::uint64_t, std::uint64_t);
template void RowKernel<float>::rope_tables_in(std::uint64_t, std::uint64_t);
template void RowKernel<half>::rope_half(std::uint64_t, std::uint64_t);
template void RowKernel<bfloat16_t>::rope_half(std::uint64_t, std::uint64_t);
template void RowKernel<float>::rope_half(std::uint64_t, std::uint64_t);
template void RowKernel<half>::rope_interleaved(std::uint64_t);
template void RowKernel<bfloat16_t>::rope_interleaved(std::uint64_t);
template void RowKernel<float>::rope_interleaved(std::uint64_t);

void rope_reference(const float* x, const float* cs, const float* sn, float* y, std::uint64_t h, bool half) {
  for (std::uint64_t c = 0; c < h; ++c) {
    double rot;
    if (half)
      rot = c < h / 2 ? -static_cast<double>(x[c + h / 2]) : x[c - h / 2];
    else
      rot = c % 2 ? x[c - 1] : -static_cast<double>(x[c + 1]);
    y[c] = static_cast<float>(x[c] * static_cast<double>(cs[c]) + rot * sn[c]);
  }
}

}  // namespace npusim::stack::ops::rows
