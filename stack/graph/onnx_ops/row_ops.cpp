// Row ops: Softmax and LogSoftmax, LayerNormalization, the one-axis reductions and CumSum, on the Vector units.
#include <algorithm>

#include "stack/graph/onnx_ops/host_array.hpp"
#include "stack/graph/onnx_ops/lowerer.hpp"
#include "stack/graph/onnx_ops/op_table.hpp"

namespace npusim::stack::graph::onnx_ops {

namespace {

using hw::isa::DType;

// On the last axis the row op itself; on an inner axis of [A, K, B]: transpose to [A, B, K], the row op over K,
// transpose back.
void lower_softmax(Lowerer& l, const Node& n) {
  const std::string& op = n.op_type;
  const char* kernel = op == "Softmax" ? "softmax" : "log_softmax";
  const int opset = l.graph().opset;
  const int x = l.in(n, 0);
  const ops::Shape s = l.t(x).desc.shape;
  const std::int64_t axis = l.axis_in(n, n.attr_int("axis", opset && opset < 13 ? 1 : -1), s.size());
  if (axis == static_cast<std::int64_t>(s.size()) - 1) {
    l.step(n, kernel, ops::SoftmaxCall{}, {x}, {l.out(n, 0)});
    return;
  }
  if (opset && opset < 13)
    l.fail(n, op + " before opset 13 (over the flattened trailing dims) is supported on the last axis only");
  std::uint64_t a = 1, k = s[static_cast<std::size_t>(axis)], b = 1;
  for (std::int64_t d = 0; d < axis; ++d) a *= s[static_cast<std::size_t>(d)];
  for (std::size_t d = static_cast<std::size_t>(axis) + 1; d < s.size(); ++d) b *= s[d];
  const DType dt = l.t(x).desc.dtype;
  const int tr = l.temp(n.name + "/transposed", ops::TensorDesc{{a, b, k}, dt});
  const int sm = l.temp(n.name + "/softmax", ops::TensorDesc{{a, b, k}, dt});
  l.step(n, "transpose", ops::TransposeCall{{0, 2, 1}}, {x}, {tr});
  l.program().steps.back().shapes = {{a, k, b}};
  l.step(n, kernel, ops::SoftmaxCall{}, {tr}, {sm});
  l.step(n, "transpose", ops::TransposeCall{{0, 2, 1}}, {sm}, {l.out(n, 0)});
}

// Over the dims from `axis` on: rows of their product, gamma and beta flattened to one row; Mean and InvStdDev,
// when the graph uses them, from the op's fp32 row statistics.
void lower_layernorm(Lowerer& l, const Node& n) {
  const Graph& g = l.graph();
  const int x = l.in(n, 0);
  const ops::Shape s = l.t(x).desc.shape;
  const std::int64_t axis = l.axis_in(n, n.attr_int("axis", -1), s.size());
  std::uint64_t rows = 1, h = 1;
  for (std::size_t d = 0; d < s.size(); ++d) (static_cast<std::int64_t>(d) < axis ? rows : h) *= s[d];
  const int gamma = l.in(n, 1);
  if (ops::elements(l.t(gamma).desc.shape) != h)
    l.fail(n, "the scale has " + std::to_string(ops::elements(l.t(gamma).desc.shape)) +
                  " elements, the normalised dims " + std::to_string(h));
  const int beta = l.bias_or_zeros(n, 2, h, l.t(x).desc.dtype);
  std::vector<int> outs{l.out(n, 0)};
  bool stats = false;
  for (std::size_t k = 1; k < n.outputs.size(); ++k) {
    const ValueId o = n.outputs[k];
    if (o == kNoValue) continue;
    const bool used =
        !g.value(o).consumers.empty() || std::find(g.outputs.begin(), g.outputs.end(), o) != g.outputs.end();
    stats = stats || used;
  }
  ops::NormCall call;
  call.eps = n.attr_float("epsilon", 1e-5f);
  call.stats = stats;
  if (stats) {
    for (std::size_t k = 1; k < 3; ++k) {
      const bool present = k < n.outputs.size() && n.outputs[k] != kNoValue;
      const int o = present ? l.out(n, k)
                            : l.temp(n.name + "/stat" + std::to_string(k), ops::TensorDesc{{rows, 1}, DType::kFp32});
      if (l.t(o).desc.dtype != DType::kFp32) l.fail(n, "Mean and InvStdDev are supported as float32 (stash_type 1)");
      outs.push_back(o);
    }
  }
  l.step(n, "layernorm", call, {x, gamma, beta}, outs);
  l.program().steps.back().shapes = {{rows, h}, {h}, {h}};
}

// One axis or several adjacent ones (ReduceSum's from input 1, opset 13 on, or the attribute; e.g. a mean over H and
// W; none given: all of them), merged into one by viewing the input with their product as one dim; keepdims or not, the
// output is a view of the reduced tensor (the same bytes).
void lower_reduce(Lowerer& l, const Node& n) {
  const std::string& op = n.op_type;
  const int x = l.in(n, 0);
  const ops::Shape& xs = l.t(x).desc.shape;
  std::vector<std::int64_t> axes = op == "ReduceSum" ? l.ints_of(n, 1, "axes") : std::vector<std::int64_t>{};
  if (const Attribute* a = n.attr("axes")) axes = a->ints;
  if (axes.empty()) {  // every axis, unless noop_with_empty_axes asks for the input as it is
    if (n.attr_int("noop_with_empty_axes", 0) != 0) l.fail(n, "noop_with_empty_axes is not supported");
    for (std::size_t i = 0; i < xs.size(); ++i) axes.push_back(static_cast<std::int64_t>(i));
  }
  for (std::int64_t& a : axes) a = l.axis_in(n, a, xs.size());
  std::sort(axes.begin(), axes.end());
  for (std::size_t i = 1; i < axes.size(); ++i)
    if (axes[i] != axes[i - 1] + 1) l.fail(n, "the reduction axes must be adjacent (one axis, or e.g. H and W)");
  const auto first = static_cast<std::size_t>(axes.front()), last = static_cast<std::size_t>(axes.back());
  ops::Shape seen, reduced;  // the input with the axes merged, and the output
  std::uint64_t merged = 1;
  for (std::size_t i = 0; i < xs.size(); ++i) {
    if (i < first || i > last) {
      seen.push_back(xs[i]);
      reduced.push_back(xs[i]);
    } else {
      merged *= xs[i];
      if (i == last) seen.push_back(merged);
    }
  }
  if (reduced.empty()) reduced = {1};
  const int r = l.temp(n.name + "/reduced", ops::TensorDesc{reduced, l.t(x).desc.dtype});
  const std::string name = op == "ReduceSum" ? "reduce_sum" : op == "ReduceMean" ? "reduce_mean" : "reduce_max";
  l.step(n, name, ops::ReduceCall{static_cast<std::int64_t>(first)}, {x}, {r});
  if (axes.size() > 1) l.program().steps.back().shapes.push_back(seen);
  l.view(n, n.outputs[0], r);
}

std::vector<HostArray> fold_cumsum(const FoldArgs& a) {
  const HostArray &x = a.need(0), &ax = a.need(1);
  if (ax.size() != 1) throw NoFold{};
  const auto axis = static_cast<std::size_t>(norm_axis(ax.i.at(0), static_cast<std::int64_t>(x.shape.size())));
  const bool exclusive = a.node.attr_int("exclusive", 0) != 0, reverse = a.node.attr_int("reverse", 0) != 0;
  const std::int64_t len = x.shape.at(axis), inner = strides_of(x.shape)[axis];
  HostArray out = x;
  for (std::int64_t base = 0; base < x.size(); ++base) {
    if ((base / inner) % len != 0) continue;  // one running sum per (outer, inner) line, from its first element
    double accf = 0;
    std::int64_t acci = 0;
    for (std::int64_t step = 0; step < len; ++step) {
      const auto k = static_cast<std::size_t>(base + (reverse ? len - 1 - step : step) * inner);
      if (x.is_int()) {
        if (exclusive) out.i[k] = acci;
        acci += x.i[k];
        if (!exclusive) out.i[k] = acci;
      } else {
        if (exclusive) out.f[k] = accf;
        accf += x.f[k];
        if (!exclusive) out.f[k] = accf;
      }
    }
  }
  return {out};
}

// The `cumsum` op along the axis; along the last axis of a tensor of more than one row, between two transposes
// ([outer, R] to [R, outer] and back), so that each step of the scan adds a row of `outer` elements, not one.
void lower_cumsum(Lowerer& l, const Node& n) {
  const int x = l.in(n, 0);
  const ops::Shape s = l.t(x).desc.shape;
  const auto av = l.ints_of(n, 1, "axis");
  if (av.size() != 1) l.fail(n, "axis must hold one value");
  const auto axis = static_cast<std::size_t>(l.axis_in(n, av[0], s.size()));
  ops::CumSumCall c{static_cast<std::int64_t>(axis), n.attr_int("exclusive", 0) != 0, n.attr_int("reverse", 0) != 0};
  const DType dt = l.t(x).desc.dtype;
  if (!hw::isa::is_float(dt) && dt != DType::kInt32) l.fail(n, "the input is bool");
  const std::uint64_t rows = ops::elements(s) / s[axis];
  if (axis + 1 < s.size() || rows == 1) {
    const int o = l.out(n, 0);
    l.step(n, "cumsum", c, {x}, {o});
    return;
  }
  const ops::Shape flat{rows, s[axis]}, across{s[axis], rows};
  const int xv = l.reshaped(x, flat, n.name + "/rows");
  const int xt = l.temp(n.name + "/transposed", ops::TensorDesc{across, dt});
  l.step(n, "transpose", ops::TransposeCall{}, {xv}, {xt});
  const int yt = l.temp(n.name + "/scanned", ops::TensorDesc{across, dt});
  c.axis = 0;
  l.step(n, "cumsum", c, {xt}, {yt});
  const int y = l.temp(n.name + "/rows_out", ops::TensorDesc{flat, dt});
  l.step(n, "transpose", ops::TransposeCall{}, {yt}, {y});
  l.view(n, n.outputs[0], y);
}

}  // namespace

void add_row_ops(std::vector<OpInfo>& table) {
  const std::string softmax_text =
      "`softmax` / `log_softmax` on the last axis; on an inner axis of [A, K, B]: `transpose` to [A, B, K], the row "
      "op, "
      "`transpose` back";
  for (const char* type : {"Softmax", "LogSoftmax"})
    table.push_back(OpInfo::onnx(type, 1, 1).reads({"axis"}).lowers(lower_softmax, softmax_text));
  table.push_back(OpInfo::onnx("LayerNormalization", 2, 3)
                      .reads({"axis", "epsilon"})
                      .lowers(lower_layernorm,
                              "`layernorm` over rows of the trailing dims' product (any axis; the "
                              "Mean/InvStdDev outputs as fp32 with `stats`)"));
  const std::string reduce_text =
      "`reduce_sum`, `reduce_mean`, `reduce_max` over one axis (keepdims or not: a view of the result)";
  table.push_back(OpInfo::onnx("ReduceSum", 1, 2)
                      .reads({"axes", "keepdims"})
                      .needs_values_of({1})
                      .lowers(lower_reduce, reduce_text));
  table.push_back(OpInfo::onnx("ReduceMean", 1, 1).reads({"axes", "keepdims"}).lowers(lower_reduce, reduce_text));
  table.push_back(OpInfo::onnx("ReduceMax", 1, 1).reads({"axes", "keepdims"}).lowers(lower_reduce, reduce_text));
  table.push_back(
      OpInfo::onnx("CumSum", 2, 2)
          .reads({"exclusive", "reverse"})
          .needs_values_of({1})
          .folds(fold_cumsum)
          .lowers(lower_cumsum,
                  "`cumsum` (a running sum in fp32, streamed row by row: integers exact below 2^24); on the "
                  "last axis between two `transpose`s"));
}

}  // namespace npusim::stack::graph::onnx_ops
