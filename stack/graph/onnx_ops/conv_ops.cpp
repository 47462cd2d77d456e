// Convolutions: Conv and npusim.Conv (fuse_conv: a folded BatchNormalization and the FixPipe's ReLU) run as the
// library's conv2d on CANN's formats: the input converted NCHW -> NC1HWC0 on the device (trans_data), the weights
// packed into FRACTAL_Z at compile time (as ATC converts them offline), the result converted back to NCHW; the
// conversions between consecutive convolutions are removed after the lowering (layouts.hpp). float32 graphs run the
// Cube in fp16. MaxPool runs on NC1HWC0 the same way; GlobalAveragePool is a mean over each channel's pixels.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "stack/graph/onnx_ops/lowerer.hpp"
#include "stack/graph/onnx_ops/op_table.hpp"
#include "stack/ops/conv/conv_common.hpp"

namespace npusim::stack::graph::onnx_ops {

namespace {

using hw::isa::DType;

// Two ints of an attribute (kernel_shape, strides, dilations), or `def` for both when absent.
std::pair<std::int64_t, std::int64_t> pair_attr(const Lowerer& l, const Node& n, const char* name, std::int64_t def) {
  const Attribute* a = n.attr(name);
  if (!a) return {def, def};
  if (a->ints.size() != 2) l.fail(n, std::string("the '") + name + "' attribute must have 2 values (2-D convolution)");
  return {a->ints[0], a->ints[1]};
}

std::uint32_t small(const Lowerer& l, const Node& n, std::int64_t v, const char* what, std::int64_t lo,
                    std::int64_t hi) {
  if (v < lo || v > hi)
    l.fail(n, std::string(what) + " " + std::to_string(v) + " is outside " + std::to_string(lo) + ".." +
                  std::to_string(hi));
  return static_cast<std::uint32_t>(v);
}

// The call of a Conv node on an NCHW input of shape xs with OIHW weights ws.
ops::Conv2dCall conv_call(const Lowerer& l, const Node& n, const ops::Shape& xs, const std::vector<std::int64_t>& ws) {
  ops::Conv2dCall c;
  const std::int64_t groups = n.attr_int("group", 1);
  c.groups = small(l, n, groups, "group", 1, 1 << 20);
  c.cin = small(l, n, static_cast<std::int64_t>(xs[1]), "input channels", 1, 1 << 20);
  c.cout = small(l, n, ws[0], "output channels", 1, 1 << 20);
  if (ws[1] * groups != static_cast<std::int64_t>(xs[1]))
    l.fail(n, "the weights take " + std::to_string(ws[1]) + " x group " + std::to_string(groups) +
                  " input channels, the input has " + std::to_string(xs[1]));
  const auto [kh, kw] = pair_attr(l, n, "kernel_shape", 0);
  if (kh != 0 && (kh != ws[2] || kw != ws[3])) l.fail(n, "kernel_shape differs from the weights' shape");
  c.kh = small(l, n, ws[2], "kernel height", 1, 511);
  c.kw = small(l, n, ws[3], "kernel width", 1, 511);
  const auto [sh, sw] = pair_attr(l, n, "strides", 1);
  const auto [dh, dw] = pair_attr(l, n, "dilations", 1);
  c.sh = small(l, n, sh, "stride", 1, 63);
  c.sw = small(l, n, sw, "stride", 1, 63);
  c.dh = small(l, n, dh, "dilation", 1, 255);
  c.dw = small(l, n, dw, "dilation", 1, 255);
  const Attribute* ap = n.attr("auto_pad");
  const std::string auto_pad = ap ? ap->s : "NOTSET";
  if (auto_pad == "NOTSET") {
    if (const Attribute* p = n.attr("pads")) {
      if (p->ints.size() != 4) l.fail(n, "the 'pads' attribute must have 4 values");
      c.pad_top = small(l, n, p->ints[0], "pad", 0, 255);
      c.pad_left = small(l, n, p->ints[1], "pad", 0, 255);
      c.pad_bottom = small(l, n, p->ints[2], "pad", 0, 255);
      c.pad_right = small(l, n, p->ints[3], "pad", 0, 255);
    }
  } else if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
    // ONNX: output = ceil(input / stride); the total padding split evenly, the odd one at the end (UPPER) or start.
    const auto same = [&](std::uint64_t in, std::uint32_t k, std::uint32_t s, std::uint32_t d, std::uint32_t& begin,
                          std::uint32_t& end) {
      const std::int64_t out = static_cast<std::int64_t>((in + s - 1) / s);
      const std::int64_t total =
          std::max<std::int64_t>(0, (out - 1) * s + (k - 1LL) * d + 1 - static_cast<std::int64_t>(in));
      const std::int64_t half = auto_pad == "SAME_UPPER" ? total / 2 : total - total / 2;
      begin = small(l, n, half, "pad", 0, 255);
      end = small(l, n, total - half, "pad", 0, 255);
    };
    same(xs[2], c.kh, c.sh, c.dh, c.pad_top, c.pad_bottom);
    same(xs[3], c.kw, c.sw, c.dw, c.pad_left, c.pad_right);
  } else if (auto_pad != "VALID") {
    l.fail(n, "auto_pad '" + auto_pad + "' is not one of NOTSET, SAME_UPPER, SAME_LOWER, VALID");
  }
  c.relu = n.attr_int("relu", 0) != 0;
  return c;
}

// A compile-time constant of fp32 values in the Cube's type.
int constant_of(Lowerer& l, const std::string& name, const ops::Shape& shape, const std::vector<float>& v, DType cube) {
  const int t = l.temp(name, ops::TensorDesc{shape, cube});
  Tensor f{ElemType::kFloat32, {}, std::vector<std::uint8_t>(v.size() * sizeof(float))};
  std::memcpy(f.bytes.data(), v.data(), f.bytes.size());
  l.t(t).constant = Lowerer::convert(f, cube);
  return t;
}

std::vector<float> floats_of(const Tensor& t) {
  const std::vector<double> d = t.as_doubles();
  return {d.begin(), d.end()};
}

// x (NCHW) in the Cube's type as NC1HWC0 (a trans_data; propagate_nc1hwc0 drops it when x was converted from one).
int to_nc1hwc0(Lowerer& l, const Node& n, int x, DType cube) {
  const int xh = l.to_half(n, x, cube, "x");
  const ops::Shape& xs = l.t(xh).desc.shape;
  const int x5 = l.temp(n.name + "/x_nc1hwc0", ops::TensorDesc{{xs[0], (xs[1] + 15) / 16, xs[2], xs[3], 16}, cube});
  l.step(n, "trans_data", ops::TransDataCall{true, 0}, {xh}, {x5});
  return x5;
}

// y5 (NC1HWC0) converted to the node's NCHW output o (through an fp16 copy cast to a float32 o); dropped when only
// convolutions, pooling and elementwise steps on NC1HWC0 read o (propagate_nc1hwc0).
void to_nchw(Lowerer& l, const Node& n, int y5, int o, std::uint32_t channels) {
  const DType cube = l.t(y5).desc.dtype;
  int y = o;
  if (l.t(o).desc.dtype != cube) y = l.temp(n.name + "/out_fp16", ops::TensorDesc{l.t(o).desc.shape, cube});
  l.step(n, "trans_data", ops::TransDataCall{false, channels}, {y5}, {y});
  l.widen(n, y, o);
}

void lower_conv(Lowerer& l, const Node& n) {
  const int x = l.in(n, 0), o = l.out(n, 0);
  const ops::Shape xs = l.t(x).desc.shape;
  if (xs.size() != 4)
    l.fail(n, "only 2-D convolutions are supported (an NCHW input), the input is " + ops::shape_string(xs));
  const Value& wv = l.graph().value(n.inputs[1]);
  if (!wv.constant || wv.constant->shape.size() != 4)
    l.fail(n, "the weights must be a constant OIHW tensor (an initializer)");
  const Tensor& w = *wv.constant;
  const ops::Conv2dCall call = conv_call(l, n, xs, w.shape);
  const bool bias = n.inputs.size() > 2 && n.inputs[2] != kNoValue;
  const DType dt = l.t(x).desc.dtype, cube = dt == DType::kFp32 ? DType::kFp16 : dt;
  if (hw::isa::dtype_bytes(cube) != 2) l.fail(n, "the Cube's convolution takes fp16, bf16 or float32 (as fp16) inputs");
  const int x5 = to_nc1hwc0(l, n, x, cube);
  const ops::Shape x5_shape = l.t(x5).desc.shape;
  ops::conv::ConvShape s;
  try {
    s = ops::conv::conv_shape(call, x5_shape);
  } catch (const InputError& e) {
    l.fail(n, e.what());
  }
  std::vector<int> ins{x5, constant_of(l, n.name + "/w_fractal_z", ops::conv::weight_shape(s),
                                       ops::conv::oihw_to_fractal_z(floats_of(w), s), cube)};
  ops::Conv2dCall c = call;
  if (bias) {
    const Value& bv = l.graph().value(n.inputs[2]);
    if (!bv.constant || bv.constant->elements() != call.cout) l.fail(n, "the bias must be a constant of cout values");
    std::vector<float> b = floats_of(*bv.constant);
    b.resize(std::uint64_t{s.co1} * ops::conv::kC0, 0.0f);
    ins.push_back(constant_of(l, n.name + "/bias", ops::Shape{b.size()}, b, cube));
    c.bias = true;
  }
  const int y5 = l.temp(n.name + "/y_nc1hwc0", ops::TensorDesc{ops::conv::out_shape(s), cube});
  l.step(n, "conv2d", c, ins, {y5});
  to_nchw(l, n, y5, o, call.cout);
}

// MaxPool on NC1HWC0 (max_pool), between the same conversions as a convolution (a max of fp16 values is exact: the
// fp16 copy of a float32 input rounds it once, as the convolutions around it do).
void lower_max_pool(Lowerer& l, const Node& n) {
  const int x = l.in(n, 0), o = l.out(n, 0);
  const ops::Shape xs = l.t(x).desc.shape;
  if (xs.size() != 4) l.fail(n, "only 2-D pooling is supported (an NCHW input), the input is " + ops::shape_string(xs));
  if (n.outputs.size() > 1 && n.outputs[1] != kNoValue) l.fail(n, "the Indices output is not supported");
  if (n.attr_int("ceil_mode", 0) != 0) l.fail(n, "ceil_mode 1 is not supported");
  const Attribute* ap = n.attr("auto_pad");
  if (ap && ap->s != "NOTSET" && ap->s != "VALID")
    l.fail(n, "auto_pad '" + ap->s + "' is not supported (NOTSET, VALID)");
  ops::PoolCall c;
  const auto [kh, kw] = pair_attr(l, n, "kernel_shape", 0);
  c.kh = small(l, n, kh, "kernel height", 1, 255);
  c.kw = small(l, n, kw, "kernel width", 1, 255);
  const auto [sh, sw] = pair_attr(l, n, "strides", 1);
  const auto [dh, dw] = pair_attr(l, n, "dilations", 1);
  c.sh = small(l, n, sh, "stride", 1, 255);
  c.sw = small(l, n, sw, "width stride", 1, 31);
  c.dh = small(l, n, dh, "dilation", 1, 255);
  c.dw = small(l, n, dw, "dilation", 1, 255);
  if (const Attribute* p = n.attr("pads"); p && (!ap || ap->s == "NOTSET")) {
    if (p->ints.size() != 4) l.fail(n, "the 'pads' attribute must have 4 values");
    c.pad_top = small(l, n, p->ints[0], "pad", 0, 255);
    c.pad_left = small(l, n, p->ints[1], "pad", 0, 255);
    c.pad_bottom = small(l, n, p->ints[2], "pad", 0, 255);
    c.pad_right = small(l, n, p->ints[3], "pad", 0, 255);
  }
  const DType dt = l.t(x).desc.dtype, cube = dt == DType::kFp32 ? DType::kFp16 : dt;
  const int x5 = to_nc1hwc0(l, n, x, cube);
  const ops::Shape& os = l.t(o).desc.shape;
  const int y5 = l.temp(n.name + "/y_nc1hwc0", ops::TensorDesc{{os[0], l.t(x5).desc.shape[1], os[2], os[3], 16}, cube});
  l.step(n, "max_pool", c, {x5}, {y5});
  to_nchw(l, n, y5, o, static_cast<std::uint32_t>(xs[1]));
}

// The mean of each channel's H x W pixels: a reduce_mean over the last axis of the input seen as [N, C, H x W].
void lower_global_average_pool(Lowerer& l, const Node& n) {
  const int x = l.in(n, 0), o = l.out(n, 0);
  const ops::Shape xs = l.t(x).desc.shape;
  if (xs.size() < 3) l.fail(n, "the input must have spatial dims, it is " + ops::shape_string(xs));
  std::uint64_t pixels = 1;
  for (std::size_t i = 2; i < xs.size(); ++i) pixels *= xs[i];
  l.step(n, "reduce_mean", ops::ReduceCall{-1}, {x}, {o});
  l.program().steps.back().shapes.push_back(ops::Shape{xs[0], xs[1], pixels});
}

// BatchNormalization in inference form on its own (not after a Conv, or with --no-fusion): y = x s + t per channel
// (axis 1) with s = scale / sqrt(var + epsilon) and t = beta - mean s from the constants at compile time; one
// fused_elementwise over x and the two per-channel columns expanded to x's shape.
void lower_batch_norm(Lowerer& l, const Node& n) {
  const int x = l.in(n, 0), o = l.out(n, 0);
  const ops::Shape xs = l.t(x).desc.shape;
  if (xs.size() < 2) l.fail(n, "the input must have a channel axis (N, C, ...), it is " + ops::shape_string(xs));
  if (n.attr_int("training_mode", 0) != 0) l.fail(n, "training_mode is not supported (inference only)");
  for (std::size_t k = 1; k < n.outputs.size(); ++k)
    if (n.outputs[k] != kNoValue) l.fail(n, "the running mean and variance outputs (training) are not supported");
  std::vector<std::vector<double>> p;
  for (std::size_t i = 1; i < 5; ++i) {
    const Value& v = l.graph().value(n.inputs[i]);
    if (!v.constant || v.constant->elements() != static_cast<std::int64_t>(xs[1]))
      l.fail(n, "scale, B, input_mean and input_var must be constants of " + std::to_string(xs[1]) + " values");
    p.push_back(v.constant->as_doubles());
  }
  const double eps = n.attr_float("epsilon", 1e-5f);
  std::vector<float> s(xs[1]), t(xs[1]);
  for (std::size_t c = 0; c < s.size(); ++c) {
    const double k = p[0][c] / std::sqrt(p[3][c] + eps);
    s[c] = static_cast<float>(k);
    t[c] = static_cast<float>(p[1][c] - p[2][c] * k);
  }
  ops::Shape column(xs.size() - 1, 1);
  column[0] = xs[1];
  const DType dt = l.t(x).desc.dtype;
  const int se = l.expanded(n, constant_of(l, n.name + "/scale", column, s, dt), xs);
  const int te = l.expanded(n, constant_of(l, n.name + "/shift", column, t, dt), xs);
  l.step(n, "fused_elementwise", ops::FusedElementwiseCall{"add(mul(x0,x1),x2)", xs}, {x, se, te}, {o});
}

}  // namespace

