// LayerNorm (and AddLayerNorm, whose residual the pipeline adds first) and RMSNorm over the last dimension: the
// device steps of the short path (row_kernel.hpp) and the CPU reference.
//   LayerNorm: mean = E[x], var = E[x^2] - mean^2, y = (x - mean) rstd gamma + beta, rstd = 1 / sqrt(var + eps)
//   RMSNorm:   y = x rstd gamma, rstd = 1 / sqrt(E[x^2] + eps)
// The sums of x and x^2 take one sweep each; x rstd - mean rstd is one fused pass (both per-row scalars broadcast),
// so the fp32 work is five passes over the row; the affine step runs on the output in T (128 lanes per repeat for
// 16-bit types). 16-bit rows take their sums from the T rows (norm_stats16).
#include <cmath>

#include "stack/ops/rows/row_kernel.hpp"
#include "stack/ops/rows/row_ops.hpp"

namespace npusim::stack::ops::rows {

// Gamma (and beta) of the whole row once per core, kept in T.
template <class T>
void RowKernel<T>::norm_setup() {
  init_buffer(pipe_, fp1_, layout_.buffers, "gamma");
  gamma_ = fp1_.template Get<T>();
  copy_in(gamma_, a_.p1, len_);
  if (a_.kind == RowKind::kLayerNorm) {
    init_buffer(pipe_, fp2_, layout_.buffers, "beta");
    beta_ = fp2_.template Get<T>()[kBankSkew / sizeof(T)];  // the plan's skew (row_tiling.cpp)
    copy_in(beta_, a_.p2, len_);
  }
  const std::uint32_t loaded = pipe_.AllocEventID(PIPE_MTE2, PIPE_V);
  set_flag(PIPE_MTE2, PIPE_V, loaded);
  wait_flag(PIPE_MTE2, PIPE_V, loaded);
}

// Sums of x and x^2 of 16-bit rows from the T rows (squares rounded once to T, 128-lane partials), then in fp32
// from the partials: v0 = sum(x), v1 = sum(x^2).
template <class T>
void RowKernel<T>::norm_stats16(const LocalTensor<T>& in, std::uint64_t nr) {
  if (len_ % 128) {
    const std::uint64_t tail = len_ % 128;  // lanes >= tail of the last 128-lane piece are pads
    const std::uint64_t bits[2] = {tail >= 64 ? 0 : ~((1ULL << tail) - 1),
                                   tail >= 64 ? ~((1ULL << (tail - 64)) - 1) : ~0ULL};
    for (std::uint64_t r = 0; r < nr; ++r) Duplicate(in[r * tsi_ + len_ - tail], 0.0f, bits, 1, 1, 8);
  }
  const LocalTensor<T> sq = fsq_.template Get<T>(), pt = fpt_.template Get<T>(), pt2 = fpt2_.template Get<T>();
  Mul(sq, in, in, nr * tsi_);
  for (std::uint64_t r = 0; r < nr; ++r) {
    WholeReduceSum(pt[r * p16_], in[r * tsi_], 128, u8(k16_), 1, 1, 8);
    WholeReduceSum(pt2[r * p16_], sq[r * tsi_], 128, u8(k16_), 1, 1, 8);
  }
  const F32Rows p1{fpf_.Get<float>(), k16_, p16_}, p2{fpf2_.Get<float>(), k16_, p16_};
  Cast(p1.t, pt, RoundMode::CAST_NONE, nr * p16_);
  Cast(p2.t, pt2, RoundMode::CAST_NONE, nr * p16_);
  pad_rows(p1, nr, 0.0f);
  pad_rows(p2, nr, 0.0f);
  reduce_rows(false, v0_, p1, nr, rs_);
  reduce_rows(false, v1_, p2, nr, rs_);
}

template <class T>
void RowKernel<T>::norm(std::uint64_t nr, const LocalTensor<float>& mean_out, const LocalTensor<float>& rstd_out) {
  const std::uint64_t all = nr * fs_;
  const bool ln = a_.kind == RowKind::kLayerNorm;
  if (!stats16_) {
    Mul(tm_.t, x_.t, x_.t, all);
    pad_rows(tm_, nr, 0.0f);
    reduce_rows(false, v1_, tm_, nr, rs_);
  }
  Muls(v1_, v1_, inv_h_, nr);  // E[x^2]
  if (ln) {
    if (!stats16_) {
      pad_rows(x_, nr, 0.0f);
      reduce_rows(false, v0_, x_, nr, rs_);
    }
    Muls(v0_, v0_, inv_h_, nr);  // mean
    if (a_.stats) Adds(mean_out, v0_, 0.0f, nr);
    Mul(v2_, v0_, v0_, nr);
    Sub(v1_, v1_, v2_, nr);  // variance
  }
  Adds(v1_, v1_, a_.eps, nr);
  Rsqrt(v1_, v1_, nr);  // rstd
  if (a_.stats) Adds(rstd_out, v1_, 0.0f, nr);
  if (!ln) {
    row_scalar(RowOp::kMul, x_, nr, v1_, bc_);
    return;
  }
  Mul(v0_, v0_, v1_, nr);
  Muls(v0_, v0_, -1.0f, nr);  // -mean rstd
  Brcb(bc_, v1_, u8(ceil_div(nr, 8)), BrcbRepeatParams{1, 8});
  Brcb(bc2_, v0_, u8(ceil_div(nr, 8)), BrcbRepeatParams{1, 8});
  const BinaryRepeatParams p{1, 0, 0, 8, 0, 0};
  for (std::uint64_t r = 0; r < nr; ++r) FusedMulAdd(x_.row(r), bc_[r * 8], bc2_[r * 8], 64, u8(x_.stride / 64), p);
}

// The affine step on the output rows, in T.
template <class T>
void RowKernel<T>::norm_affine(const LocalTensor<T>& out, std::uint64_t nr) {
  for (std::uint64_t r = 0; r < nr; ++r) {
    const LocalTensor<T> row = out[r * ts_];
    if (a_.kind == RowKind::kLayerNorm)
      FusedMulAdd(row, gamma_, beta_, len_);
    else
      Mul(row, row, gamma_, len_);
  }
}

#define NPUSIM_NORM_STEPS(T)                                                                             \
  template void RowKernel<T>::norm_setup();                                                              \
  template void RowKernel<T>::norm_stats16(const LocalTensor<T>&, std::uint64_t);                        \
  template void RowKernel<T>::norm(std::uint64_t, const LocalTensor<float>&, const LocalTensor<float>&); \
  template void RowKernel<T>::norm_affine(const LocalTensor<T>&, std::uint64_t);
NPUSIM_NORM_STEPS(half)
NPUSIM_NORM_STEPS(bfloat16_t)
NPUSIM_NORM_STEPS(float)
#undef NPUSIM_NORM_STEPS

NormStats norm_reference(const float* x, const float* gamma, const float* beta, float* y, std::uint64_t h, double eps) {
  double mean = 0, var = 0;
  if (beta) {
    for (std::uint64_t c = 0; c < h; ++c) mean += x[c];
    mean /= static_cast<double>(h);
  }
  for (std::uint64_t c = 0; c < h; ++c) var += (x[c] - mean) * (x[c] - mean);
  const double rstd = 1.0 / std::sqrt(var / static_cast<double>(h) + eps);
  for (std::uint64_t c = 0; c < h; ++c)
    y[c] = static_cast<float>((x[c] - mean) * rstd * gamma[c] + (beta ? beta[c] : 0.0));
  return {static_cast<float>(mean), static_cast<float>(rstd)};
}

}  // namespace npusim::stack::ops::rows
