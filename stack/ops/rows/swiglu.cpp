// SwiGLU: y = silu(a) b with [a, b] the two halves of the last dimension (loaded as two halves, X and X2).
#include "stack/ops/rows/row_kernel.hpp"
#include "stack/ops/rows/row_ops.hpp"

namespace npusim::stack::ops::rows {

template <class T>
void RowKernel<T>::swiglu(std::uint64_t nr) {
  const std::uint64_t all = nr * fs_;
  silu(x_.t, x_.t, tm_.t, all);
  Mul(x_.t, x_.t, x2_.t, all);
}

template void RowKernel<half>::swiglu(std::uint64_t);
template void RowKernel<bfloat16_t>::swiglu(std::uint64_t);
template void RowKernel<float>::swiglu(std::uint64_t);

void swiglu_reference(const float* x, float* y, std::uint64_t ho) {
  for (std::uint64_t c = 0; c < ho; ++c)
    y[c] = static_cast<float>(activate_ref(Activation::kSilu, x[c]) * static_cast<double>(x[c + ho]));
}

}  // namespace npusim::stack::ops::rows
