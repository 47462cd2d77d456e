// Rows too long for the UB (a LayerNorm over 8192 fp16 or 4096 fp32 values with its buffers, a softmax over 32 K
// keys): each core takes whole rows, one at a time, and streams each row through in chunks of `chunk` columns,
// twice. Pass 1 gathers the row's statistics: softmax the running max and the sum of exponentials, rescaled by
// exp(m_old - m_new) when the max grows (online softmax); the norms the sums of x and x^2 in fp32. Pass 2 reads
// the chunks again (and gamma, beta) and writes the output. GM traffic: the input twice, the output once; a row
// that fits one chunk (but not the short path's double-buffered tiles) is read once.
#include <algorithm>

#include "stack/ops/rows/row_kernel.hpp"

namespace npusim::stack::ops::rows {

namespace {

template <class T>
class LongRowKernel {
 public:
  explicit LongRowKernel(const RowArgs& a) : a_(a), c_(a.chunk) {
    ln_ = a.kind == RowKind::kLayerNorm;
    norm_ = is_norm(a.kind);
    log_ = a.kind == RowKind::kLogSoftmax;
    // The buffers, exactly as the tiling planned and counted them.
    const BufferPlan plan = long_row_buffers(a.kind, c_, kEs, a.add, a.stats);
    init_buffer(pipe_, qin_, plan, "in");
    if (norm_) init_buffer(pipe_, qpar_, plan, "par");
    init_buffer(pipe_, qout_, plan, "out");
    if (a.add) init_buffer(pipe_, qsum_, plan, "sum");
    if (a.stats) init_buffer(pipe_, qstat_, plan, "stat");
    init_buffer(pipe_, fx_, plan, "x");
    init_buffer(pipe_, ft_, plan, "t");
    rs_.part_stride = ReduceScratch::stride_for(c_);
    init_buffer(pipe_, fpart_, plan, "part");
    rs_.part = fpart_.Get<float>();
    init_buffer(pipe_, fv_, plan, "v");  // per-row scalars, one 32 B block each
    init_buffer(pipe_, fbc_, plan, "bc");
    const LocalTensor<float> v = fv_.Get<float>();
    bc_ = fbc_.Get<float>();
    bc2_ = bc_[64];
    m_ = v;
    l_ = v[8];
    part_ = v[16];
    part2_ = v[24];
    alpha_ = v[32];
    mean_ = v[40];
    rstd_ = v[48];
    chunks_ = ceil_div(a.h, c_);
    inv_h_ = 1.0f / static_cast<float>(a.h);
  }

  void row(std::uint64_t r) {
    for (std::uint64_t c = 0; c < chunks_; ++c) statistics(r, c);
    finish_statistics(r);
    for (std::uint64_t c = 0; c < chunks_; ++c) output(r, c);
  }

 private:
  static constexpr std::uint64_t kEs = sizeof(T);

  // Chunk c0.. of row `row` (w columns) into X in fp32: x, or x + residual rounded to T (written out in pass 1 when
  // the sum is an output), as the short path and an unfused Add leave it.
  void load(std::uint64_t row, std::uint64_t c0, std::uint64_t w, const F32Rows& x, bool write_sum) {
    const RowArgs& a = a_;
    LocalTensor<T> in = qin_.template AllocTensor<T>();
    copy_in(in, a.x + (row * a.h + c0) * kEs, w);
    if (a.add) copy_in(in[c_], a.res + (row * a.h + c0) * kEs, w);
    qin_.EnQue(in);
    in = qin_.template DeQue<T>();
    if (!a.add) {
      convert(x.t, in, w);
      qin_.FreeTensor(in);
      return;
    }
    // The sum goes through the output queue when written, else through the fp32 temporary (free until after X
    // is converted).
    LocalTensor<T> sum = write_sum ? qsum_.template AllocTensor<T>() : ft_.template Get<T>();
    Add(sum, in, in[c_], w);
    qin_.FreeTensor(in);
    convert(x.t, sum, w);
    if (write_sum) {
      qsum_.EnQue(sum);
      sum = qsum_.template DeQue<T>();
      copy_out(a.sum + (row * a.h + c0) * kEs, sum, w);
      qsum_.FreeTensor(sum);
    }
  }

  // Pass 1 on chunk c: the running max and sum of exponentials (softmax), or the sums of x^2 and x (norms).
  void statistics(std::uint64_t row, std::uint64_t c) {
    const std::uint64_t c0 = c * c_, w = std::min(c_, a_.h - c0);
    const F32Rows x{fx_.Get<float>(), w, ceil_to(w, 64)}, tm{ft_.Get<float>(), w, x.stride};
    load(row, c0, w, x, a_.sum != 0);
    if (norm_) {
      pad_rows(x, 1, 0.0f);
      Mul(tm.t, x.t, x.t, x.stride);
      reduce_rows(false, c == 0 ? l_ : part_, tm, 1, rs_);           // sum of x^2
      if (ln_) reduce_rows(false, c == 0 ? m_ : part2_, x, 1, rs_);  // sum of x
      if (c > 0) {
        Add(l_, l_, part_, 1);
        if (ln_) Add(m_, m_, part2_, 1);
      }
      return;
    }
    pad_rows(x, 1, kLowest);
    if (c == 0) {
      reduce_rows(true, m_, x, 1, rs_);
    } else {
      reduce_rows(true, part_, x, 1, rs_);
      Max(part_, m_, part_, 1);  // m_new
      Sub(alpha_, m_, part_, 1);
      Exp(alpha_, alpha_, 1);  // exp(m_old - m_new)
      Adds(m_, part_, 0.0f, 1);
    }
    row_scalar(RowOp::kSub, x, 1, m_, bc_);
    // The pads become 0. Log-softmax keeps x - m in X (a resident row needs it in pass 2).
    Exp(log_ ? tm.t : x.t, x.t, x.stride);
    reduce_rows(false, c == 0 ? l_ : part_, log_ ? tm : x, 1, rs_);
    if (c > 0) {
      Mul(l_, l_, alpha_, 1);
      Add(l_, l_, part_, 1);
    }
  }

