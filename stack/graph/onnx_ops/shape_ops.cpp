// Shapes and types: the views (Identity, Reshape, Flatten, Squeeze, Unsqueeze: the same bytes under another shape),
// Constant, the shape arithmetic frameworks export (Shape, Size, ConstantOfShape, Range; host only) and Cast.
#include <algorithm>
#include <cmath>

#include "stack/graph/onnx_ops/lowerer.hpp"
#include "stack/graph/onnx_ops/op_table.hpp"

namespace npusim::stack::graph::onnx_ops {

namespace {

// The output shape of Reshape, Flatten, Squeeze and Unsqueeze for the constant input x.
std::vector<std::int64_t> reshaped(const FoldArgs& a, const HostArray& x) {
  const Node& n = a.node;
  const auto rank = static_cast<std::int64_t>(x.shape.size());
  if (n.op_type == "Flatten") {
    const std::int64_t axis = n.attr_int("axis", 1) < 0 ? n.attr_int("axis", 1) + rank : n.attr_int("axis", 1);
    if (axis < 0 || axis > rank) throw NoFold{};  // left to inference, which names it (found by fuzzing)
    std::int64_t outer = 1;
    for (std::int64_t d = 0; d < axis; ++d) outer *= x.shape[static_cast<std::size_t>(d)];
    return {outer, count(x.shape) / std::max<std::int64_t>(outer, 1)};
  }
  if (n.op_type == "Reshape") {
    const HostArray* to = a.optional(1);
    if (!to) throw NoFold{};
    std::vector<std::int64_t> s = to->i;
    std::int64_t known = 1, infer = -1;
    for (std::size_t d = 0; d < s.size(); ++d) {
      if (s[d] == 0 && !n.attr_int("allowzero", 0)) {
        if (d >= x.shape.size()) throw NoFold{};
        s[d] = x.shape[d];
      }
      // A dim below -1, a second -1 or a product past int64 is no shape: left to inference, which names it (signed
      // overflow here was found by fuzzing).
      if (s[d] < -1 || (s[d] == -1 && infer >= 0)) throw NoFold{};
      if (s[d] == -1)
        infer = static_cast<std::int64_t>(d);
      else if (__builtin_mul_overflow(known, s[d], &known))
        throw NoFold{};
    }
    if (infer >= 0) s[static_cast<std::size_t>(infer)] = known ? count(x.shape) / known : 0;
    return s;
  }
  std::vector<std::int64_t> axes;
  if (const Attribute* at = n.attr("axes"))
    axes = at->ints;
  else if (const HostArray* in = a.optional(1))
    axes = in->i;
  auto listed = [&](std::int64_t d, std::int64_t r) {
    return std::any_of(axes.begin(), axes.end(), [&](std::int64_t ax) { return norm_axis(ax, r) == d; });
  };
  std::vector<std::int64_t> s;
  if (n.op_type == "Squeeze") {
    for (std::int64_t d = 0; d < rank; ++d) {
      if ((axes.empty() && x.shape[static_cast<std::size_t>(d)] == 1) || listed(d, rank)) continue;
      s.push_back(x.shape[static_cast<std::size_t>(d)]);
    }
    return s;
  }
  const std::int64_t out_rank = rank + static_cast<std::int64_t>(axes.size());  // Unsqueeze
  std::size_t next = 0;
  for (std::int64_t d = 0; d < out_rank; ++d) {
    if (!listed(d, out_rank) && next >= x.shape.size()) throw NoFold{};  // an axis listed twice
    s.push_back(listed(d, out_rank) ? 1 : x.shape[next++]);
  }
  return s;
}

std::vector<HostArray> fold_view(const FoldArgs& a) {
  const HostArray& x = a.need(0);
  if (a.node.op_type == "Identity") return {x};
  HostArray out = x;
  out.shape = reshaped(a, x);
  if (count(out.shape) != count(x.shape)) throw NoFold{};
  return {out};
}

void lower_view(Lowerer& l, const Node& n) {
  l.view(n, n.outputs[0], l.in(n, 0));
}

std::vector<HostArray> fold_constant(const FoldArgs& a) {
  const Node& n = a.node;
  if (const Attribute* at = n.attr("value")) return {from_tensor(at->t)};
  if (const Attribute* at = n.attr("value_float")) return {float_array({}, {at->f})};
  if (const Attribute* at = n.attr("value_floats"))
    return {float_array({static_cast<std::int64_t>(at->floats.size())},
                        std::vector<double>(at->floats.begin(), at->floats.end()))};
  if (const Attribute* at = n.attr("value_int")) return {int_array({}, {at->i})};
  if (const Attribute* at = n.attr("value_ints"))
    return {int_array({static_cast<std::int64_t>(at->ints.size())}, at->ints)};
  throw NoFold{};
}

void lower_constant(Lowerer& l, const Node& n) {
  const Value& v = l.graph().value(n.outputs[0]);
  const Attribute* a = n.attr("value");
  if (!a || a->kind != Attribute::Kind::kTensor) l.fail(n, "only the 'value' tensor form is supported");
  if (v.type == ElemType::kFloat32 || v.type == ElemType::kFloat16 || v.type == ElemType::kBFloat16) {
    const int o = l.out(n, 0);
    l.t(o).constant = Lowerer::convert(a->t, l.t(o).desc.dtype);
  }
  // integer constants serve as shapes and axes on the host
}

// Shape and Size from the input's static shape.
std::vector<HostArray> fold_shape(const FoldArgs& a) {
  const Node& n = a.node;
  const Value& x = a.graph.value(n.inputs.at(0));
  if (!x.shape) throw NoFold{};
  std::vector<std::int64_t> dims;
  for (const Dim& d : *x.shape) {
    if (!d.known()) throw NoFold{};
    dims.push_back(d.value);
  }
  if (n.op_type == "Size") return {int_array({}, {count(dims)})};
  const auto r = static_cast<std::int64_t>(dims.size());
  auto clampi = [&](std::int64_t v) { return std::clamp(v < 0 ? v + r : v, std::int64_t{0}, r); };
  const std::int64_t b = clampi(n.attr_int("start", 0)), e = clampi(n.attr_int("end", r));
  std::vector<std::int64_t> part(dims.begin() + b, dims.begin() + std::max(b, e));
  return {int_array({static_cast<std::int64_t>(part.size())}, part)};
}

std::vector<HostArray> fold_constant_of_shape(const FoldArgs& a) {
  const std::vector<std::int64_t> shape = a.need(0).i;
  HostArray v = float_array({}, {0.0});
  if (const Attribute* at = a.node.attr("value")) v = from_tensor(at->t);
  return {make(
      v.type, shape, [&](std::int64_t) { return v.f.at(0); }, [&](std::int64_t) { return v.i.at(0); })};
}

std::vector<HostArray> fold_range(const FoldArgs& a) {
  const HostArray &x = a.need(0), &lim = a.need(1), &dl = a.need(2);
  const double s = x.num(0), l = lim.num(0), d = dl.num(0);
  if (d == 0) throw NoFold{};
  const auto len = std::max<std::int64_t>(0, to_int(std::ceil((l - s) / d)));
  return {make(
      x.type, {len}, [&](std::int64_t k) { return s + static_cast<double>(k) * d; },
      [&](std::int64_t k) { return to_int(s) + k * to_int(d); })};
}

std::vector<HostArray> fold_cast(const FoldArgs& a) {
  const HostArray& x = a.need(0);
  if (!a.node.attr("to")) throw NoFold{};
  const ElemType t = a.graph.value(a.node.outputs[0]).type;
  if (t == ElemType::kUndefined) throw NoFold{};
  // Integers stay exact (int64 through int64, not double); a float that no integer holds is not folded.
  return {make(
      t, x.shape, [&](std::int64_t k) { return x.num(k); },
      [&](std::int64_t k) -> std::int64_t {
        if (x.is_int())
          return t == ElemType::kBool ? x.i[static_cast<std::size_t>(k)] != 0 : x.i[static_cast<std::size_t>(k)];
        const double v = x.f[static_cast<std::size_t>(k)];
        if (t == ElemType::kBool) return v != 0;
        return to_int(v);
      })};
}

void lower_cast(Lowerer& l, const Node& n) {
  // int8, int16 and uint8 live in int32 on the device: a cast into one from a wider type would not wrap.
  const ElemType from = l.graph().value(n.inputs[0]).type, to = l.graph().value(n.outputs[0]).type;
  const bool narrow = to == ElemType::kInt8 || to == ElemType::kInt16 || to == ElemType::kUint8;
  if (narrow && from != to && from != ElemType::kBool)
    l.fail(n, "a cast from " + std::string(elem_name(from)) + " to " + std::string(elem_name(to)) +
                  " is not run on the device (the device holds it in int32, so values would not wrap)");
  const int x = l.in(n, 0), o = l.out(n, 0);
  if (l.t(x).desc.dtype == l.t(o).desc.dtype) {
    l.view(n, n.outputs[0], x);
    return;
  }
  if (hw::isa::is_float(l.t(x).desc.dtype) && hw::isa::is_float(l.t(o).desc.dtype)) {
    l.step(n, "cast", ops::CastCall{l.t(o).desc.dtype}, {x}, {o});
    return;
  }
  // Integers and bools: a fused_elementwise expression converts on the way in and out (to an integer: truncated
  // toward zero; to bool: x != 0).
  const bool to_bool = l.graph().value(n.outputs[0]).type == ElemType::kBool;
  l.expression(n, "Cast", {n.inputs[0]}, [to_bool](const auto& a) { return to_bool ? "ne(" + a[0] + ",0)" : a[0]; });
}

}  // namespace

void add_shape_ops(std::vector<OpInfo>& table) {
  const std::string view = "a view: the same buffer under the output's shape";
  auto view_op = [&](const char* type, std::size_t min_inputs, std::size_t max_inputs, std::vector<std::string> attrs) {
    table.push_back(OpInfo::onnx(type, min_inputs, max_inputs)
                        .reads(std::move(attrs))
                        .needs_values_of(max_inputs > 1 ? std::vector<std::size_t>{1} : std::vector<std::size_t>{})
                        .folds(fold_view)
                        .lowers(lower_view, view));
  };
  view_op("Identity", 1, 1, {});
  view_op("Reshape", 2, 2, {"allowzero"});  // the shape
  view_op("Flatten", 1, 1, {"axis"});
  view_op("Squeeze", 1, 2, {"axes"});  // the axes
  view_op("Unsqueeze", 1, 2, {"axes"});
  table.push_back(OpInfo::onnx("Constant", 0, 0)
                      .reads({"value", "value_float", "value_floats", "value_int", "value_ints"})
                      .folds(fold_constant, false)
                      .lowers(lower_constant,
                              "a constant tensor uploaded before the first step (the `value` tensor "
                              "form; integer constants stay on the host)"));
  table.push_back(OpInfo::onnx("Shape", 1, 1).reads({"start", "end"}).folds(fold_shape, false));
  table.push_back(OpInfo::onnx("Size", 1, 1).folds(fold_shape, false));
  table.push_back(
      OpInfo::onnx("ConstantOfShape", 1, 1).reads({"value"}).needs_values_of({0}).folds(fold_constant_of_shape));
  table.push_back(OpInfo::onnx("Range", 3, 3).needs_values_of({0, 1, 2}).folds(fold_range));
  table.push_back(OpInfo::onnx("Cast", 1, 1)
                      .reads({"to"})
                      .folds(fold_cast)
                      .lowers(lower_cast,
                              "`cast` between float types; a `fused_elementwise` expression to or from integers "
                              "(int32 on the device, truncated toward zero) and bool (`ne(x, 0)`); a view when the "
                              "device type does not change"));
}

}  // namespace npusim::stack::graph::onnx_ops
