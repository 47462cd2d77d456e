// Conv2D's geometry on the host (stack/ops/conv): the device formats round-trip, the grouped weights pack as
// CANN's FRACTAL_Z packs them, and the op's reference on the device formats is the convolution a framework computes
// (against a direct NCHW convolution written here from the definition), for plain, strided, dilated, padded,
// grouped and depthwise cases; the tiling's plans fit and follow L1.
#include <gtest/gtest.h>

#include <random>

#include "common/config/loader.hpp"
#include "common/util/error.hpp"
#include "stack/ops/conv/conv_common.hpp"

namespace npusim::stack::ops::conv {
namespace {

// out[n, o, y, x] = sum over the group's input channels and the taps of w[o, i, a, b] x[n, g cin_g + i, y sh + a dh
// - pt, x sw + b dw - pl], taps outside the map reading 0 (ONNX Conv, torch.nn.functional.conv2d).
std::vector<double> direct_conv(const Conv2dCall& c, const std::vector<float>& x, const std::vector<float>& w,
                                std::uint32_t n, std::uint32_t h, std::uint32_t wd, std::uint32_t ho,
                                std::uint32_t wo) {
  const std::uint32_t cin_g = c.cin / c.groups, cout_g = c.cout / c.groups;
  std::vector<double> out(std::size_t{n} * c.cout * ho * wo, 0.0);
  for (std::uint32_t b = 0; b < n; ++b)
    for (std::uint32_t o = 0; o < c.cout; ++o)
      for (std::uint32_t y = 0; y < ho; ++y)
        for (std::uint32_t xo = 0; xo < wo; ++xo) {
          double sum = 0;
          const std::uint32_t g = o / cout_g;
          for (std::uint32_t i = 0; i < cin_g; ++i)
            for (std::uint32_t a = 0; a < c.kh; ++a)
              for (std::uint32_t bb = 0; bb < c.kw; ++bb) {
                const int yi = static_cast<int>(y * c.sh + a * c.dh) - static_cast<int>(c.pad_top);
                const int xi = static_cast<int>(xo * c.sw + bb * c.dw) - static_cast<int>(c.pad_left);
                if (yi < 0 || yi >= static_cast<int>(h) || xi < 0 || xi >= static_cast<int>(wd)) continue;
                const std::size_t ci = std::size_t{g} * cin_g + i;
                sum += static_cast<double>(w[((std::size_t{o} * cin_g + i) * c.kh + a) * c.kw + bb]) *
                       x[((std::size_t{b} * c.cin + ci) * h + static_cast<std::size_t>(yi)) * wd +
                         static_cast<std::size_t>(xi)];
              }
          out[((std::size_t{b} * c.cout + o) * ho + y) * wo + xo] = sum;
        }
  return out;
}

Conv2dCall call(std::uint32_t cin, std::uint32_t cout, std::uint32_t k, std::uint32_t stride, std::uint32_t pad,
                std::uint32_t groups) {
  Conv2dCall c;
  c.cin = cin;
  c.cout = cout;
  c.kh = c.kw = k;
  c.sh = c.sw = stride;
  c.pad_top = c.pad_left = c.pad_bottom = c.pad_right = pad;
  c.groups = groups;
  return c;
}

TEST(ConvGeometry, TheReferenceOnDeviceFormatsIsTheFrameworksConvolution) {
  std::vector<Conv2dCall> cases = {call(3, 32, 7, 2, 3, 1),    // a stem: 3 channels padded to a plane
                                   call(32, 32, 3, 1, 1, 32),  // depthwise: 16 groups a block
                                   call(48, 40, 3, 2, 1, 2),   // groups of 24 -> 20 channels
                                   call(20, 12, 1, 1, 0, 4),   // groups of 5 -> 3 channels, packed 4 to a block
                                   call(64, 24, 3, 1, 1, 1)};
  Conv2dCall odd = call(24, 16, 3, 1, 0, 1);  // dilated, uneven stride and pads
  odd.kw = 2;
  odd.sw = 2;
  odd.dh = 2;
  odd.pad_top = 1;
  odd.pad_bottom = 2;
  odd.pad_right = 1;
  cases.push_back(odd);
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  for (const Conv2dCall& c : cases) {
    const std::uint32_t n = 2, h = 9, wd = 11;
    std::vector<float> x(std::size_t{n} * c.cin * h * wd), w(std::size_t{c.cout} * (c.cin / c.groups) * c.kh * c.kw);
    for (float& v : x) v = u(rng);
    for (float& v : w) v = u(rng);
    const ConvShape s = conv_shape(c, x_shape(c, n, h, wd));
    const std::vector<float> x5 = nchw_to_5hd(x, n, c.cin, h, wd);
    EXPECT_EQ(from_5hd(x5, n, c.cin, h, wd), x);
    const std::vector<float> wz = oihw_to_fractal_z(w, s);
    ASSERT_EQ(wz.size(), elements(weight_shape(s)));
    const std::vector<float> got = from_5hd(conv_reference(s, x5, wz, nullptr), n, c.cout, s.ho, s.wo);
    const std::vector<double> want = direct_conv(c, x, w, n, h, wd, s.ho, s.wo);
    ASSERT_EQ(got.size(), want.size());
    for (std::size_t i = 0; i < got.size(); ++i) ASSERT_NEAR(got[i], want[i], 1e-5) << "cin " << c.cin << " i " << i;
  }
}

// E = min(lcm(lcm(Cin_g, 16) / Cin_g, lcm(Cout_g, 16) / Cout_g), G) groups per block (CANN's FRACTAL_Z for groups).
TEST(ConvGeometry, GroupsPackAsFractalZPacksThem) {
  struct Case {
    Conv2dCall c;
    std::uint32_t e, packs, cin_p, cout_p;
  };
  for (const Case& k : {Case{call(64, 64, 3, 1, 1, 1), 1, 1, 64, 64}, Case{call(96, 96, 3, 1, 1, 96), 16, 6, 16, 16},
                        Case{call(21, 21, 3, 1, 1, 7), 7, 1, 32, 32}, Case{call(64, 128, 1, 1, 0, 2), 1, 2, 32, 64},
                        Case{call(40, 40, 1, 1, 0, 20), 8, 3, 16, 16}}) {
    const ConvShape s = conv_shape(k.c, x_shape(k.c, 1, 8, 8));
    EXPECT_EQ(s.e, k.e) << k.c.cin << "/" << k.c.groups;
    EXPECT_EQ(s.packs, k.packs);
    EXPECT_EQ(s.cin_p, k.cin_p);
    EXPECT_EQ(s.cout_p, k.cout_p);
  }
  // 20 groups of 2 in 8-group blocks: the third block holds 4 groups, 8 channels, within the tensors' 3 planes.
  const Conv2dCall c = call(40, 40, 1, 1, 0, 20);
  const ConvShape s = conv_shape(c, x_shape(c, 1, 8, 8));
  EXPECT_EQ(s.planes_of(2), 1u);
  EXPECT_EQ(s.outputs_of(2), 16u);
}

TEST(ConvGeometry, ShapesThatCannotRunAreClearErrors) {
  const auto refused = [](Conv2dCall c, const Shape& x, const std::string& what) {
    try {
      conv_shape(c, x);
      ADD_FAILURE() << "accepted: " << what;
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
    }
  };
  refused(call(64, 64, 3, 1, 1, 1), {1, 4, 8, 8}, "NC1HWC0");
  refused(call(64, 64, 3, 1, 1, 1), {1, 3, 8, 8, 16}, "needs 4");
  refused(call(64, 60, 3, 1, 1, 8), {1, 4, 8, 8, 16}, "must divide");
  refused(call(64, 64, 9, 1, 0, 1), {1, 4, 8, 8, 16}, "larger than the padded map");
  refused(call(64, 64, 1, 1, 1, 1), {1, 4, 8, 8, 16}, "smaller than the dilated kernel height");
  Conv2dCall big = call(64, 64, 3, 64, 1, 1);
  refused(big, {1, 4, 8, 8, 16}, "outside 1..63");
}

// The plans fit every chip; half the L1 takes fewer channel planes per step, the same tile.
TEST(ConvGeometry, TilingFitsTheChipsAndFollowsL1) {
  const Conv2dCall c = call(256, 256, 3, 1, 1, 1);
  const ConvShape s = conv_shape(c, x_shape(c, 1, 56, 56));
  for (const char* chip : {"tiny", "910b", "310p", "910"}) {
    const config::ChipConfig cfg = config::load_config(chip).chip;
    const ConvTiling t = plan_conv(s, cfg);
    const ConvBuffers b = conv_buffers(s, t);
    EXPECT_LE(b.l1.total(cfg.buffers.l1.align), cfg.buffers.l1.size) << chip;
    EXPECT_LE(b.l0a.total(cfg.buffers.l0a.align), cfg.buffers.l0a.size) << chip;
    EXPECT_LE(b.l0b.total(cfg.buffers.l0b.align), cfg.buffers.l0b.size) << chip;
    EXPECT_LE(b.l0c.total(cfg.buffers.l0c.align), cfg.buffers.l0c.size) << chip;
    EXPECT_GE(t.band_rows, 3u) << chip;
    EXPECT_EQ(t.tiles, std::uint64_t{t.tiles_m} * t.tiles_n) << chip;
  }
  const config::ChipConfig full = config::load_config("910b").chip;
  const config::ChipConfig half = config::load_config("910b", {"buffers.l1.size=256KiB"}).chip;
  const ConvTiling a = plan_conv(s, full), h = plan_conv(s, half);
  EXPECT_LE(h.step_planes, a.step_planes);
  EXPECT_LE(conv_buffers(s, h).l1.total(half.buffers.l1.align), half.buffers.l1.size);
}

}  // namespace
}  // namespace npusim::stack::ops::conv
