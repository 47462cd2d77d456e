// Conv2D's geometry (conv_common.hpp): the shape a call implies, the device formats on the host, the reference.
#include <algorithm>
#include <numeric>

#include "common/util/error.hpp"
#include "hw/isa/instr.hpp"
#include "stack/ops/conv/conv_common.hpp"

namespace npusim::stack::ops::conv {

namespace {

std::string dims(std::uint32_t a, std::uint32_t b) {
  return std::to_string(a) + "x" + std::to_string(b);
}

}  // namespace

std::uint32_t ConvShape::planes_of(std::uint32_t p) const {
  return std::min(cin_p / kC0, c1 - p * (cin_p / kC0));
}
std::uint32_t ConvShape::outputs_of(std::uint32_t p) const {
  return std::min(cout_p, co1 * kC0 - p * cout_p);
}

ConvShape conv_shape(const Conv2dCall& c, const Shape& x) {
  ConvShape s;
  s.call = c;
  if (x.size() != 5 || x[4] != kC0)
    throw InputError("conv2d: x must be NC1HWC0 [N, C1, H, W, 16], got " + shape_string(x));
  if (c.cin == 0 || c.cout == 0 || c.groups == 0) throw InputError("conv2d: cin, cout and groups must be positive");
  if (c.cin % c.groups != 0 || c.cout % c.groups != 0)
    throw InputError("conv2d: groups=" + std::to_string(c.groups) + " must divide cin=" + std::to_string(c.cin) +
                     " and cout=" + std::to_string(c.cout));
  if (x[1] != ceil_div(c.cin, kC0))
    throw InputError("conv2d: x has " + std::to_string(x[1]) + " channel planes, cin=" + std::to_string(c.cin) +
                     " needs " + std::to_string(ceil_div(c.cin, kC0)));
  // Load3D's fields (Ascend C's LoadData3DParamsV2): filters up to 511, strides up to 63, pads up to 255, maps up
  // to 32767 pixels a side.
  if (c.kh < 1 || c.kh > 511 || c.kw < 1 || c.kw > 511)
    throw InputError("conv2d: kernel " + dims(c.kh, c.kw) + " is outside 1..511");
  if (c.sh < 1 || c.sh > 63 || c.sw < 1 || c.sw > 63)
    throw InputError("conv2d: stride " + dims(c.sh, c.sw) + " is outside 1..63");
  if (c.dh < 1 || c.dh > 255 || c.dw < 1 || c.dw > 255)
    throw InputError("conv2d: dilation " + dims(c.dh, c.dw) + " is outside 1..255");
  if (std::max({c.pad_top, c.pad_left, c.pad_bottom, c.pad_right}) > 255)
    throw InputError("conv2d: pads above 255 are not supported (Load3D's pad fields)");
  if (x[0] == 0 || x[2] == 0 || x[3] == 0 || x[2] > 32767 || x[3] > 32767)
    throw InputError("conv2d: x " + shape_string(x) + " needs N, H and W positive and H, W at most 32767");
  // Every output row must read at least one row of the map (its band is never empty): pads smaller than the
  // dilated kernel's height, as every framework's convolution has them.
  const std::uint64_t span_h = (c.kh - 1ULL) * c.dh + 1;
  if (c.pad_top >= span_h || c.pad_bottom >= span_h)
    throw InputError("conv2d: pads top=" + std::to_string(c.pad_top) + ", bottom=" + std::to_string(c.pad_bottom) +
                     " must be smaller than the dilated kernel height " + std::to_string(span_h));
  s.n = u32(x[0]);
  s.h = u32(x[2]);
  s.w = u32(x[3]);
  s.ho = hw::isa::img2col_out(s.h, c.pad_top + c.pad_bottom, c.kh, c.sh, c.dh);
  s.wo = hw::isa::img2col_out(s.w, c.pad_left + c.pad_right, c.kw, c.sw, c.dw);
  if (s.ho == 0 || s.wo == 0)
    throw InputError("conv2d: the kernel " + dims(c.kh, c.kw) + " (dilation " + dims(c.dh, c.dw) +
                     ") is larger than the padded map " +
                     dims(s.h + c.pad_top + c.pad_bottom, s.w + c.pad_left + c.pad_right));
  s.c1 = u32(ceil_div(c.cin, kC0));
  s.co1 = u32(ceil_div(c.cout, kC0));
  const std::uint32_t cin_g = c.cin / c.groups, cout_g = c.cout / c.groups;
  const std::uint32_t want = std::lcm(std::lcm(cin_g, kC0) / cin_g, std::lcm(cout_g, kC0) / cout_g);
  s.e = std::min(want, c.groups);
  s.packs = u32(ceil_div(c.groups, s.e));
  s.cin_p = u32(ceil_to(std::uint64_t{s.e} * cin_g, kC0));
  s.cout_p = u32(ceil_to(std::uint64_t{s.e} * cout_g, kC0));
  return s;
}

Shape x_shape(const Conv2dCall& c, std::uint32_t n, std::uint32_t h, std::uint32_t w) {
  return {n, ceil_div(c.cin, kC0), h, w, kC0};
}
Shape weight_shape(const ConvShape& s) {
  return {s.packs, std::uint64_t{s.cin_p / kC0} * s.taps(), s.cout_p / kC0, kC0, kC0};
}
Shape out_shape(const ConvShape& s) {
  return {s.n, s.co1, s.ho, s.wo, kC0};
}

std::uint32_t band_rows(const ConvShape& s, std::uint32_t base_m) {
  // A tile of base_m consecutive pixels spans at most (base_m - 1) / wo + 2 output rows (fewer when it cannot
  // straddle more), each sh input rows apart, plus the filter's dilated height.
  const std::uint64_t rows = std::min<std::uint64_t>(s.ho, (base_m - 1) / s.wo + 2);
  const std::uint64_t band = (rows - 1) * s.call.sh + (s.call.kh - 1ULL) * s.call.dh + 1;
  return u32(std::min<std::uint64_t>(band, s.h));
}

std::vector<float> nchw_to_5hd(const std::vector<float>& x, std::uint32_t n, std::uint32_t c, std::uint32_t h,
                               std::uint32_t w) {
  const std::uint64_t c1 = ceil_div(c, kC0), hw = std::uint64_t{h} * w;
  std::vector<float> out(n * c1 * hw * kC0, 0.0f);
  for (std::uint64_t b = 0; b < n; ++b)
    for (std::uint64_t ch = 0; ch < c; ++ch)
      for (std::uint64_t p = 0; p < hw; ++p)
        out[((b * c1 + ch / kC0) * hw + p) * kC0 + ch % kC0] = x[(b * c + ch) * hw + p];
  return out;
}

std::vector<float> from_5hd(const std::vector<float>& x, std::uint32_t n, std::uint32_t c, std::uint32_t h,
                            std::uint32_t w) {
  const std::uint64_t c1 = ceil_div(c, kC0), hw = std::uint64_t{h} * w;
  std::vector<float> out(std::uint64_t{n} * c * hw);
  for (std::uint64_t b = 0; b < n; ++b)
    for (std::uint64_t ch = 0; ch < c; ++ch)
      for (std::uint64_t p = 0; p < hw; ++p)
        out[(b * c + ch) * hw + p] = x[((b * c1 + ch / kC0) * hw + p) * kC0 + ch % kC0];
  return out;
}

std::vector<float> oihw_to_fractal_z(const std::vector<float>& w, const ConvShape& s) {
  const Conv2dCall& c = s.call;
  const std::uint32_t cin_g = c.cin / c.groups, cout_g = c.cout / c.groups, taps = s.taps();
  const std::uint64_t n1 = s.cout_p / kC0, rows = std::uint64_t{s.cin_p / kC0} * taps;
  std::vector<float> out(s.packs * rows * n1 * kC0 * kC0, 0.0f);
  for (std::uint32_t g = 0; g < c.groups; ++g) {
    const std::uint64_t p = g / s.e, slot = g % s.e;  // packed group, and place inside it
    for (std::uint32_t o = 0; o < cout_g; ++o) {
      const std::uint64_t co = slot * cout_g + o;  // output channel within the packed group
      for (std::uint32_t i = 0; i < cin_g; ++i) {
        const std::uint64_t ci = slot * cin_g + i;  // input channel within the packed group
        for (std::uint32_t t = 0; t < taps; ++t) {
          const std::uint64_t k_row = (ci / kC0) * taps + t;
          out[(((p * rows + k_row) * n1 + co / kC0) * kC0 + co % kC0) * kC0 + ci % kC0] =
              w[((static_cast<std::uint64_t>(g) * cout_g + o) * cin_g + i) * taps + t];
        }
      }
    }
  }
  return out;
}

std::vector<float> conv_reference(const ConvShape& s, const std::vector<float>& x, const std::vector<float>& w,
                                  const std::vector<float>* bias) {
  const Conv2dCall& c = s.call;
  const std::uint64_t hw = std::uint64_t{s.h} * s.w, pix = s.pixels(), taps = s.taps();
  const std::uint64_t n1 = s.cout_p / kC0, rows = std::uint64_t{s.cin_p / kC0} * taps;
  std::vector<float> out(std::uint64_t{s.n} * s.co1 * pix * kC0, 0.0f);
  std::vector<double> acc;
  for (std::uint32_t b = 0; b < s.n; ++b) {
    for (std::uint32_t p = 0; p < s.packs; ++p) {
      const std::uint32_t planes = s.planes_of(p), outs = s.outputs_of(p);
      const std::uint64_t x_plane0 = std::uint64_t{p} * (s.cin_p / kC0), o_plane0 = std::uint64_t{p} * n1;
      for (std::uint64_t m = 0; m < pix; ++m) {
        acc.assign(outs, 0.0);
        for (std::uint32_t pl = 0; pl < planes; ++pl) {
          for (std::uint64_t t = 0; t < taps; ++t) {
            const std::int64_t hi = static_cast<std::int64_t>(m / s.wo * c.sh + t / c.kw * c.dh) - c.pad_top;
            const std::int64_t wi = static_cast<std::int64_t>(m % s.wo * c.sw + t % c.kw * c.dw) - c.pad_left;
            if (hi < 0 || hi >= s.h || wi < 0 || wi >= s.w) continue;
            const float* xv = &x[(((std::uint64_t{b} * s.c1 + x_plane0 + pl) * hw) +
                                  static_cast<std::uint64_t>(hi) * s.w + static_cast<std::uint64_t>(wi)) *
                                 kC0];
            const float* wrow = &w[((p * rows + pl * taps + t) * n1) * kC0 * kC0];
            for (std::uint32_t o = 0; o < outs; ++o) {
              const float* wv = wrow + std::uint64_t{o} * kC0;
              double sum = 0;
              for (std::uint32_t k = 0; k < kC0; ++k) sum += static_cast<double>(xv[k]) * wv[k];
              acc[o] += sum;
            }
          }
        }
        for (std::uint32_t o = 0; o < outs; ++o) {
          double v = acc[o] + (bias ? (*bias)[p * s.cout_p + o] : 0.0);
          if (c.relu) v = std::max(v, 0.0);
          const std::uint64_t plane = o_plane0 + o / kC0;
          out[((std::uint64_t{b} * s.co1 + plane) * pix + m) * kC0 + o % kC0] = static_cast<float>(v);
        }
      }
    }
  }
  return out;
}

}  // namespace npusim::stack::ops::conv
