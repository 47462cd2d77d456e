// `npusim op conv2d`: values against the CPU reference (double accumulation over the device formats; the reference
// itself is checked against a direct NCHW convolution in tests/stack/ops/conv_geometry_test.cpp) over strides,
// dilations, pads, groups, depthwise, bias and ReLU, on split (tiny, 910b) and coupled (910) chips; the img2col
// matrix exists only in L0A (the bytes MTE1 writes and MTE2 reads, by formula); the Cube's time is the Mmads'
// fractal steps exactly; bad calls are clear errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "cli/cli_support.hpp"

namespace {

using npusim_test::op_json;

TEST(OpConv, RandomShapesMatchTheReferenceOnSplitAndCoupledChips) {
  std::mt19937 rng(5);
  std::uniform_int_distribution<int> size(5, 40), chan(1, 70), kern(1, 4), two(1, 2);
  int cases = 0;
  for (const char* config : {"tiny", "910b", "910"}) {
    for (int i = 0; i < 6; ++i, ++cases) {
      const int k = kern(rng), dil = two(rng), span = (k - 1) * dil + 1;
      const int groups = i % 3 == 1 ? 2 : 1;
      const int cin = chan(rng) * groups, cout = chan(rng) * groups;
      const int pad = std::min(span - 1, i % 2 == 0 ? span / 2 : 0);
      std::string args = std::string("conv2d --check --config ") + config + " -p N=" + std::to_string(two(rng)) +
                         " -p C=" + std::to_string(cin) + " -p H=" + std::to_string(size(rng) + span) +
                         " -p W=" + std::to_string(size(rng) + 7) + " -p cout=" + std::to_string(cout) +
                         " -p kernel=" + std::to_string(k) + "," + std::to_string(kern(rng)) +
                         " -p stride=" + std::to_string(two(rng)) + "," + std::to_string(two(rng)) +
                         " -p dilation=" + std::to_string(dil) + " -p pad=" + std::to_string(pad) +
                         " -p groups=" + std::to_string(groups) + " -p relu=" + std::to_string(i % 2) + " --dtype " +
                         (i % 3 == 2 ? "bf16" : "fp16");
      if (std::string(config) != "910") args += " -p bias=" + std::to_string((i / 2) % 2);  // 910 has no bias table
      const auto j = op_json(args);
      EXPECT_TRUE(j["check"]["passed"].get<bool>()) << args << " " << j["check"];
    }
  }
  EXPECT_EQ(cases, 18);
}

// Depthwise (16 channels a block on the Cube), groups that pack into a partial last block, a stem's 3 channels.
TEST(OpConv, DepthwiseGroupedAndStemConvolutionsMatchTheReference) {
  for (const char* args :
       {"-p N=2 -p C=96 -p H=15 -p W=15 -p cout=96 -p kernel=3 -p pad=1 -p groups=96 -p bias=1",
        "-p C=96 -p H=14 -p W=14 -p cout=192 -p kernel=3 -p stride=2 -p pad=1 -p groups=96",
        "-p C=40 -p H=9 -p W=9 -p cout=40 -p groups=20 -p relu=1",
        "-p N=2 -p C=3 -p H=64 -p W=64 -p cout=64 -p kernel=7 -p stride=2 -p pad=3 -p bias=1 -p relu=1"}) {
    const auto j = op_json(std::string("conv2d --check ") + args);
    EXPECT_TRUE(j["check"]["passed"].get<bool>()) << args << " " << j["check"];
  }
}

// K in several L1 steps (an L1 of 64 KiB holds a few channel planes at a time) and a map so tall that a band's
// plane stride does not fit one DataCopy (one copy per plane).
TEST(OpConv, StepsOverChannelPlanesAndTallMapsMatchTheReference) {
  const auto steps = op_json(
      "conv2d --check -p C=256 -p H=12 -p W=12 -p cout=64 -p kernel=3 -p pad=1 "
      "--set buffers.l1.size=64KiB");
  EXPECT_TRUE(steps["check"]["passed"].get<bool>()) << steps["check"];
  EXPECT_LT(steps["op"]["tiling"]["step_planes"].get<double>(), 16);
  const auto tall = op_json("conv2d --check -p C=16 -p H=300 -p W=300 -p cout=16 -p kernel=3 -p pad=1");
  EXPECT_TRUE(tall["check"]["passed"].get<bool>()) << tall["check"];
}

nlohmann::json stats_of(const std::string& call) {
  // One file per test: ctest runs the tests of this file in parallel processes.
  const std::string path = ::testing::TempDir() + "npusim_conv_stats_" +
                           ::testing::UnitTest::GetInstance()->current_test_info()->name() + ".json";
  op_json(call + " --stats " + path);
  std::ifstream in(path);
  return nlohmann::json::parse(in)["stats"]["chip"];
}

double sum_over_cores(const nlohmann::json& chip, const char* pipe, const char* key) {
  double sum = 0;
  for (const auto& [name, core] : chip.items())
    if (core.is_object() && core.contains(pipe)) sum += core[pipe][key].get<double>();
  return sum;
}

// The feature map is expanded on the fly: MTE1 writes each tile's img2col rows (ceil16(mt) x K x 2 B) and weights
// (K x nt x 2 B) into L0 once, while MTE2 reads from GM only each tile's band of input rows (padded rows are not
// read) and its weights. Here K = 16 channels x 9 taps = 144; 16 x 16 pixels, pads 1, cout 16.
TEST(OpConv, TheImg2colMatrixExistsOnlyInL0) {
  const std::string call = "conv2d -p C=16 -p H=16 -p W=16 -p cout=16 -p kernel=3 -p pad=1";
  const auto j = op_json(call);
  const auto chip = stats_of(call);
  const auto& t = j["op"]["tiling"];
  const int bm = t["base_m"].get<int>(), K = 144, H = 16, W = 16, pixels = 256;
  ASSERT_EQ(t["base_n"].get<int>(), 16);
  double mte1 = 0, mte2 = 0, map_reads = 0;
  for (int m0 = 0; m0 < pixels; m0 += bm) {
    const int mt = std::min(bm, pixels - m0);
    const int rows16 = (mt + 15) / 16 * 16;
    mte1 += rows16 * K * 2 + K * 16 * 2;
    const int first = m0 / W, last = (m0 + mt - 1) / W;  // output rows; input rows first-1 .. last+1, clipped
    const int rows = std::min(H, last + 2) - std::max(0, first - 1);
    mte2 += rows * W * 32 + K * 16 * 2;
    map_reads += rows * W * 32;
  }
  EXPECT_EQ(sum_over_cores(chip, "mte1", "bytes"), mte1);
  EXPECT_EQ(sum_over_cores(chip, "mte2", "bytes"), mte2);
  // The map's reads: each input row once per tile whose band holds it (at most 3 here), not once per tap.
  EXPECT_LE(map_reads, 3.0 * H * W * 32);
  EXPECT_LT(map_reads, pixels * K * 2 / 2);  // under half of what reading an img2col matrix from GM would take
}

// The Cube's busy time is its Mmads' exactly: per tile and L0 slice of K, ceil(mt/16) x (nt/16) x (kt/16) fractal
// steps plus the 16-cycle latency (configs/910b.yaml, cube.latency; docs/hw.md).
TEST(OpConv, CubeTimeIsTheMmadsFractalSteps) {
  const std::string call = "conv2d -p C=64 -p H=10 -p W=10 -p cout=48 -p kernel=3 -p pad=1";
  const auto j = op_json(call);
  const auto chip = stats_of(call);
  const auto& t = j["op"]["tiling"];
  const int bm = t["base_m"].get<int>(), bn = t["base_n"].get<int>(), bk = t["base_k"].get<int>();
  const int step_k = t["step_planes"].get<int>() * 9 * 16, K = 64 * 9, pixels = 100, cout = 48;
  double cycles = 0;
  for (int m0 = 0; m0 < pixels; m0 += bm)
    for (int n0 = 0; n0 < cout; n0 += bn)
      for (int s0 = 0; s0 < K; s0 += step_k)
        for (int k0 = s0; k0 < std::min(K, s0 + step_k); k0 += bk) {
          const int mt = std::min(bm, pixels - m0), nt = std::min(bn, cout - n0);
          const int kt = std::min({bk, K - k0, s0 + step_k - k0});
          const int steps = (mt + 15) / 16 * (nt / 16) * (kt / 16);
          cycles += steps + 16;
        }
  EXPECT_EQ(sum_over_cores(chip, "cube", "busy_cycles"), cycles);
}

// trans_data against its reference bit for bit (a layout change rounds nothing): channels that do not fill the
// last plane (0 in the padded lanes of NC1HWC0), pixel counts that are not whole 16-pixel groups, both directions.
TEST(OpConv, TransDataConvertsNchwAndNc1hwc0BothWays) {
  for (const char* args :
       {"-p shape=2x3x17x19 -p to=5hd", "-p shape=1x40x33x7 -p to=5hd --dtype bf16", "-p shape=1x64x56x56 -p to=5hd",
        "-p shape=2x3x17x19x16 -p to=nchw -p channels=40", "-p shape=1x2x100x100x16 -p to=nchw -p channels=24"}) {
    const auto j = op_json(std::string("trans_data --check ") + args);
    EXPECT_EQ(j["check"]["max_abs_err"].get<double>(), 0.0) << args << " " << j["check"];
  }
}

// max_pool on NC1HWC0 against the definition (padding is -inf: taps outside the map never win), ResNet's stem
// pooling, uneven windows with dilation and pads, a row of more than 255 repeats' worth of pixels (a larger UB).
TEST(OpConv, MaxPoolMatchesTheDefinition) {
  for (const char* args : {"-p shape=2x3x17x19x16 -p kernel=3 -p stride=2 -p pad=1",
                           "-p shape=1x4x112x112x16 -p kernel=3 -p stride=2 -p pad=1",
                           "-p shape=1x2x9x10x16 -p kernel=2,3 -p stride=1,2 -p dilation=2 -p pad=0,1,1,2 --dtype bf16",
                           "-p shape=1x1x2x2100x16 -p kernel=1,2 --set buffers.ub.size=512KiB"}) {
    const auto j = op_json(std::string("max_pool --check ") + args);
    EXPECT_EQ(j["check"]["max_abs_err"].get<double>(), 0.0) << args << " " << j["check"];
  }
}

// avg_pool against the definition: the mean over the taps inside the map, or over the whole window with
// count_include_pad; sums in fp16 (the op's extra tolerance) and bf16.
TEST(OpConv, AvgPoolMatchesTheDefinition) {
  for (const char* args : {"-p shape=2x3x17x19x16 -p kernel=3 -p stride=2 -p pad=1",
                           "-p shape=2x3x17x19x16 -p kernel=3 -p stride=2 -p pad=1 -p count_include_pad=1",
                           "-p shape=1x2x9x10x16 -p kernel=2,3 -p stride=1,2 -p dilation=2 -p pad=0,1,1,2 --dtype bf16",
                           "-p shape=1x4x56x56x16 -p kernel=7"}) {
    const auto j = op_json(std::string("avg_pool --check ") + args);
    EXPECT_TRUE(j["check"]["passed"].get<bool>()) << args << " " << j["check"];
  }
}

// resize against the definition (ONNX Resize's coordinate transformations, nearest rounding, bilinear weights): up
// and down, every coordinate mode, fp32 exactly as the reference rounds it, 16-bit within its three roundings.
TEST(OpConv, ResizeMatchesTheDefinition) {
  for (const char* args : {"-p shape=1x3x8x8 -p size=16x16", "-p shape=1x3x8x8 -p size=16x16 -p mode=linear",
                           "-p shape=2x3x9x7 -p size=4x13 -p mode=linear -p coord=align_corners --dtype fp32",
                           "-p shape=2x3x9x7 -p size=20x5 -p coord=asymmetric --dtype fp32",
                           "-p shape=2x3x9x7 -p size=4x3 -p nearest=ceil --dtype fp32",
                           "-p shape=2x3x9x7 -p size=5x20 -p mode=linear -p coord=pytorch_half_pixel --dtype fp32",
                           "-p shape=1x64x56x56 -p size=112x112 -p mode=linear --dtype bf16"}) {
    const auto j = op_json(std::string("resize --check ") + args);
    EXPECT_TRUE(j["check"]["passed"].get<bool>()) << args << " " << j["check"];
  }
}

TEST(OpConv, BadCallsAreClearErrors) {
  npusim_test::expect_input_errors({
      {"op conv2d -p C=16 -p H=8 -p W=8", "parameter 'cout' is required"},
      {"op conv2d -p C=16 -p H=8 -p cout=16", "parameter 'W' is required"},
      {"op conv2d -p C=16 -p H=8 -p W=8 -p cout=16 -p kernel=0", "kernel='0': each value must be at least 1"},
      {"op conv2d -p C=16 -p H=8 -p W=8 -p cout=16 -p pad=1,2,3", "pad='1,2,3' takes 1 or 4 values"},
      {"op conv2d -p C=16 -p H=4 -p W=8 -p cout=16 -p kernel=5", "larger than the padded map"},
      {"op conv2d -p C=16 -p H=8 -p W=8 -p cout=12 -p groups=8", "must divide cin=16 and cout=12"},
      {"op conv2d -p C=16 -p H=8 -p W=8 -p cout=16 --dtype fp32", "conv2d takes fp16 or bf16"},
      {"op conv2d -p C=16 -p H=8 -p W=8 -p cout=16 -p bias=1 --config 910", "bias table, which chip 910 does not have"},
      {"op conv2d -p C=16 -p H=8 -p W=8 -p cout=16 -p stride=64", "stride='64' is not an integer in 0..63"},
      {"op trans_data -p shape=2x3x4x5", "parameter 'to' is required"},
      {"op trans_data -p shape=2x3x4x5 -p to=nhwc", "to='nhwc' is not one of 5hd, nchw"},
      {"op trans_data -p shape=2x3x4x5x16 -p to=nchw", "needs -p channels=C"},
      {"op trans_data -p shape=2x3x4x5x16 -p to=nchw -p channels=60", "channels=60 do not fill the 3 channel planes"},
      {"op trans_data -p shape=2x3x4x5 -p to=5hd --dtype fp32", "trans_data takes fp16 or bf16"},
      {"op max_pool -p shape=1x1x8x8", "x must be NC1HWC0"},
      {"op max_pool -p shape=1x1x8x8x16 -p kernel=3 -p pad=3", "each pad must be smaller than the dilated kernel"},
      {"op max_pool -p shape=1x1x2x8x16 -p kernel=3", "larger than the padded map"},
      {"op max_pool -p shape=1x1x8x8x16 -p count_include_pad=1", "op max_pool has no parameter 'count_include_pad'"},
      {"op avg_pool -p shape=1x1x8x8x16 --dtype fp32", "avg_pool takes fp16 or bf16"},
      {"op resize -p shape=1x1x8x8", "parameter 'size' is required"},
      {"op resize -p shape=1x1x8x8 -p size=8x8 -p mode=cubic", "mode='cubic' is not one of nearest, linear"},
      {"op resize -p shape=1x1x8x8 -p size=8x8 -p coord=tf_crop_and_resize",
       "coord='tf_crop_and_resize' is not one of"},
      {"op resize -p shape=1x1x8x8 -p size=8", "size='8' must be HxW"},
  });
}

}  // namespace
