// Softmax and log-softmax over the last dimension: the device steps of the short path (row_kernel.hpp) and the CPU
// reference. Softmax: m = max(x), e = exp(x - m), y = e / sum(e); log-softmax: y = (x - m) - log(sum(exp(x - m))).
// The pads of each row are set to the lowest float before the max, so exp turns them into 0 for the sum.
#include <cmath>

#include "stack/ops/rows/row_kernel.hpp"
#include "stack/ops/rows/row_ops.hpp"

namespace npusim::stack::ops::rows {

template <class T>
void RowKernel<T>::subtract_row_max(std::uint64_t nr) {
  pad_rows(x_, nr, kLowest);
  reduce_rows(true, v0_, x_, nr, rs_);
  row_scalar(RowOp::kSub, x_, nr, v0_, bc_);
}

template <class T>
void RowKernel<T>::softmax(std::uint64_t nr) {
  const std::uint64_t all = nr * fs_;
  subtract_row_max(nr);
  Exp(x_.t, x_.t, all);  // the pads become 0
  reduce_rows(false, v1_, x_, nr, rs_);
  row_scalar(RowOp::kDiv, x_, nr, v1_, bc_);
}

template <class T>
void RowKernel<T>::log_softmax(std::uint64_t nr) {
  const std::uint64_t all = nr * fs_;
  subtract_row_max(nr);
  Exp(tm_.t, x_.t, all);  // the pads become 0
  reduce_rows(false, v1_, tm_, nr, rs_);
  Ln(v1_, v1_, nr);
  row_scalar(RowOp::kSub, x_, nr, v1_, bc_);
}

template void RowKernel<half>::subtract_row_max(std::uint64_t);
template void RowKernel<bfloat16_t>::subtract_row_max(std::uint64_t);
template void RowKernel<float>::subtract_row_max(std::uint64_t);
template void RowKernel<half>::softmax(std::uint64_t);
template void RowKernel<bfloat16_t>::softmax(std::uint64_t);
template void RowKernel<float>::softmax(std::uint64_t);
template void RowKernel<half>::log_softmax(std::uint64_t);
template void RowKernel<bfloat16_t>::log_softmax(std::uint64_t);
template void RowKernel<float>::log_softmax(std::uint64_t);

void softmax_reference(const float* x, float* y, std::uint64_t h, bool log) {
  double mx = -INFINITY, sum = 0;
  for (std::uint64_t c = 0; c < h; ++c) mx = std::max<double>(mx, x[c]);
  for (std::uint64_t c = 0; c < h; ++c) sum += std::exp(x[c] - mx);
  for (std::uint64_t c = 0; c < h; ++c)
    y[c] = static_cast<float>(!log ? std::exp(x[c] - mx) / sum : x[c] - mx - std::log(sum));
}

}  // namespace npusim::stack::ops::rows
