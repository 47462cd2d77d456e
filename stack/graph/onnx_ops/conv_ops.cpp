// Convolutions: Conv and npusim.Conv (fuse_conv: a folded BatchNormalization and the FixPipe's ReLU) run as the
// library's conv2d on CANN's formats: the input converted NCHW -> NC1HWC0 on the device (trans_data), the weights
// packed into FRACTAL_Z at compile time (as ATC converts them offline; weights that are graph inputs are packed on
// the device), the result converted back to NCHW; the conversions between consecutive convolutions are removed
// after the lowering (layouts.hpp). float32 graphs run the Cube in fp16. MaxPool and AveragePool run on NC1HWC0 the
// same way; GlobalAveragePool and GlobalMaxPool reduce each channel's pixels; BatchNormalization on its own is a
// per-channel scale and shift.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <tuple>

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

// A window's strides, dilations and pads (top, left, bottom, right) from a Conv's or a pool's attributes, auto_pad
// computed as ONNX defines it (SAME: output = ceil(input / stride), the total padding split evenly with the odd one
// at the end for SAME_UPPER, at the start for SAME_LOWER).
struct Window {
  std::uint32_t sh = 1, sw = 1, dh = 1, dw = 1;
  std::array<std::uint32_t, 4> pads{};
};
Window window_of(const Lowerer& l, const Node& n, const ops::Shape& xs, std::uint32_t kh, std::uint32_t kw,
                 std::int64_t max_stride_w) {
  Window w;
  const auto [sh, sw] = pair_attr(l, n, "strides", 1);
  const auto [dh, dw] = pair_attr(l, n, "dilations", 1);
  w.sh = small(l, n, sh, "stride", 1, 63);
  w.sw = small(l, n, sw, "width stride", 1, max_stride_w);
  w.dh = small(l, n, dh, "dilation", 1, 255);
  w.dw = small(l, n, dw, "dilation", 1, 255);
  const Attribute* ap = n.attr("auto_pad");
  const std::string auto_pad = ap ? ap->s : "NOTSET";
  if (auto_pad == "NOTSET") {
    if (const Attribute* p = n.attr("pads")) {
      if (p->ints.size() != 4) l.fail(n, "the 'pads' attribute must have 4 values");
      for (std::size_t i = 0; i < 4; ++i) w.pads[i] = small(l, n, p->ints[i], "pad", 0, 255);
    }
  } else if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
    const auto same = [&](std::uint64_t in, std::uint32_t k, std::uint32_t s, std::uint32_t d, std::uint32_t& begin,
                          std::uint32_t& end) {
      const std::int64_t out = static_cast<std::int64_t>((in + s - 1) / s);
      const std::int64_t total =
          std::max<std::int64_t>(0, (out - 1) * s + (k - 1LL) * d + 1 - static_cast<std::int64_t>(in));
      const std::int64_t half = auto_pad == "SAME_UPPER" ? total / 2 : total - total / 2;
      begin = small(l, n, half, "pad", 0, 255);
      end = small(l, n, total - half, "pad", 0, 255);
    };
    same(xs[2], kh, w.sh, w.dh, w.pads[0], w.pads[2]);
    same(xs[3], kw, w.sw, w.dw, w.pads[1], w.pads[3]);
  } else if (auto_pad != "VALID") {
    l.fail(n, "auto_pad '" + auto_pad + "' is not one of NOTSET, SAME_UPPER, SAME_LOWER, VALID");
  }
  return w;
}

