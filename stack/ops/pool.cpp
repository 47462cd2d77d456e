// max_pool and avg_pool on NC1HWC0, the layout CANN pools in: a pixel's 16 channels of a plane are one 32 B block,
// so a vector repeat covers 8 output pixels and a window tap is one Max (Add) whose second operand steps `stride`
// blocks a pixel. A unit is a band of output rows of one image's channel plane: MTE2 brings the input rows the band
// reads (one contiguous copy), the Vector unit takes per output row and tap the Max (sum) of the pixels whose tap
// falls inside the map (padding is never read: -inf for MaxPool, 0 for AveragePool, as ONNX defines them), an
// average divides by the window's size or by the taps inside the map (count_include_pad 0: a per-row scalar times
// a per-column factor row built once), and MTE3 writes the band (one copy).
#include <algorithm>
#include <cmath>
#include <limits>

#include "common/util/error.hpp"
#include "hw/isa/instr.hpp"
#include "stack/ops/kernel_util.hpp"
#include "stack/ops/op.hpp"

namespace npusim::stack::ops {

using hw::isa::DType;

namespace {

constexpr std::uint64_t kC0 = 16;

struct PoolArgs {
  GM_ADDR x = 0, out = 0;
  PoolCall c;
  std::uint64_t n = 0, c1 = 0, h = 0, w = 0, ho = 0, wo = 0;
  std::uint64_t band = 0;     // output rows per unit
  std::uint64_t in_rows = 0;  // input rows a band reads at most
};

// Output columns [lo, hi] whose tap j reads an input column inside the map, or lo > hi when none does.
std::pair<std::int64_t, std::int64_t> columns(const PoolArgs& a, std::uint64_t j) {
  const std::int64_t off = static_cast<std::int64_t>(j * a.c.dw) - a.c.pad_left;  // input column of output 0's tap
  const std::int64_t sw = a.c.sw;
  const std::int64_t lo = off >= 0 ? 0 : (-off + sw - 1) / sw;
  const std::int64_t last = static_cast<std::int64_t>(a.w) - 1 - off;
  const std::int64_t hi = last < 0 ? -1 : std::min<std::int64_t>(static_cast<std::int64_t>(a.wo) - 1, last / sw);
  return {lo, hi};
}

// Taps of window row/column positions inside the map: output index y (or x) of a map of `in` pixels.
std::uint64_t inside(std::int64_t start, std::uint64_t k, std::uint64_t d, std::uint64_t in) {
  std::uint64_t n = 0;
  for (std::uint64_t i = 0; i < k; ++i) {
    const std::int64_t p = start + static_cast<std::int64_t>(i * d);
    n += p >= 0 && p < static_cast<std::int64_t>(in);
  }
  return n;
}

// The column factors of an average without the padding: pixel x of a row holds 1 / (its taps inside the map), runs
// of equal factors written with one Duplicate each.
template <class T>
void column_factors(const PoolArgs& a, const LocalTensor<T>& f) {
  std::uint64_t x = 0;
  while (x < a.wo) {
    const auto cols = [&](std::uint64_t i) {
      return inside(static_cast<std::int64_t>(i * a.c.sw) - a.c.pad_left, a.c.kw, a.c.dw, a.w);
    };
    std::uint64_t end = x + 1;
    while (end < a.wo && cols(end) == cols(x)) ++end;
    Duplicate(f[x * kC0], 1.0 / static_cast<double>(cols(x)), (end - x) * kC0);
    x = end;
  }
}

template <class T, bool kMax>
void pool_kernel(const PoolArgs& a) {
  const PoolCall& c = a.c;
  const std::uint64_t bands = ceil_div(a.ho, a.band), units = a.n * a.c1 * bands;
  TPipe pipe;
  TQue<TPosition::VECIN, 2> qin;
  TQue<TPosition::VECOUT, 2> qout;
  pipe.InitBuffer(qin, 2, a.in_rows * a.w * kC0 * sizeof(T));
  pipe.InitBuffer(qout, 2, a.band * a.wo * kC0 * sizeof(T));
  TBuf<TPosition::VECCALC> factors;
  const bool per_column = !kMax && !c.count_include_pad;
  if (per_column) {
    pipe.InitBuffer(factors, a.wo * kC0 * sizeof(T));
    column_factors(a, factors.Get<T>());
  }
  GlobalTensor<T> gx, gout;
  gx.SetGlobalBuffer(a.x);
  gout.SetGlobalBuffer(a.out);
  for (std::uint64_t u = GetBlockIdx(); u < units; u += GetBlockNum()) {
    const std::uint64_t plane = u / bands, y0 = u % bands * a.band, ny = std::min(a.band, a.ho - y0);
    // Input rows [h0, h1) the band's windows touch, clipped to the map.
    const std::int64_t top = static_cast<std::int64_t>(y0 * c.sh) - c.pad_top;
    const std::int64_t bottom = static_cast<std::int64_t>((y0 + ny - 1) * c.sh + (c.kh - 1) * c.dh) - c.pad_top + 1;
    const std::uint64_t h0 = static_cast<std::uint64_t>(std::max<std::int64_t>(0, top));
    const std::uint64_t h1 = static_cast<std::uint64_t>(std::min<std::int64_t>(static_cast<std::int64_t>(a.h), bottom));
    LocalTensor<T> in = qin.AllocTensor<T>();
    DataCopy(in, gx[(plane * a.h + h0) * a.w * kC0], (h1 - h0) * a.w * kC0);
    qin.EnQue(in);
    in = qin.DeQue<T>();
    LocalTensor<T> out = qout.AllocTensor<T>();
    Duplicate(out, kMax ? -std::numeric_limits<float>::infinity() : 0.0f, ny * a.wo * kC0);
    for (std::uint64_t y = 0; y < ny; ++y) {
      for (std::uint64_t i = 0; i < c.kh; ++i) {
        const std::int64_t hi = static_cast<std::int64_t>((y0 + y) * c.sh + i * c.dh) - c.pad_top;
        if (hi < 0 || hi >= static_cast<std::int64_t>(a.h)) continue;
        for (std::uint64_t j = 0; j < c.kw; ++j) {
          const auto [lo, last] = columns(a, j);
          if (lo > last) continue;
          const std::uint64_t wi = static_cast<std::uint64_t>(lo) * c.sw + j * c.dw - c.pad_left;
          const LocalTensor<T> dst = out[(y * a.wo + static_cast<std::uint64_t>(lo)) * kC0];
          const LocalTensor<T> src = in[((static_cast<std::uint64_t>(hi) - h0) * a.w + wi) * kC0];
          // 8 pixels a repeat: the output's blocks in a row, the input's `sw` blocks apart.
          const std::uint64_t pixels = static_cast<std::uint64_t>(last - lo + 1);
          for (std::uint64_t p = 0; p < pixels; p += 8 * 255) {
            const std::uint64_t np = std::min<std::uint64_t>(8 * 255, pixels - p);
            const std::uint64_t full = np / 8, tail = np % 8;
            const BinaryRepeatParams rp{1, 1, u8(c.sw), 8, 8, u8(8 * c.sw)};
            const auto combine = [&](std::uint64_t at, std::uint64_t lanes, std::uint64_t repeat) {
              if (kMax)
                Max(dst[at * kC0], dst[at * kC0], src[at * c.sw * kC0], lanes, u8(repeat), rp);
              else
                Add(dst[at * kC0], dst[at * kC0], src[at * c.sw * kC0], lanes, u8(repeat), rp);
            };
            if (full > 0) combine(p, 128, full);
            if (tail > 0) combine(p + full * 8, tail * kC0, 1);
          }
        }
      }
    }
    if (!kMax) {
      for (std::uint64_t y = 0; y < ny; ++y) {
        const LocalTensor<T> row = out[y * a.wo * kC0];
        if (c.count_include_pad) {
          Muls(row, row, 1.0 / (c.kh * c.kw), a.wo * kC0);
          continue;
        }
        const std::int64_t top_tap = static_cast<std::int64_t>((y0 + y) * c.sh) - c.pad_top;
        Muls(row, row, 1.0 / static_cast<double>(inside(top_tap, c.kh, c.dh, a.h)), a.wo * kC0);
        Mul(row, row, factors.Get<T>(), a.wo * kC0);
      }
    }
    qin.FreeTensor(in);
    qout.EnQue(out);
    out = qout.DeQue<T>();
    DataCopy(gout[(plane * a.ho + y0) * a.wo * kC0], out, ny * a.wo * kC0);
    qout.FreeTensor(out);
  }
}

PoolCall parse_call(const Params& p, bool max) {
  PoolCall c;
  parse_window(p, c, 255, 31);
  if (!max) c.count_include_pad = param_uint(p, "count_include_pad", 0, 1);
  return c;
}

PoolArgs args_of(const std::string& op, const Shape& x, const PoolCall& c) {
  if (x.size() != 5 || x[4] != kC0)
    throw InputError(op + ": x must be NC1HWC0 [N, C1, H, W, 16], got " + shape_string(x));
  if (c.kh == 0 || c.kw == 0 || c.sh == 0 || c.sw == 0 || c.dh == 0 || c.dw == 0 || c.sw > 31)
    throw InputError(op + ": kernel, dilation and stride must be positive, the width stride at most 31");
  const std::uint64_t span_h = (c.kh - 1ULL) * c.dh + 1, span_w = (c.kw - 1ULL) * c.dw + 1;
  if (c.pad_top >= span_h || c.pad_bottom >= span_h || c.pad_left >= span_w || c.pad_right >= span_w)
    throw InputError(op + ": each pad must be smaller than the dilated kernel (a window inside the padding alone)");
  PoolArgs a;
  a.c = c;
  a.n = x[0];
  a.c1 = x[1];
  a.h = x[2];
  a.w = x[3];
  a.ho = hw::isa::img2col_out(u32(a.h), c.pad_top + c.pad_bottom, c.kh, c.sh, c.dh);
  a.wo = hw::isa::img2col_out(u32(a.w), c.pad_left + c.pad_right, c.kw, c.sw, c.dw);
  if (a.ho == 0 || a.wo == 0) throw InputError(op + ": the window is larger than the padded map " + shape_string(x));
  return a;
}

// The definition: per output pixel and channel, the max (or the mean, over the taps inside the map or over the
// whole window) of the window's taps inside the map.
HostTensor pool_reference(const PoolArgs& a, bool max, const HostTensor& x) {
  const PoolCall& c = a.c;
  HostTensor out(a.n * a.c1 * a.ho * a.wo * kC0);
  for (std::uint64_t pl = 0; pl < a.n * a.c1; ++pl)
    for (std::uint64_t y = 0; y < a.ho; ++y)
      for (std::uint64_t xo = 0; xo < a.wo; ++xo)
        for (std::uint64_t k = 0; k < kC0; ++k) {
          double acc = max ? -std::numeric_limits<double>::infinity() : 0.0;
          std::uint64_t taps = 0;
          for (std::uint64_t i = 0; i < c.kh; ++i)
            for (std::uint64_t j = 0; j < c.kw; ++j) {
              const std::int64_t hi = static_cast<std::int64_t>(y * c.sh + i * c.dh) - c.pad_top;
              const std::int64_t wi = static_cast<std::int64_t>(xo * c.sw + j * c.dw) - c.pad_left;
              if (hi < 0 || wi < 0 || hi >= static_cast<std::int64_t>(a.h) || wi >= static_cast<std::int64_t>(a.w))
                continue;
              const double v =
                  x[((pl * a.h + static_cast<std::uint64_t>(hi)) * a.w + static_cast<std::uint64_t>(wi)) * kC0 + k];
              acc = max ? std::max(acc, v) : acc + v;
              ++taps;
            }
          if (!max) acc /= static_cast<double>(c.count_include_pad ? std::uint64_t{c.kh} * c.kw : taps);
          out[((pl * a.ho + y) * a.wo + xo) * kC0 + k] = static_cast<float>(acc);
        }
  return out;
}

OpDef pool_op(const std::string& name, bool max) {
  OpDef d;
  d.name = name;
  d.summary = max ? "2-D max pooling on NC1HWC0 (-p kernel=3 -p stride=2 -p pad=1; dilation); fp16/bf16"
                  : "2-D average pooling on NC1HWC0 (-p kernel=3 -p stride=2 -p pad=1; dilation, count_include_pad); "
                    "fp16/bf16";
  d.params = {{"shape", kRequired}, {"kernel", "2"}, {"stride", "1"}, {"pad", "0"}, {"dilation", "1"}};
  if (!max) d.params.push_back({"count_include_pad", "0"});
  d.parse = [max](const Params& p) -> Call { return parse_call(p, max); };
  d.inputs = [](const Params& p, DType t) { return std::vector<TensorDesc>{{param_shape(p), t}}; };
  d.plan = [name, max](const std::vector<TensorDesc>& in, const Call& call, const config::ChipConfig& chip) {
    PoolArgs a = args_of(name, in[0].shape, call_as<PoolCall>(call, name));
    const std::uint64_t es = hw::isa::dtype_bytes(in[0].dtype);
    if (es == 4) throw InputError(name + " takes fp16 or bf16 (NC1HWC0's 16 channels a block are 16-bit)");
    // The most output rows whose input rows and output fit twice each in the UB (beside an average's factor row).
    const std::uint64_t row_in = a.w * kC0 * es, row_out = a.wo * kC0 * es;
    const std::uint64_t ub = chip.buffers.ub.size - (max ? 0 : ceil_to(row_out, 32));
    for (a.band = a.ho; a.band > 0; --a.band) {
      a.in_rows = std::min<std::uint64_t>(a.h, (a.band - 1) * a.c.sh + (a.c.kh - 1ULL) * a.c.dh + 1);
      if (2 * (ceil_to(a.in_rows * row_in, 32) + ceil_to(a.band * row_out, 32)) <= ub) break;
    }
    if (a.band == 0)
      throw InputError(name + ": one output row and its input rows do not fit the UB of chip " + chip.name);
    OpPlan plan;
    plan.outputs = {{Shape{a.n, a.c1, a.ho, a.wo, kC0}, in[0].dtype}};
    plan.type = KernelType::kVector;
    const std::uint64_t units = a.n * a.c1 * ceil_div(a.ho, a.band);
    plan.block_dim = u32(std::min<std::uint64_t>(chip.vector_units(), units));
    plan.tiling = {{"band", static_cast<double>(a.band)}, {"units", static_cast<double>(units)}};
    const DType t = in[0].dtype;
    plan.kernel = [a, t, max](const std::vector<std::uint64_t>& buf) -> std::function<void()> {
      PoolArgs args = a;
      args.x = buf[0];
      args.out = buf[1];
      if (t == DType::kBf16) {
        if (max) return [args] { pool_kernel<bfloat16_t, true>(args); };
        return [args] { pool_kernel<bfloat16_t, false>(args); };
      }
      if (max) return [args] { pool_kernel<half, true>(args); };
      return [args] { pool_kernel<half, false>(args); };
    };
    return plan;
  };
  d.reference = [name, max](const std::vector<TensorDesc>& in, const Call& call, const std::vector<HostTensor>& v) {
    return std::vector<HostTensor>{
        pool_reference(args_of(name, in[0].shape, call_as<PoolCall>(call, name)), max, v[0])};
  };
  if (!max) {
    // A sum of up to kh x kw values rounded to the 16-bit type at each step (the Vector unit adds in fp16).
    d.extra_atol = [name](const std::vector<TensorDesc>& in, const Call& call) {
      const PoolCall& c = call_as<PoolCall>(call, name);
      return in[0].dtype == DType::kBf16 ? 0.0 : 1e-3 * std::sqrt(static_cast<double>(c.kh) * c.kw);
    };
  }
  return d;
}

}  // namespace

std::vector<OpDef> pool_ops() {
  return {pool_op("max_pool", true), pool_op("avg_pool", false)};
}

}  // namespace npusim::stack::ops
