// Conv2D on the Cube, the Da Vinci way: the feature map is never expanded in memory. Per output tile (base_m output
// pixels x base_n output channels of one image and one packed group):
//   GM x (NC1HWC0) -(MTE2, the band of input rows the tile's pixels read, step_planes channel planes at a time)-> L1
//      -(MTE1, LoadData 3D: img2col on the fly, base_k columns of K = (c1, kh, kw, c0))-> L0A
//   GM w (FRACTAL_Z) -(MTE2, the tile's output-channel fractals of the step's K rows)-> L1 -(MTE1, LoadData)-> L0B
//   Cube (Mmad, fp32 accumulation over K, the bias seeding the first one) -> L0C
//      -(FixPipe, fp32 -> T, optional ReLU; one 16-channel plane at a time)-> GM out (NC1HWC0).
// Groups are packed as CANN's FRACTAL_Z packs them: E = min(lcm(lcm(Cin_g, 16) / Cin_g, lcm(Cout_g, 16) / Cout_g),
// G) groups share one block-diagonal weight block of Cin' = ceil16(E Cin_g) input and Cout' = ceil16(E Cout_g)
// output channels, so a depthwise convolution runs 16 channels a block on the Cube instead of one.
// The pieces: this header (shape, tiling, buffer plans), geometry.cpp (the shape, host layout conversions, the
// reference), tiling.cpp, kernel.cpp, conv.cpp (the op: text form, operands, plan, reference).
#pragma once

#include <cstdint>
#include <vector>

#include "stack/ops/kernel_util.hpp"
#include "stack/ops/op.hpp"

namespace npusim::stack::ops::conv {

using hw::isa::DType;

inline constexpr std::uint32_t kC0 = 16;  // channels per 32 B block for the Cube's 16-bit types

// A call's geometry: the user's numbers and what follows from them.
struct ConvShape {
  Conv2dCall call;
  std::uint32_t n = 0, h = 0, w = 0;    // x is n x c1 x h x w x 16
  std::uint32_t ho = 0, wo = 0;         // output pixels per image: ho x wo
  std::uint32_t c1 = 0, co1 = 0;        // channel planes of x and of the output
  std::uint32_t e = 1;                  // groups packed per weight block
  std::uint32_t packs = 1;              // packed groups: ceil(groups / e)
  std::uint32_t cin_p = 0, cout_p = 0;  // channels of a packed group (multiples of 16)
  std::uint64_t pixels() const { return static_cast<std::uint64_t>(ho) * wo; }
  std::uint32_t taps() const { return call.kh * call.kw; }
  // Input planes and output channels packed group p really has (the last may be cut by the tensors' planes).
  std::uint32_t planes_of(std::uint32_t p) const;
  std::uint32_t outputs_of(std::uint32_t p) const;
};
// The geometry of a call on x of shape [N, C1, H, W, 16]; throws InputError naming what does not fit.
ConvShape conv_shape(const Conv2dCall& call, const Shape& x);

// The operands' shapes: x [N, C1, H, W, 16], w [packs, Cin'/16 x kh x kw, Cout'/16, 16, 16], bias [Co1 x 16].
Shape x_shape(const Conv2dCall& c, std::uint32_t n, std::uint32_t h, std::uint32_t w);
Shape weight_shape(const ConvShape& s);
Shape out_shape(const ConvShape& s);

struct ConvTiling {
  std::uint32_t base_m = 0;                // output pixels per tile (a multiple of 16)
  std::uint32_t base_n = 0;                // output channels per tile (a multiple of 16)
  std::uint32_t base_k = 0;                // K columns per L0 load (a multiple of 16)
  std::uint32_t step_planes = 0;           // input channel planes per L1 step
  std::uint32_t band_rows = 0;             // input rows a tile's band holds at most
  std::uint32_t tiles_m = 0, tiles_n = 0;  // per image and packed group
  std::uint64_t tiles = 0;                 // n x packs x tiles_m x tiles_n
  std::uint32_t block_dim = 1;
  bool bias_table = false;
};

struct ConvArgs {
  GM_ADDR x = 0, w = 0, bias = 0, out = 0;
  ConvShape s;
  ConvTiling t;
};

// The buffers the kernel allocates for a tiling, one plan per space: L1 "x1" (the band, two buffers), "w1" (the
// weights of a step, two buffers), "bias"; L0A "a2"; L0B "b2"; L0C "c"; the bias table "bt".
struct ConvBuffers {
  BufferPlan l1, l0a, l0b, l0c, bias_table;
};
ConvBuffers conv_buffers(const ConvShape& s, const ConvTiling& t);

// The most input rows a tile of `base_m` output pixels reads (its band), clipped to the map's height.
std::uint32_t band_rows(const ConvShape& s, std::uint32_t base_m);

// The tiling that minimises the estimated time among those whose plans fit the chip (tiling.cpp).
ConvTiling plan_conv(const ConvShape& s, const config::ChipConfig& chip);

// The kernel on a cube core (kernel.cpp), T = half or bfloat16_t.
template <class T>
void conv_kernel(const ConvArgs& g);

// Host-side layout conversions (geometry.cpp), on fp32 values: NCHW <-> NC1HWC0 (padded channels are 0) and the
// OIHW weights of a grouped convolution -> packed FRACTAL_Z (zeros off the groups' diagonal blocks).
std::vector<float> nchw_to_5hd(const std::vector<float>& x, std::uint32_t n, std::uint32_t c, std::uint32_t h,
                               std::uint32_t w);
std::vector<float> from_5hd(const std::vector<float>& x, std::uint32_t n, std::uint32_t c, std::uint32_t h,
                            std::uint32_t w);
std::vector<float> oihw_to_fractal_z(const std::vector<float>& w, const ConvShape& s);

// The convolution of the device formats as given (every lane of every block takes part), in double: the op's
// CPU reference.
std::vector<float> conv_reference(const ConvShape& s, const std::vector<float>& x, const std::vector<float>& w,
                                  const std::vector<float>* bias);

}  // namespace npusim::stack::ops::conv