// A Window into a call with the same fields (Conv2dCall, PoolCall).
template <class Call>
void set_window(Call& c, const Window& w) {
  c.sh = w.sh;
  c.sw = w.sw;
  c.dh = w.dh;
  c.dw = w.dw;
  c.pad_top = w.pads[0];
  c.pad_left = w.pads[1];
  c.pad_bottom = w.pads[2];
  c.pad_right = w.pads[3];
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
  const Window win = window_of(l, n, xs, c.kh, c.kw, 63);
  set_window(c, win);
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

// t (of shape `seen`) with zeros appended along `axis` up to `size` (a concat with a zero constant), or t itself.
int padded_with_zeros(Lowerer& l, const Node& n, int t, ops::Shape seen, std::size_t axis, std::uint64_t size) {
  if (seen[axis] == size) return t;
  ops::Shape zeros = seen, out = seen;
  zeros[axis] = size - seen[axis];
  out[axis] = size;
  const DType dt = l.t(t).desc.dtype;
  const int z = constant_of(l, l.t(t).name + "/zeros", zeros, std::vector<float>(ops::elements(zeros), 0.0f), dt);
  const int p = l.temp(l.t(t).name + "/padded", ops::TensorDesc{out, dt});
  l.step(n, "concat", ops::ConcatCall{static_cast<std::int64_t>(axis)}, {t, z}, {p});
  l.program().steps.back().shapes = {seen, zeros};
  return p;
}

// Weights that are not constants (a graph input) packed into FRACTAL_Z on the device, as CANN's TransData does:
// OIHW seen as [Cout, Cin, T] padded with zeros to whole planes of 16 input and output channels, seen as
// [Cout', C1, 16, T], its last two dims swapped, then [C1, T, Cout', 16] (rows moved whole): FRACTAL_Z of one group.
int fractal_z_on_device(Lowerer& l, const Node& n, int w, const ops::conv::ConvShape& s) {
  if (s.call.groups != 1) l.fail(n, "weights that are not constants are supported for group 1 only");
  const std::uint64_t taps = s.taps(), cout = s.call.cout, cin = s.call.cin, c1 = s.c1, n16 = s.cout_p;
  int p = padded_with_zeros(l, n, w, {cout, cin, taps}, 1, c1 * 16);
  p = padded_with_zeros(l, n, p, {cout, c1 * 16, taps}, 0, n16);
  const DType dt = l.t(w).desc.dtype;
  const int swapped = l.temp(n.name + "/w_swapped", ops::TensorDesc{{n16, c1, taps, 16}, dt});
  l.step(n, "transpose", ops::TransposeCall{}, {p}, {swapped});
  l.program().steps.back().shapes = {{n16, c1, 16, taps}};
  const int fz = l.temp(n.name + "/w_fractal_z", ops::TensorDesc{ops::conv::weight_shape(s), dt});
  l.step(n, "transpose", ops::TransposeCall{{1, 2, 0, 3}}, {swapped}, {fz});
  l.program().steps.back().shapes = {{n16, c1, taps, 16}};
  return fz;
}

// A 1-D Conv (NCL input, OIK weights) as the 2-D convolution of height 1 it is: the attributes with a height of
// 1 (kernel, stride, dilation) and no height padding.
Node as_2d(const Node& n) {
  Node m = n;
  for (const char* key : {"kernel_shape", "strides", "dilations"})
    if (auto it = m.attrs.find(key); it != m.attrs.end() && it->second.ints.size() == 1)
      it->second.ints.insert(it->second.ints.begin(), 1);
  if (auto it = m.attrs.find("pads"); it != m.attrs.end() && it->second.ints.size() == 2)
    it->second.ints = {0, it->second.ints[0], 0, it->second.ints[1]};
  return m;
}

void lower_conv(Lowerer& l, const Node& node) {
  int x = l.in(node, 0);
  const int o = l.out(node, 0);
  ops::Shape xs = l.t(x).desc.shape;
  const bool one_d = xs.size() == 3;
  const Node n = one_d ? as_2d(node) : node;
  if (one_d) {  // x seen as N x C x 1 x L: a view of the same buffer
    xs.insert(xs.begin() + 2, 1);
    const int base = l.t(x).alias >= 0 ? l.t(x).alias : x;
    x = l.temp(l.t(x).name + "/as_2d", ops::TensorDesc{xs, l.t(x).desc.dtype});
    l.t(x).alias = base;
  }
  if (xs.size() != 4)
    l.fail(n,
           "only 1-D and 2-D convolutions are supported (an NCL or NCHW input), the input is " + ops::shape_string(xs));
  // Constant weights and bias are packed here and never reach the device as they are: only those of graph inputs
  // become program tensors.
  const Value& wv = l.graph().value(n.inputs[1]);
  std::vector<std::int64_t> ws;
  for (std::uint64_t d : l.shape_of(wv, "the weights of node '" + n.name + "'"))
    ws.push_back(static_cast<std::int64_t>(d));
  if (one_d && ws.size() == 3) ws.insert(ws.begin() + 2, 1);
  if (ws.size() != 4) l.fail(n, "the weights must be OIHW (4 dims) or, for a 1-D convolution, OIK (3 dims)");
  const ops::Conv2dCall call = conv_call(l, n, xs, ws);
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
  std::vector<int> ins{x5, wv.constant ? constant_of(l, n.name + "/w_fractal_z", ops::conv::weight_shape(s),
                                                     ops::conv::oihw_to_fractal_z(floats_of(*wv.constant), s), cube)
                                       : fractal_z_on_device(l, n, l.to_half(n, l.in(n, 1), cube, "w"), s)};
  ops::Conv2dCall c = call;
  if (bias) {
    const Value& bv = l.graph().value(n.inputs[2]);
    if (ops::elements(l.shape_of(bv, "the bias of node '" + n.name + "'")) != call.cout)
      l.fail(n, "the bias must have cout values");
    const std::uint64_t padded = std::uint64_t{s.co1} * ops::conv::kC0;
    if (bv.constant) {
      std::vector<float> b = floats_of(*bv.constant);
      b.resize(padded, 0.0f);
      ins.push_back(constant_of(l, n.name + "/bias", ops::Shape{padded}, b, cube));
    } else {
      ins.push_back(padded_with_zeros(l, n, l.to_half(n, l.in(n, 2), cube, "bias"), {call.cout}, 0, padded));
    }
    c.bias = true;
  }
  const int y5 = l.temp(n.name + "/y_nc1hwc0", ops::TensorDesc{ops::conv::out_shape(s), cube});
  l.step(n, "conv2d", c, ins, {y5});
  to_nchw(l, n, y5, o, call.cout);
}

// MaxPool and AveragePool on NC1HWC0 (max_pool, avg_pool), between the same conversions as a convolution (a max of
// fp16 values is exact: the fp16 copy of a float32 input rounds it once, as the convolutions around it do; an
// average adds in fp16).
void lower_pool(Lowerer& l, const Node& n) {
  const bool max = n.op_type == "MaxPool";
  const int x = l.in(n, 0), o = l.out(n, 0);
  const ops::Shape xs = l.t(x).desc.shape;
  if (xs.size() != 4) l.fail(n, "only 2-D pooling is supported (an NCHW input), the input is " + ops::shape_string(xs));
  if (n.outputs.size() > 1 && n.outputs[1] != kNoValue) l.fail(n, "the Indices output is not supported");
  if (n.attr_int("ceil_mode", 0) != 0) l.fail(n, "ceil_mode 1 is not supported");
  ops::PoolCall c;
  const auto [kh, kw] = pair_attr(l, n, "kernel_shape", 0);
  c.kh = small(l, n, kh, "kernel height", 1, 255);
  c.kw = small(l, n, kw, "kernel width", 1, 255);
  const Window win = window_of(l, n, xs, c.kh, c.kw, 31);
  set_window(c, win);
  c.count_include_pad = !max && n.attr_int("count_include_pad", 0) != 0;
  const DType dt = l.t(x).desc.dtype, cube = dt == DType::kFp32 ? DType::kFp16 : dt;
  const int x5 = to_nc1hwc0(l, n, x, cube);
  const ops::Shape& os = l.t(o).desc.shape;
  const int y5 = l.temp(n.name + "/y_nc1hwc0", ops::TensorDesc{{os[0], l.t(x5).desc.shape[1], os[2], os[3], 16}, cube});
  l.step(n, max ? "max_pool" : "avg_pool", c, {x5}, {y5});
  to_nchw(l, n, y5, o, static_cast<std::uint32_t>(xs[1]));
}

// The mean (GlobalAveragePool) or the max (GlobalMaxPool) of each channel's pixels: a reduce_mean or reduce_max
// over the last axis of the input seen as [N, C, H x W].
void lower_global_pool(Lowerer& l, const Node& n) {
  const int x = l.in(n, 0), o = l.out(n, 0);
  const ops::Shape xs = l.t(x).desc.shape;
  if (xs.size() < 3) l.fail(n, "the input must have spatial dims, it is " + ops::shape_string(xs));
  std::uint64_t pixels = 1;
  for (std::size_t i = 2; i < xs.size(); ++i) pixels *= xs[i];
  l.step(n, n.op_type == "GlobalMaxPool" ? "reduce_max" : "reduce_mean", ops::ReduceCall{-1}, {x}, {o});
  l.program().steps.back().shapes.push_back(ops::Shape{xs[0], xs[1], pixels});
}

// BatchNormalization in inference form on its own (not after a Conv, or with --no-fusion): y = x s + t per channel
// (axis 1) with s = scale / sqrt(var + epsilon) and t = B - mean s, computed at compile time from constant
// parameters or by two small fused_elementwise steps from runtime ones; then one fused_elementwise over x and the
// two per-channel columns expanded to x's shape.
void lower_batch_norm(Lowerer& l, const Node& n) {
  const int x = l.in(n, 0), o = l.out(n, 0);
  const ops::Shape xs = l.t(x).desc.shape;
  if (xs.size() < 2) l.fail(n, "the input must have a channel axis (N, C, ...), it is " + ops::shape_string(xs));
  if (n.attr_int("training_mode", 0) != 0) l.fail(n, "training_mode is not supported (inference only)");
  for (std::size_t k = 1; k < n.outputs.size(); ++k)
    if (n.outputs[k] != kNoValue) l.fail(n, "the running mean and variance outputs (training) are not supported");
  const DType dt = l.t(x).desc.dtype;
  const double eps = n.attr_float("epsilon", 1e-5f);
  ops::Shape column(xs.size() - 1, 1);
  column[0] = xs[1];
  bool constant = true;
  for (std::size_t i = 1; i < 5; ++i) {
    const Value& v = l.graph().value(n.inputs[i]);
    const bool per_channel = v.shape && v.shape->size() == 1 && (*v.shape)[0].known() &&
                             (*v.shape)[0].value == static_cast<std::int64_t>(xs[1]);
    if (!per_channel) l.fail(n, "scale, B, input_mean and input_var must have " + std::to_string(xs[1]) + " values");
    constant = constant && v.constant.has_value();
  }
  int sc = -1, sh = -1;
  if (constant) {  // computed here: the parameters themselves never reach the device
    std::vector<std::vector<double>> p;
    for (std::size_t i = 1; i < 5; ++i) p.push_back(l.graph().value(n.inputs[i]).constant->as_doubles());
    std::vector<float> s(xs[1]), t(xs[1]);
    for (std::size_t c = 0; c < s.size(); ++c) {
      const double k = p[0][c] / std::sqrt(p[3][c] + eps);
      s[c] = static_cast<float>(k);
      t[c] = static_cast<float>(p[1][c] - p[2][c] * k);
    }
    sc = constant_of(l, n.name + "/scale", column, s, dt);
    sh = constant_of(l, n.name + "/shift", column, t, dt);
  } else {
    std::vector<int> params;
    for (std::size_t i = 1; i < 5; ++i) {
      params.push_back(l.in(n, i));
      if (l.t(params.back()).desc.dtype != dt) l.fail(n, "the parameters must have the input's type");
    }
    sc = l.temp(n.name + "/scale", ops::TensorDesc{column, dt});
    sh = l.temp(n.name + "/shift", ops::TensorDesc{column, dt});
    l.step(n, "fused_elementwise",
           ops::FusedElementwiseCall{"div(x0,sqrt(add(x1," + num(eps) + ")))", column, std::nullopt},
           {params[0], params[3]}, {sc});
    l.program().steps.back().shapes = {column, column};
    l.step(n, "fused_elementwise", ops::FusedElementwiseCall{"sub(x0,mul(x1,x2))", column, std::nullopt},
           {params[1], params[2], sc}, {sh});
    l.program().steps.back().shapes = {column, column, column};
  }
  const int se = l.expanded(n, sc, xs), te = l.expanded(n, sh, xs);
  l.step(n, "fused_elementwise", ops::FusedElementwiseCall{"add(mul(x0,x1),x2)", xs, std::nullopt}, {x, se, te}, {o});
}

// The scales a Resize (inputs 2 and 3; Resize-10 and Upsample-9: input 1; Upsample-7: an attribute) gives the two
// last axes, or 0 where it gives sizes (the scale is then out / in); refused when another axis is scaled.
std::pair<double, double> resize_scales(const Lowerer& l, const Node& n, std::size_t rank) {
  std::vector<double> scales;
  const std::size_t input = n.op_type == "Upsample" || n.inputs.size() == 2 ? 1 : 2;
  if (const Attribute* a = n.attr("scales"); a && n.op_type == "Upsample") {
    scales.assign(a->floats.begin(), a->floats.end());
  } else if (input < n.inputs.size() && n.inputs[input] != kNoValue) {
    const Value& v = l.graph().value(n.inputs[input]);
    if (!v.constant) l.fail(n, "the scales must be a constant");
    scales = v.constant->as_doubles();
  }
  if (scales.empty()) return {0.0, 0.0};
  std::vector<std::int64_t> axes;
  if (const Attribute* a = n.attr("axes")) axes = a->ints;
  std::vector<double> full(rank, 1.0);
  for (std::size_t i = 0; i < scales.size(); ++i) {
    const std::int64_t ax = axes.empty() ? static_cast<std::int64_t>(i) : l.axis_in(n, axes.at(i), rank);
    if (ax < 0 || static_cast<std::size_t>(ax) >= rank) l.fail(n, "the scales do not match the input's rank");
    full[static_cast<std::size_t>(ax)] = scales[i];
  }
  for (std::size_t i = 0; i + 2 < rank; ++i)
    if (full[i] != 1.0) l.fail(n, "only the last two axes may be resized (axis " + std::to_string(i) + " is scaled)");
  if (full[rank - 2] <= 0 || full[rank - 1] <= 0) l.fail(n, "the scales must be positive");
  return {full[rank - 2], full[rank - 1]};
}

// Resize and Upsample in nearest and linear modes over the last two axes (`resize`, in the tensor's own type).
void lower_resize(Lowerer& l, const Node& n) {
  const int x = l.in(n, 0), o = l.out(n, 0);
  const ops::Shape xs = l.t(x).desc.shape, os = l.t(o).desc.shape;
  if (xs.size() < 2 || os.size() != xs.size() || !std::equal(xs.begin(), xs.end() - 2, os.begin()))
    l.fail(n, "only the last two axes may be resized: " + ops::shape_string(xs) + " -> " + ops::shape_string(os));
  // Upsample and Resize-10 (before coordinate_transformation_mode and nearest_mode existed) resize as Upsample did:
  // asymmetric coordinates, nearest rounding down (ONNX's version converter writes that into Resize-11).
  const bool upsample = n.op_type == "Upsample" || (l.graph().opset > 0 && l.graph().opset < 11);
  ops::ResizeCall c;
  c.out_h = small(l, n, static_cast<std::int64_t>(os[os.size() - 2]), "output height", 1, 1 << 24);
  c.out_w = small(l, n, static_cast<std::int64_t>(os[os.size() - 1]), "output width", 1, 1 << 24);
  const Attribute* mode = n.attr("mode");
  const std::string m = mode ? mode->s : "nearest";
  if (m != "nearest" && m != "linear" && m != "bilinear")
    l.fail(n, "mode '" + m + "' is not supported (nearest, linear)");
  c.linear = m != "nearest";
  const auto text = [&](const char* key, const char* def) {
    const Attribute* a = n.attr(key);
    return a ? a->s : std::string(def);
  };
  const std::string coord = upsample ? "asymmetric" : text("coordinate_transformation_mode", "half_pixel");
  const std::string nm = upsample ? "floor" : text("nearest_mode", "round_prefer_floor");
  try {
    c.coord = ops::resize_coord(coord, "coordinate_transformation_mode '" + coord + "'");
    c.nearest = ops::resize_nearest(nm, "nearest_mode '" + nm + "'");
  } catch (const InputError& e) {
    l.fail(n, e.what());
  }
  if (n.attr_int("antialias", 0) != 0) l.fail(n, "antialias is not supported");
  if (text("keep_aspect_ratio_policy", "stretch") != "stretch")
    l.fail(n, "keep_aspect_ratio_policy other than stretch is not supported");
  std::tie(c.scale_h, c.scale_w) = resize_scales(l, n, xs.size());
  l.step(n, "resize", c, {x}, {o});
}

}  // namespace

