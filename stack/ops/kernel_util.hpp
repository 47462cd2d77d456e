// Device-side helpers shared by the op kernels: copies of whole or partial rows between GM and UB, and the fp32
// vector math the kernels compose (GELU in its erf and tanh forms, SiLU). Everything here issues ordinary
// firmware/kernel instructions; nothing is computed on the host.
#pragma once

#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <string>

#include "common/util/arith.hpp"
#include "firmware/kernel/context.hpp"
#include "firmware/kernel/kernel_api.hpp"
#include "stack/ops/buffer_plan.hpp"

namespace npusim::stack::ops {

using namespace fw::kernel;

using npusim::ceil_div;
using npusim::ceil_to;

// Whether the core running the kernel computes values. In timing-only mode buffers hold none, so a kernel that
// reads data to decide addresses (a block table, cache slots) takes a documented stand-in instead.
inline bool functional_mode() {
  return ctx().engine->mode() == hw::core::Mode::kFunctional;
}

// Copies `n` contiguous elements GM -> UB; a length that is not whole 32 B blocks uses the padded copy.
template <class T>
void copy_in(const LocalTensor<T>& dst, GM_ADDR src, std::uint64_t n) {
  GlobalTensor<T> g;
  g.SetGlobalBuffer(src);
  if ((n * sizeof(T)) % 32 == 0) {
    DataCopy(dst, g, n);
  } else {
    DataCopyPad(dst, g, DataCopyExtParams{1, u32(n * sizeof(T)), 0, 0}, DataCopyPadExtParams<T>{});
  }
}
template <class T>
void copy_out(GM_ADDR dst, const LocalTensor<T>& src, std::uint64_t n) {
  GlobalTensor<T> g;
  g.SetGlobalBuffer(dst);
  if ((n * sizeof(T)) % 32 == 0) {
    DataCopy(g, src, n);
  } else {
    DataCopyPad(g, src, DataCopyExtParams{1, u32(n * sizeof(T)), 0, 0});
  }
}

// Allocates the plan's buffer `name` to a queue (its slots) or a TBuf: the kernel's side of a BufferPlan.
template <TPosition pos, int depth>
void init_buffer(TPipe& pipe, TQue<pos, depth>& q, const BufferPlan& plan, const std::string& name) {
  const BufferPlan::Buffer& b = plan[name];
  pipe.InitBuffer(q, b.slots, b.bytes);
}
template <TPosition pos>
void init_buffer(TPipe& pipe, TBuf<pos>& buf, const BufferPlan& plan, const std::string& name) {
  const BufferPlan::Buffer& b = plan[name];
  if (b.slots != 1)
    throw std::logic_error("buffer plan: '" + name + "' has " + std::to_string(b.slots) + " slots, not 1");
  pipe.InitBuffer(buf, b.bytes);
}
// A planned buffer of n slots as n TBufs (a ping-pong the kernel guards with its own flags).
template <TPosition pos, std::size_t n>
void init_buffer(TPipe& pipe, TBuf<pos> (&bufs)[n], const BufferPlan& plan, const std::string& name) {
  const BufferPlan::Buffer& b = plan[name];
  if (b.slots != n)
    throw std::logic_error("buffer plan: '" + name + "' has " + std::to_string(b.slots) + " slots, not " +
                           std::to_string(n));
  for (TBuf<pos>& buf : bufs) pipe.InitBuffer(buf, b.bytes);
}

// A bias row of n values GM -> L1 -> the bias table (fp32), where a tile's first Mmad reads it: through the L1 queue
// `q1` and the bias-table queue `qbt`; returns the bias-table tensor, dequeued (to free after that Mmad).
template <class T>
LocalTensor<float> load_bias_table(TQue<TPosition::A1, 1>& q1, TQue<TPosition::C2, 1>& qbt, GM_ADDR bias,
                                   std::uint32_t n) {
  GlobalTensor<T> g;
  g.SetGlobalBuffer(bias);
  LocalTensor<T> b1 = q1.template AllocTensor<T>();
  DataCopyPad(b1, g, DataCopyExtParams{1, u32(n * sizeof(T)), 0, 0}, DataCopyPadExtParams<T>{});
  q1.EnQue(b1);
  b1 = q1.template DeQue<T>();
  LocalTensor<float> bt = qbt.template AllocTensor<float>();
  DataCopyBias(bt, b1, n);
  qbt.EnQue(bt);
  q1.FreeTensor(b1);
  return qbt.template DeQue<float>();
}

// Elements of a row of `n` elements in UB (rows start 32 B-aligned).
template <class T>
constexpr std::uint64_t ub_row(std::uint64_t n) {
  return ceil_to(n * sizeof(T), 32) / sizeof(T);
}

// `rows` rows of `n` elements, `gm_stride` elements apart in GM -> UB rows of ub_row<T>(n) elements (or of
// `ub_stride` elements, a multiple of 32 B, when given).
template <class T>
void copy_rows_in(const LocalTensor<T>& dst, GM_ADDR src, std::uint64_t rows, std::uint64_t n, std::uint64_t gm_stride,
                  std::uint64_t ub_stride = 0) {
  GlobalTensor<T> g;
  g.SetGlobalBuffer(src);
  const std::uint64_t gap = ub_stride ? (ub_stride - ub_row<T>(n)) * sizeof(T) / 32 : 0;
  DataCopyPad(dst, g, DataCopyExtParams{u16(rows), u32(n * sizeof(T)), u32((gm_stride - n) * sizeof(T)), u32(gap)},
              DataCopyPadExtParams<T>{});
}
template <class T>
void copy_rows_out(GM_ADDR dst, const LocalTensor<T>& src, std::uint64_t rows, std::uint64_t n, std::uint64_t gm_stride,
                   std::uint64_t ub_stride = 0) {
  GlobalTensor<T> g;
  g.SetGlobalBuffer(dst);
  const std::uint64_t gap = ub_stride ? (ub_stride - ub_row<T>(n)) * sizeof(T) / 32 : 0;
  DataCopyPad(g, src, DataCopyExtParams{u16(rows), u32(n * sizeof(T)), u32(gap), u32((gm_stride - n) * sizeof(T))});
}

// Casts between the op's element type and fp32 (a copy when T is fp32).
template <class D, class S>
void convert(const LocalTensor<D>& dst, const LocalTensor<S>& src, std::uint64_t n) {
  if constexpr (std::is_same_v<D, S>) {
    Adds(dst, src, 0.0f, n);
  } else {
    Cast(dst, src, RoundMode::CAST_RINT, n);
  }
}

enum class Activation : std::uint8_t {
  kNone, kRelu, kGeluErf, kGeluTanh, kSilu,
  kExp, kLog, kSqrt, kAbs, kNeg, kReciprocal, kSigmoid, kTanh, kErf,
};

// GELU, tanh form: x * sigmoid(2 sqrt(2/pi) (x + 0.044715 x^3)) = 0.5 x (1 + tanh(...)). Needs one temporary.
inline void gelu_tanh(const LocalTensor<float>& y, const LocalTensor<float>& x, const LocalTensor<float>& t,
                      std::uint64_t n) {
  const float k = static_cast<float>(-2.0 * std::sqrt(2.0 / M_PI));
  Mul(t, x, x, n);
  Mul(t, t, x, n);
  Muls(t, t, 0.044715f, n);
  Add(t, t, x, n);
  Muls(t, t, k, n);
  Exp(t, t, n);
  Adds(t, t, 1.0f, n);
  Div(y, x, t, n);
}

// erf(z) for z >= 0 into `out` (Abramowitz & Stegun 7.1.26, |error| <= 1.5e-7):
// erf(z) = 1 - t (a1 + t (a2 + t (a3 + t (a4 + t a5)))) exp(-z^2), t = 1 / (1 + p z). `z` is overwritten (it
// becomes t); `b` is scratch.
inline void erf_nonnegative(const LocalTensor<float>& out, const LocalTensor<float>& z, const LocalTensor<float>& b,
                            std::uint64_t n) {
  constexpr float p = 0.3275911f, a1 = 0.254829592f, a2 = -0.284496736f, a3 = 1.421413741f, a4 = -1.453152027f,
                  a5 = 1.061405429f;
  Mul(b, z, z, n);
  Muls(b, b, -1.0f, n);
  Exp(b, b, n);  // exp(-z^2)
  Muls(z, z, p, n);
  Adds(z, z, 1.0f, n);
  Reciprocal(z, z, n);  // t
  Muls(out, z, a5, n);
  for (float coef : {a4, a3, a2, a1}) {
    Adds(out, out, coef, n);
    Mul(out, out, z, n);
  }
  Mul(out, out, b, n);
  Muls(out, out, -1.0f, n);
  Adds(out, out, 1.0f, n);
}

// GELU, erf form: 0.5 (x + |x| erf(|x| / sqrt 2)). Needs three temporaries.
inline void gelu_erf(const LocalTensor<float>& y, const LocalTensor<float>& x, const LocalTensor<float>& a,
                     const LocalTensor<float>& b, const LocalTensor<float>& c, std::uint64_t n) {
  Abs(a, x, n);
  Muls(a, a, static_cast<float>(1.0 / std::sqrt(2.0)), n);
  erf_nonnegative(c, a, b, n);
  Abs(a, x, n);
  Mul(a, a, c, n);
  Add(a, a, x, n);
  Muls(y, a, 0.5f, n);
}

// erf(x) = sign(x) erf(|x|), the sign as x / (|x| + 1e-30), which is exact where it matters (erf(0) = 0 either
// way). Needs three temporaries.
inline void erf(const LocalTensor<float>& y, const LocalTensor<float>& x, const LocalTensor<float>& a,
                const LocalTensor<float>& b, const LocalTensor<float>& c, std::uint64_t n) {
  Abs(a, x, n);
  erf_nonnegative(c, a, b, n);
  Abs(b, x, n);
  Adds(b, b, 1e-30f, n);
  Div(b, x, b, n);  // sign(x)
  Mul(y, c, b, n);
}

// SiLU: x * sigmoid(x) = x / (1 + exp(-x)). Needs one temporary.
inline void silu(const LocalTensor<float>& y, const LocalTensor<float>& x, const LocalTensor<float>& t, std::uint64_t n) {
  Muls(t, x, -1.0f, n);
  Exp(t, t, n);
  Adds(t, t, 1.0f, n);
  Div(y, x, t, n);
}

// Applies `act` in place on fp32 values; `a`, `b`, `c` are temporaries of at least n elements.
inline void activate(Activation act, const LocalTensor<float>& x, const LocalTensor<float>& a, const LocalTensor<float>& b,
                     const LocalTensor<float>& c, std::uint64_t n) {
  switch (act) {
    case Activation::kNone: return;
    case Activation::kRelu: Relu(x, x, n); return;
    case Activation::kGeluErf: gelu_erf(x, x, a, b, c, n); return;
    case Activation::kGeluTanh: gelu_tanh(x, x, a, n); return;
    case Activation::kSilu: silu(x, x, a, n); return;
    case Activation::kExp: Exp(x, x, n); return;
    case Activation::kLog: Ln(x, x, n); return;
    case Activation::kSqrt: Sqrt(x, x, n); return;
    case Activation::kAbs: Abs(x, x, n); return;
    case Activation::kNeg: Muls(x, x, -1.0f, n); return;
    case Activation::kReciprocal: Reciprocal(x, x, n); return;
    case Activation::kSigmoid:  // 1 / (1 + exp(-x))
      Muls(x, x, -1.0f, n);
      Exp(x, x, n);
      Adds(x, x, 1.0f, n);
      Reciprocal(x, x, n);
      return;
    case Activation::kTanh:  // 1 - 2 / (exp(2x) + 1): saturates cleanly at both ends
      Muls(a, x, 2.0f, n);
      Exp(a, a, n);
      Adds(a, a, 1.0f, n);
      Reciprocal(a, a, n);
      Muls(a, a, -2.0f, n);
      Adds(x, a, 1.0f, n);
      return;
    case Activation::kErf: erf(x, x, a, b, c, n); return;
  }
}

// The host-side definitions the CPU references use.
inline float activate_ref(Activation act, float x) {
  switch (act) {
    case Activation::kNone: return x;
    case Activation::kRelu: return x > 0 ? x : 0.0f;
    case Activation::kGeluErf: return static_cast<float>(0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0))));
    case Activation::kGeluTanh:
      return static_cast<float>(0.5 * x * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x))));
    case Activation::kSilu: return static_cast<float>(x / (1.0 + std::exp(-static_cast<double>(x))));
    case Activation::kExp: return static_cast<float>(std::exp(static_cast<double>(x)));
    case Activation::kLog: return static_cast<float>(std::log(static_cast<double>(x)));
    case Activation::kSqrt: return static_cast<float>(std::sqrt(static_cast<double>(x)));
    case Activation::kAbs: return std::fabs(x);
    case Activation::kNeg: return -x;
    case Activation::kReciprocal: return static_cast<float>(1.0 / static_cast<double>(x));
    case Activation::kSigmoid: return static_cast<float>(1.0 / (1.0 + std::exp(-static_cast<double>(x))));
    case Activation::kTanh: return static_cast<float>(std::tanh(static_cast<double>(x)));
    case Activation::kErf: return static_cast<float>(std::erf(static_cast<double>(x)));
  }
  return x;
}

}  // namespace npusim::stack::ops