  // log(sum) for log-softmax; for the norms var = E[x^2] - mean^2, rstd = 1 / sqrt(var + eps), broadcast for
  // x rstd - mean rstd in one pass, and the statistics written when asked.
  void finish_statistics(std::uint64_t row) {
    if (log_) Ln(l_, l_, 1);  // subtracted in pass 2
    if (!norm_) return;
    Muls(l_, l_, inv_h_, 1);
    if (ln_) {
      Muls(mean_, m_, inv_h_, 1);
      Mul(part_, mean_, mean_, 1);
      Sub(l_, l_, part_, 1);
    }
    Adds(l_, l_, a_.eps, 1);
    Rsqrt(rstd_, l_, 1);
    Brcb(bc_, rstd_, 1, BrcbRepeatParams{1, 8});
    if (ln_) {
      Mul(part_, mean_, rstd_, 1);
      Muls(part_, part_, -1.0f, 1);
      Brcb(bc2_, part_, 1, BrcbRepeatParams{1, 8});
    }
    if (!a_.stats) return;
    LocalTensor<float> st = qstat_.template AllocTensor<float>();
    Adds(st, mean_, 0.0f, 1);
    Adds(st[8], rstd_, 0.0f, 1);
    qstat_.EnQue(st);
    st = qstat_.template DeQue<float>();
    copy_out(a_.mean + row * 4, st, 1);
    copy_out(a_.rstd + row * 4, st[8], 1);
    qstat_.FreeTensor(st);
  }

  // Pass 2 on chunk c: the output, with gamma (and beta) for the norms.
  void output(std::uint64_t row, std::uint64_t c) {
    const RowArgs& a = a_;
    const std::uint64_t c0 = c * c_, w = std::min(c_, a.h - c0);
    const F32Rows x{fx_.Get<float>(), w, ceil_to(w, 64)};
    const bool resident = chunks_ == 1;
    LocalTensor<T> par;
    if (norm_) {
      par = qpar_.template AllocTensor<T>();
      copy_in(par, a.p1 + c0 * kEs, w);
      if (ln_) copy_in(par[c_], a.p2 + c0 * kEs, w);
      qpar_.EnQue(par);
    }
    // A row of one chunk is still in X from pass 1 (softmax: as exp(x - m)), so it is not read again.
    if (!resident) load(row, c0, w, x, false);
    if (!norm_) {
      if (!resident) {
        row_scalar(RowOp::kSub, x, 1, m_, bc_);
        if (!log_) Exp(x.t, x.t, x.stride);
      }
      row_scalar(log_ ? RowOp::kSub : RowOp::kDiv, x, 1, l_, bc_);
    } else if (ln_) {
      FusedMulAdd(x.t, bc_, bc2_, 64, u8(x.stride / 64), BinaryRepeatParams{1, 0, 0, 8, 0, 0});
    } else {
      Mul(x.t, x.t, bc_, 64, u8(x.stride / 64), BinaryRepeatParams{1, 1, 0, 8, 8, 0});
    }
    LocalTensor<T> out = qout_.template AllocTensor<T>();
    convert(out, x.t, w);
    if (norm_) {  // the affine step, in T
      par = qpar_.template DeQue<T>();
      if (ln_)
        FusedMulAdd(out, par, par[c_], w);
      else
        Mul(out, out, par, w);
      qpar_.FreeTensor(par);
    }
    qout_.EnQue(out);
    out = qout_.template DeQue<T>();
    copy_out(a.out + (row * a.h + c0) * kEs, out, w);
    qout_.FreeTensor(out);
  }

  const RowArgs& a_;
  const std::uint64_t c_;  // columns per chunk
  bool ln_ = false, norm_ = false, log_ = false;
  std::uint64_t chunks_ = 0;
  float inv_h_ = 0;
  TPipe pipe_;
  TQue<TPosition::VECIN, 2> qin_, qpar_;
  TQue<TPosition::VECOUT, 2> qout_;
  TQue<TPosition::VECOUT, 1> qsum_, qstat_;
  TBuf<TPosition::VECCALC> fx_, ft_, fpart_, fv_, fbc_;
  ReduceScratch rs_;
  LocalTensor<float> bc_, bc2_, m_, l_, part_, part2_, alpha_, mean_, rstd_;
};

}  // namespace

template <class T>
void long_row_kernel(const RowArgs& a) {
  const std::uint64_t first = GetBlockIdx() * a.per_block;
  if (first >= a.rows) return;
  const std::uint64_t count = std::min(a.per_block, a.rows - first);
  LongRowKernel<T> k(a);
  for (std::uint64_t row = first; row < first + count; ++row) k.row(row);
}

template void long_row_kernel<half>(const RowArgs&);
template void long_row_kernel<bfloat16_t>(const RowArgs&);
template void long_row_kernel<float>(const RowArgs&);

}  // namespace npusim::stack::ops::rows
