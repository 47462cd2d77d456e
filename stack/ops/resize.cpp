// resize: 2-D nearest or bilinear resizing of the last two dims of an NCHW tensor (ONNX Resize / Upsample,
// torch.nn.functional.interpolate). The source coordinates follow ONNX's coordinate transformation modes; being
// separable, they are two host tables (per output row: the input rows and weight; per output column: the input
// columns and weight). A unit is a band of output rows of one channel plane: MTE2 brings the input rows the band
// reads (one copy); per output row a Gather picks each output column's input element (byte offsets built once per
// core in the UB), and for bilinear a second Gather the right neighbour, x0 + (x1 - x0) wx per column, the same for
// the lower input row and then across the two rows with the row's weight; MTE3 writes the band.
#include <algorithm>
#include <cmath>
#include <map>

#include "common/util/error.hpp"
#include "stack/ops/kernel_util.hpp"
#include "stack/ops/op.hpp"

namespace npusim::stack::ops {

using hw::isa::DType;

namespace {

// Source positions of an axis: per output index, the two input indices and the second one's weight.
struct Axis {
  std::vector<std::uint32_t> i0, i1;
  std::vector<float> w1;
};

struct ResizeArgs {
  GM_ADDR x = 0, out = 0;
  ResizeCall c;
  std::uint64_t planes = 0, h = 0, w = 0, ho = 0, wo = 0;
  Axis rows, cols;
  std::uint64_t band = 0, in_rows = 0;  // output rows per unit, input rows a band reads at most
};

// ONNX Resize's coordinate transformation: the input coordinate of output index o on an axis of `in` -> `out`
// elements at `scale`.
double source(const ResizeCall& c, double o, double in, double out, double scale) {
  switch (c.coord) {
    case ResizeCoord::kHalfPixel: return (o + 0.5) / scale - 0.5;
    case ResizeCoord::kPytorchHalfPixel: return out > 1 ? (o + 0.5) / scale - 0.5 : 0.0;
    // The resized length is in x scale, unrounded, as ONNX's reference has it (out itself when sizes are given).
    case ResizeCoord::kAlignCorners: return out > 1 ? o * (in - 1) / (in * scale - 1) : 0.0;
    case ResizeCoord::kAsymmetric: return o / scale;
  }
  return 0;
}

std::int64_t nearest(const ResizeCall& c, double x) {
  const double f = std::floor(x);
  switch (c.nearest) {
    case ResizeNearest::kFloor: return static_cast<std::int64_t>(f);
    case ResizeNearest::kCeil: return static_cast<std::int64_t>(std::ceil(x));
    case ResizeNearest::kRoundPreferCeil: return static_cast<std::int64_t>(x - f == 0.5 ? f + 1 : std::round(x));
    case ResizeNearest::kRoundPreferFloor: return static_cast<std::int64_t>(x - f == 0.5 ? f : std::round(x));
  }
  return 0;
}

Axis axis_of(const ResizeCall& c, std::uint64_t in, std::uint64_t out, double scale) {
  Axis a;
  const auto clamp = [&](std::int64_t i) {
    return static_cast<std::uint32_t>(std::clamp<std::int64_t>(i, 0, static_cast<std::int64_t>(in) - 1));
  };
  for (std::uint64_t o = 0; o < out; ++o) {
    const double x = source(c, static_cast<double>(o), static_cast<double>(in), static_cast<double>(out), scale);
    if (!c.linear) {
      a.i0.push_back(clamp(nearest(c, x)));
      a.i1.push_back(a.i0.back());
      a.w1.push_back(0.0f);
      continue;
    }
    const double xc = std::clamp(x, 0.0, static_cast<double>(in) - 1);
    const auto i0 = static_cast<std::int64_t>(std::floor(xc));
    a.i0.push_back(clamp(i0));
    a.i1.push_back(clamp(i0 + 1));
    a.w1.push_back(static_cast<float>(xc - static_cast<double>(i0)));
  }
  return a;
}

template <class T>
void resize_kernel(const ResizeArgs& a) {
  constexpr std::uint64_t es = sizeof(T);
  const std::uint64_t bands = ceil_div(a.ho, a.band), units = a.planes * bands;
  const std::uint64_t row = ub_row<T>(a.w), orow = ub_row<T>(a.wo), irow = ub_row<std::uint32_t>(a.wo);
  TPipe pipe;
  TQue<TPosition::VECIN, 2> qin;
  TQue<TPosition::VECOUT, 2> qout;
  TBuf<TPosition::VECCALC> foff0, foff1, fw, ft0, ft1, ft2;
  pipe.InitBuffer(qin, 2, a.in_rows * row * es);
  pipe.InitBuffer(qout, 2, a.band * orow * es);
  pipe.InitBuffer(foff0, irow * 4);
  if (a.c.linear) {
    pipe.InitBuffer(foff1, irow * 4);
    for (TBuf<TPosition::VECCALC>* b : {&fw, &ft0, &ft1, &ft2}) pipe.InitBuffer(*b, orow * es);
  }
  // The column tables: byte offsets of each output column's input elements, the right neighbour's weight.
  const LocalTensor<std::uint32_t> off0 = foff0.Get<std::uint32_t>(), off1 = foff1.Get<std::uint32_t>();
  const LocalTensor<T> wx = fw.Get<T>();
  for (std::uint64_t x = 0; x < a.wo; ++x) {
    off0.SetValue(x, u32(a.cols.i0[x] * es));
    if (a.c.linear) {
      off1.SetValue(x, u32(a.cols.i1[x] * es));
      T v{};
      hw::isa::store_float(reinterpret_cast<std::uint8_t*>(&v), dtype_of<T>(), a.cols.w1[x]);
      wx.SetValue(x, v);
    }
  }
  set_flag(PIPE_S, PIPE_V, 0);
  wait_flag(PIPE_S, PIPE_V, 0);
  GlobalTensor<T> gx, gout;
  gx.SetGlobalBuffer(a.x);
  gout.SetGlobalBuffer(a.out);
  for (std::uint64_t u = GetBlockIdx(); u < units; u += GetBlockNum()) {
    const std::uint64_t plane = u / bands, y0 = u % bands * a.band, ny = std::min(a.band, a.ho - y0);
    const std::uint64_t h0 = a.rows.i0[y0], h1 = a.rows.i1[y0 + ny - 1] + 1;  // input rows [h0, h1)
    LocalTensor<T> in = qin.AllocTensor<T>();
    copy_rows_in(in, a.x + (plane * a.h + h0) * a.w * es, h1 - h0, a.w, a.w, row);
    qin.EnQue(in);
    in = qin.DeQue<T>();
    LocalTensor<T> out = qout.AllocTensor<T>();
    for (std::uint64_t y = 0; y < ny; ++y) {
      const LocalTensor<T> top = in[(a.rows.i0[y0 + y] - h0) * row], dst = out[y * orow];
      if (!a.c.linear) {
        Gather(dst, top, off0, a.wo);
        continue;
      }
      // Across each input row: x0 + (x1 - x0) wx; then across the two rows with the row's weight.
      const LocalTensor<T> bottom = in[(a.rows.i1[y0 + y] - h0) * row];
      const LocalTensor<T> t0 = ft0.Get<T>(), t1 = ft1.Get<T>(), t2 = ft2.Get<T>();
      const auto across = [&](const LocalTensor<T>& src, const LocalTensor<T>& res) {
        Gather(res, src, off0, a.wo);
        Gather(t1, src, off1, a.wo);
        Sub(t1, t1, res, a.wo);
        Mul(t1, t1, wx, a.wo);
        Add(res, res, t1, a.wo);
      };
      across(top, t0);
      across(bottom, t2);
      Sub(t2, t2, t0, a.wo);
      Muls(t2, t2, a.rows.w1[y0 + y], a.wo);
      Add(dst, t0, t2, a.wo);
    }
    qin.FreeTensor(in);
    qout.EnQue(out);
    out = qout.DeQue<T>();
    copy_rows_out(a.out + (plane * a.ho + y0) * a.wo * es, out, ny, a.wo, a.wo, orow);
    qout.FreeTensor(out);
  }
}

ResizeCall parse_call(const Params& p) {
  ResizeCall c;
  const auto size = p.find("size");
  if (size == p.end())
    throw InputError("parameter 'size' is required: the output's height and width, e.g. -p size=64x64");
  const Shape s = parse_shape(size->second);
  if (s.size() != 2) throw InputError("parameter size='" + size->second + "' must be HxW");
  c.out_h = u32(s[0]);
  c.out_w = u32(s[1]);
  if (const auto it = p.find("mode"); it != p.end()) {
    if (it->second != "nearest" && it->second != "linear")
      throw InputError("parameter mode='" + it->second + "' is not one of nearest, linear");
    c.linear = it->second == "linear";
  }
  if (const auto it = p.find("coord"); it != p.end())
    c.coord = resize_coord(it->second, "parameter coord='" + it->second + "'");
  if (const auto it = p.find("nearest"); it != p.end())
    c.nearest = resize_nearest(it->second, "parameter nearest='" + it->second + "'");
  return c;
}

ResizeArgs args_of(const Shape& x, const ResizeCall& c) {
  if (x.size() < 2) throw InputError("resize: the input needs two dims to resize, got " + shape_string(x));
  if (c.out_h == 0 || c.out_w == 0) throw InputError("resize: the output size must be positive");
  ResizeArgs a;
  a.c = c;
  a.h = x[x.size() - 2];
  a.w = x[x.size() - 1];
  a.planes = elements(x) / (a.h * a.w);
  a.ho = c.out_h;
  a.wo = c.out_w;
  const double sh = c.scale_h > 0 ? c.scale_h : static_cast<double>(a.ho) / static_cast<double>(a.h);
  const double sw = c.scale_w > 0 ? c.scale_w : static_cast<double>(a.wo) / static_cast<double>(a.w);
  a.rows = axis_of(c, a.h, a.ho, sh);
  a.cols = axis_of(c, a.w, a.wo, sw);
  return a;
}

OpDef resize_op() {
  OpDef d;
  d.name = "resize";
  d.summary =
      "nearest or bilinear resizing of the last two dims (-p size=HxW -p mode=nearest|linear -p coord=... -p "
      "nearest=...)";
  d.params = {{"shape", kRequired},
              {"size", kRequired},
              {"mode", "nearest"},
              {"coord", "half_pixel"},
              {"nearest", "round_prefer_floor"}};
  d.parse = [](const Params& p) -> Call { return parse_call(p); };
  d.inputs = [](const Params& p, DType t) { return std::vector<TensorDesc>{{param_shape(p), t}}; };
  d.plan = [](const std::vector<TensorDesc>& in, const Call& call, const config::ChipConfig& chip) {
    ResizeArgs a = args_of(in[0].shape, call_as<ResizeCall>(call, "resize"));
    const std::uint64_t es = hw::isa::dtype_bytes(in[0].dtype);
    const std::uint64_t row = ceil_to(a.w * es, 32), orow = ceil_to(a.wo * es, 32), irow = ceil_to(a.wo * 4, 32);
    const std::uint64_t fixed = a.c.linear ? 2 * irow + 4 * orow : irow;
    // The most output rows whose input rows and output fit twice each beside the tables. The rows a band reads:
    // from its first row's upper input row to its last row's lower one (the tables are monotonic).
    for (a.band = a.ho; a.band > 0; a.band = a.band == 1 ? 0 : (a.band + 1) / 2) {
      a.in_rows = 0;
      for (std::uint64_t y0 = 0; y0 < a.ho; y0 += a.band) {
        const std::uint64_t y1 = std::min(a.ho, y0 + a.band) - 1;
        a.in_rows = std::max<std::uint64_t>(a.in_rows, a.rows.i1[y1] - a.rows.i0[y0] + 1);
      }
      if (fixed + 2 * (a.in_rows * row + a.band * orow) <= chip.buffers.ub.size) break;
    }
    if (a.band == 0)
      throw InputError("resize: one output row and its input rows do not fit the UB of chip " + chip.name);
    OpPlan plan;
    Shape out = in[0].shape;
    out[out.size() - 2] = a.ho;
    out[out.size() - 1] = a.wo;
    plan.outputs = {{out, in[0].dtype}};
    plan.type = KernelType::kVector;
    const std::uint64_t units = a.planes * ceil_div(a.ho, a.band);
    plan.block_dim = u32(std::min<std::uint64_t>(chip.vector_units(), units));
    plan.tiling = {{"band", static_cast<double>(a.band)}, {"units", static_cast<double>(units)}};
    const DType t = in[0].dtype;
    plan.kernel = [a, t](const std::vector<std::uint64_t>& buf) -> std::function<void()> {
      ResizeArgs args = a;
      args.x = buf[0];
      args.out = buf[1];
      if (t == DType::kFp32) return [args] { resize_kernel<float>(args); };
      if (t == DType::kBf16) return [args] { resize_kernel<bfloat16_t>(args); };
      return [args] { resize_kernel<half>(args); };
    };
    return plan;
  };
  d.reference = [](const std::vector<TensorDesc>& in, const Call& call, const std::vector<HostTensor>& v) {
    const ResizeArgs a = args_of(in[0].shape, call_as<ResizeCall>(call, "resize"));
    HostTensor out(a.planes * a.ho * a.wo);
    for (std::uint64_t p = 0; p < a.planes; ++p)
      for (std::uint64_t y = 0; y < a.ho; ++y)
        for (std::uint64_t x = 0; x < a.wo; ++x) {
          const auto at = [&](std::uint32_t r, std::uint32_t col) { return double{v[0][(p * a.h + r) * a.w + col]}; };
          const double wy = a.rows.w1[y], wx = a.cols.w1[x];
          const double top = at(a.rows.i0[y], a.cols.i0[x]) * (1 - wx) + at(a.rows.i0[y], a.cols.i1[x]) * wx;
          const double bottom = at(a.rows.i1[y], a.cols.i0[x]) * (1 - wx) + at(a.rows.i1[y], a.cols.i1[x]) * wx;
          out[(p * a.ho + y) * a.wo + x] = static_cast<float>(top * (1 - wy) + bottom * wy);
        }
    return std::vector<HostTensor>{out};
  };
  // Bilinear in a 16-bit type rounds at each of its three interpolation steps (a unit in the last place of values up
  // to 1 each: 2^-11 for fp16, 2^-8 for bf16).
  d.extra_atol = [](const std::vector<TensorDesc>& in, const Call& call) {
    if (!call_as<ResizeCall>(call, "resize").linear || in[0].dtype == DType::kFp32) return 0.0;
    return 3.0 * std::ldexp(1.0, in[0].dtype == DType::kBf16 ? -8 : -11);
  };
  return d;
}

}  // namespace

ResizeCoord resize_coord(const std::string& name, const std::string& what) {
  static const std::map<std::string, ResizeCoord> modes = {{"half_pixel", ResizeCoord::kHalfPixel},
                                                           {"pytorch_half_pixel", ResizeCoord::kPytorchHalfPixel},
                                                           {"align_corners", ResizeCoord::kAlignCorners},
                                                           {"asymmetric", ResizeCoord::kAsymmetric}};
  const auto m = modes.find(name);
  if (m == modes.end())
    throw InputError(what + " is not one of half_pixel, pytorch_half_pixel, align_corners, asymmetric");
  return m->second;
}

ResizeNearest resize_nearest(const std::string& name, const std::string& what) {
  static const std::map<std::string, ResizeNearest> modes = {{"round_prefer_floor", ResizeNearest::kRoundPreferFloor},
                                                             {"round_prefer_ceil", ResizeNearest::kRoundPreferCeil},
                                                             {"floor", ResizeNearest::kFloor},
                                                             {"ceil", ResizeNearest::kCeil}};
  const auto m = modes.find(name);
  if (m == modes.end()) throw InputError(what + " is not one of round_prefer_floor, round_prefer_ceil, floor, ceil");
  return m->second;
}

std::vector<OpDef> resize_ops() {
  return {resize_op()};
}

}  // namespace npusim::stack::ops