void add_conv_ops(std::vector<OpInfo>& table) {
  table.push_back(OpInfo::onnx("Conv", 2, 3)
                      .reads({"group", "kernel_shape", "strides", "dilations", "pads", "auto_pad"})
                      .lowers(lower_conv,
                              "`trans_data` to NC1HWC0 (unless the input is a convolution's result), `conv2d` with the "
                              "weights packed into FRACTAL_Z at compile time, `trans_data` back to NCHW"));
  table.push_back(OpInfo::npusim("Conv", 2, 3)
                      .reads({"group", "kernel_shape", "strides", "dilations", "pads", "auto_pad", "relu"})
                      .lowers(lower_conv, "as Conv, with the ReLU in the FixPipe (fuse_conv)"));
  table.push_back(OpInfo::onnx("MaxPool", 1, 1)
                      .reads({"kernel_shape", "strides", "dilations", "pads", "auto_pad", "ceil_mode"})
                      .lowers(lower_max_pool, "`max_pool` on NC1HWC0, between the conversions a convolution has"));
  table.push_back(OpInfo::onnx("BatchNormalization", 5, 5)
                      .reads({"epsilon", "training_mode"})
                      .lowers(lower_batch_norm,
                              "`fused_elementwise` x s + t with per-channel s, t from the constants (after a Conv: "
                              "folded into its weights by fuse_conv)"));
  table.push_back(OpInfo::onnx("GlobalAveragePool", 1, 1)
                      .lowers(lower_global_average_pool, "`reduce_mean` over each channel's pixels"));
}

}  // namespace npusim::stack::graph::onnx_ops