void add_conv_ops(std::vector<OpInfo>& table) {
  table.push_back(
      OpInfo::onnx("Conv", 2, 3)
          .reads({"group", "kernel_shape", "strides", "dilations", "pads", "auto_pad"})
          .lowers(lower_conv,
                  "`trans_data` to NC1HWC0 (unless the input is a convolution's result), `conv2d` with the "
                  "weights packed into FRACTAL_Z at compile time, `trans_data` back to NCHW; a 1-D convolution "
                  "as the 2-D one of height 1"));
  table.push_back(OpInfo::npusim("Conv", 2, 3)
                      .reads({"group", "kernel_shape", "strides", "dilations", "pads", "auto_pad", "relu"})
                      .lowers(lower_conv, "as Conv, with the ReLU in the FixPipe (fuse_conv)"));
  table.push_back(OpInfo::onnx("MaxPool", 1, 1)
                      .reads({"kernel_shape", "strides", "dilations", "pads", "auto_pad", "ceil_mode"})
                      .lowers(lower_pool, "`max_pool` on NC1HWC0, between the conversions a convolution has"));
  table.push_back(
      OpInfo::onnx("AveragePool", 1, 1)
          .reads({"kernel_shape", "strides", "dilations", "pads", "auto_pad", "ceil_mode", "count_include_pad"})
          .lowers(lower_pool, "`avg_pool` on NC1HWC0, between the conversions a convolution has"));
  table.push_back(OpInfo::onnx("Resize", 1, 4)
                      .reads({"mode", "coordinate_transformation_mode", "nearest_mode", "antialias", "axes",
                              "keep_aspect_ratio_policy"})
                      .needs_values_of({1, 2, 3})
                      .lowers(lower_resize, "`resize` (nearest or bilinear, the last two axes, in the tensor's type)"));
  table.push_back(OpInfo::onnx("Upsample", 1, 2)
                      .reads({"mode", "scales"})
                      .needs_values_of({1})
                      .lowers(lower_resize, "`resize` with asymmetric coordinates and floor rounding"));
  table.push_back(OpInfo::onnx("BatchNormalization", 5, 5)
                      .reads({"epsilon", "training_mode"})
                      .lowers(lower_batch_norm,
                              "`fused_elementwise` x s + t with per-channel s, t from the constants (after a Conv: "
                              "folded into its weights by fuse_conv)"));
  table.push_back(
      OpInfo::onnx("GlobalAveragePool", 1, 1).lowers(lower_global_pool, "`reduce_mean` over each channel's pixels"));
  table.push_back(
      OpInfo::onnx("GlobalMaxPool", 1, 1).lowers(lower_global_pool, "`reduce_max` over each channel's pixels"));
}

}  // namespace npusim::stack::graph::onnx_ops
