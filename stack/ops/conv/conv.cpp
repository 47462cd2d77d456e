// The conv2d op (conv_common.hpp has the geometry, tiling and kernel): the text form, the operands, the plan and
// the reference.
#include "common/util/error.hpp"
#include "stack/ops/conv/conv_common.hpp"

namespace npusim::stack::ops {

using conv::ConvArgs;
using conv::ConvShape;
using hw::isa::DType;

namespace {

Conv2dCall parse_call(const Params& p) {
  Conv2dCall c;
  for (const char* key : {"C", "cout"})
    if (!p.count(key))
      throw InputError(std::string("parameter '") + key +
                       "' is required, e.g. -p N=1 -p C=64 -p H=56 -p W=56 -p cout=64 -p kernel=3 -p pad=1");
  c.cin = param_uint(p, "C", 0, 1u << 20);
  c.cout = param_uint(p, "cout", 0, 1u << 20);
  parse_window(p, c, 511, 63);
  c.groups = param_uint(p, "groups", 1, 1u << 20);
  c.bias = param_uint(p, "bias", 0, 1);
  c.relu = param_uint(p, "relu", 0, 1);
  return c;
}

ConvShape shape_of(const std::vector<TensorDesc>& in, const Conv2dCall& c) {
  if (in.size() != (c.bias ? 3u : 2u))
    throw InputError("conv2d: " + std::to_string(c.bias ? 3 : 2) + " operands (x, w" + (c.bias ? ", bias" : "") +
                     ") expected, " + std::to_string(in.size()) + " given");
  const ConvShape s = conv::conv_shape(c, in[0].shape);
  if (in[1].shape != conv::weight_shape(s))
    throw InputError("conv2d: the weights must be packed FRACTAL_Z " + shape_string(conv::weight_shape(s)) + ", got " +
                     shape_string(in[1].shape));
  if (c.bias && in[2].shape != Shape{std::uint64_t{s.co1} * conv::kC0})
    throw InputError("conv2d: the bias must have " + std::to_string(s.co1 * conv::kC0) +
                     " values (the output's channel planes x 16), got " + shape_string(in[2].shape));
  for (const TensorDesc& t : in)
    if (t.dtype != in[0].dtype) throw InputError("conv2d: the operands must share one dtype");
  return s;
}

OpDef conv2d_op() {
  OpDef d;
  d.name = "conv2d";
  d.summary =
      "2-D convolution on the Cube (img2col by Load3D), x NC1HWC0, weights FRACTAL_Z (groups packed), bias and ReLU "
      "in the FixPipe; fp16/bf16";
  d.params = {{"N", "1"},          {"C", kRequired}, {"H", kRequired}, {"W", kRequired},
              {"cout", kRequired}, {"kernel", "1"},  {"stride", "1"},  {"pad", "0"},
              {"dilation", "1"},   {"groups", "1"},  {"bias", "0"},    {"relu", "0"}};
  d.parse = [](const Params& p) -> Call { return parse_call(p); };
  d.inputs = [](const Params& p, DType t) {
    if (t == DType::kFp32) throw InputError("conv2d takes fp16 or bf16 (the Cube's 16-bit path)");
    const Conv2dCall c = parse_call(p);
    for (const char* key : {"H", "W"})
      if (!p.count(key)) throw InputError(std::string("parameter '") + key + "' is required, e.g. -p H=56 -p W=56");
    const Shape x =
        conv::x_shape(c, param_uint(p, "N", 1, 1u << 20), param_uint(p, "H", 0, 32767), param_uint(p, "W", 0, 32767));
    const ConvShape s = conv::conv_shape(c, x);
    std::vector<TensorDesc> in{{x, t}, {conv::weight_shape(s), t}};
    if (c.bias) in.push_back({Shape{std::uint64_t{s.co1} * conv::kC0}, t});
    return in;
  };
  d.plan = [](const std::vector<TensorDesc>& in, const Call& call, const config::ChipConfig& chip) {
    const ConvShape s = shape_of(in, call_as<Conv2dCall>(call, "conv2d"));
    OpPlan plan;
    plan.outputs = {{conv::out_shape(s), in[0].dtype}};
    ConvArgs g;
    g.s = s;
    g.t = conv::plan_conv(s, chip);
    plan.type = KernelType::kCube;
    plan.block_dim = g.t.block_dim;
    plan.tiling = {{"base_m", g.t.base_m},       {"base_n", g.t.base_n},
                   {"base_k", g.t.base_k},       {"step_planes", g.t.step_planes},
                   {"band_rows", g.t.band_rows}, {"tiles", static_cast<double>(g.t.tiles)},
                   {"groups_packed", s.e},       {"packs", s.packs}};
    // Useful work: the real channels' products, 2 per MAC (the packing's zeros are not counted).
    const std::uint32_t cin_g = s.call.cin / s.call.groups;
    plan.flops = 2.0 * s.n * s.pixels() * s.call.cout * cin_g * s.taps();
    const DType t = in[0].dtype;
    plan.kernel = [g, t](const std::vector<std::uint64_t>& buf) -> std::function<void()> {
      ConvArgs args = g;
      args.x = buf[0];
      args.w = buf[1];
      args.bias = g.s.call.bias ? buf[2] : 0;
      args.out = buf[g.s.call.bias ? 3 : 2];
      if (t == DType::kBf16) return [args] { conv::conv_kernel<bfloat16_t>(args); };
      return [args] { conv::conv_kernel<half>(args); };
    };
    return plan;
  };
  d.reference = [](const std::vector<TensorDesc>& in, const Call& call, const std::vector<HostTensor>& v) {
    const ConvShape s = shape_of(in, call_as<Conv2dCall>(call, "conv2d"));
    return std::vector<HostTensor>{conv::conv_reference(s, v[0], v[1], s.call.bias ? &v[2] : nullptr)};
  };
  return d;
}

}  // namespace

std::vector<OpDef> conv_ops() {
  return {conv2d_op()};
}

}  // namespace npusim::stack::ops
