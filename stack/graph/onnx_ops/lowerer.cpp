#include "stack/graph/onnx_ops/lowerer.hpp"

#include <algorithm>

#include "common/util/error.hpp"
#include "hw/isa/dtype.hpp"

namespace npusim::stack::graph::onnx_ops {

using hw::isa::DType;

namespace {

std::string where_of(const Node& n) {
  return "node '" + n.name + "' (" + n.op_type + ")";
}

}  // namespace

Lowerer::Lowerer(const Graph& g) : g_(g), map_(g.value_count(), -1) {}

void Lowerer::fail(const Node& n, const std::string& what) const {
  throw InputError("node '" + n.name + "' (" + n.op_type + "): " + what);
}

DType Lowerer::dtype_of(const Value& v, const std::string& where) const {
  if (const auto d = storage_dtype(v.type)) return *d;
  const std::string what = v.type == ElemType::kUndefined ? std::string(
                                                                "of a type the device has no form for (a string, "
                                                                "complex, float8 or 4-bit type, or unknown)")
                                                          : std::string(elem_name(v.type));
  throw InputError(where + ": value '" + v.name + "' is " + what +
                   " (the device holds float32, float16, bfloat16, integers as int32 and bool)");
}

ops::Shape Lowerer::shape_of(const Value& v, const std::string& where) const {
  if (!v.shape)
    throw InputError(where + ": the shape of '" + v.name +
                     "' is unknown (bind its symbolic dims with --dim NAME=SIZE)");
  ops::Shape s;
  for (const Dim& d : *v.shape) {
    if (!d.known())
      throw InputError(where + ": value '" + v.name + "' has the unbound dim '" + d.str() + "' (use --dim " + d.str() +
                       "=SIZE)");
    // Counts past ops::kMaxElements would wrap. A dim of 0 is an empty tensor: no kernel reads or writes one
    // (graph::lower gives a node whose outputs are all empty no step).
    if (d.value < 0) throw InputError(where + ": value '" + v.name + "' has a dim of " + std::to_string(d.value));
    const auto size = static_cast<std::uint64_t>(d.value);
    if (size > 0 && ops::elements(s) > 0 && size > ops::kMaxElements / ops::elements(s))
      throw InputError(where + ": value '" + v.name + "' " + graph::dims_string(*v.shape) +
                       " has more than 2^53 elements");
    s.push_back(size);
  }
  if (s.empty()) s = {1};
  return s;
}

int Lowerer::tensor(ValueId id, const std::string& where) {
  if (map_[static_cast<std::size_t>(id)] >= 0) return map_[static_cast<std::size_t>(id)];
  const Value& v = g_.value(id);
  ProgramTensor pt;
  pt.name = v.name;
  pt.desc = {shape_of(v, where), dtype_of(v, where)};
  pt.type = v.type;
  pt.rank0 = v.shape && v.shape->empty();
  if (v.constant) pt.constant = convert(*v.constant, pt.desc.dtype);
  p_.tensors.push_back(std::move(pt));
  map_[static_cast<std::size_t>(id)] = static_cast<int>(p_.tensors.size() - 1);
  return map_[static_cast<std::size_t>(id)];
}

int Lowerer::in(const Node& n, std::size_t i) {
  return tensor(n.inputs.at(i), where_of(n));
}
int Lowerer::out(const Node& n, std::size_t i) {
  return tensor(n.outputs.at(i), where_of(n));
}

int Lowerer::temp(const std::string& name, ops::TensorDesc d) {
  ProgramTensor pt;
  pt.name = name;
  pt.desc = std::move(d);
  p_.tensors.push_back(std::move(pt));
  return static_cast<int>(p_.tensors.size() - 1);
}

std::vector<std::uint8_t> Lowerer::convert(const Tensor& c, DType to) {
  if (c.type == elem_type_of(to)) return c.bytes;  // weights already in the device type: as they are
  if (!hw::isa::is_float(to) && !device_dtype(c.type)) return to_storage(c.type, c.bytes, "constant");
  const std::uint32_t es = hw::isa::dtype_bytes(to);
  if (const auto from = device_dtype(c.type)) {  // float -> float, element by element (no double copy of a weight)
    const std::uint32_t fs = hw::isa::dtype_bytes(*from);
    const std::size_t n = c.bytes.size() / fs;
    std::vector<std::uint8_t> out(n * es);
    for (std::size_t i = 0; i < n; ++i)
      hw::isa::store_float(&out[i * es], to, hw::isa::load_float(&c.bytes[i * fs], *from));
    return out;
  }
  const std::vector<double> v = c.as_doubles();
  std::vector<std::uint8_t> out(v.size() * es);
  for (std::size_t i = 0; i < v.size(); ++i) hw::isa::store_float(&out[i * es], to, static_cast<float>(v[i]));
  return out;
}

int Lowerer::reshaped(int x, const ops::Shape& shape, const std::string& name) {
  const int r = temp(name, ops::TensorDesc{shape, t(x).desc.dtype});
  t(r).alias = t(x).alias >= 0 ? t(x).alias : x;
  return r;
}

void Lowerer::step(const Node& n, const std::string& op, ops::Call call, std::vector<int> in, std::vector<int> out) {
  p_.steps.push_back(Step{n.name, op, std::move(call), std::move(in), std::move(out), {}, {}, n.sources()});
}

void Lowerer::view(const Node& n, ValueId out, int base) {
  const int o = tensor(out, "node '" + n.name + "'");
  if (ops::elements(t(o).desc.shape) != ops::elements(t(base).desc.shape))
    fail(n, "the output has " + std::to_string(ops::elements(t(o).desc.shape)) + " elements, the input " +
                std::to_string(ops::elements(t(base).desc.shape)));
  t(o).alias = t(base).alias >= 0 ? t(base).alias : base;
  t(o).desc.dtype = t(base).desc.dtype;
}

std::string Lowerer::from_inputs(ValueId v) const {
  std::string names;
  for (const ValueId in : g_.inputs_reaching(v, reads_values))
    names += (names.empty() ? "'" : ", '") + g_.value(in).name + "'";
  if (names.empty()) return "";
  return " (it comes from the input " + names +
         ", whose value decides shapes: give it with --functional --inputs DIR, and npusim binds it when compiling)";
}

std::vector<std::int64_t> Lowerer::ints_of(const Node& n, std::size_t input, const std::string& what) const {
  if (input >= n.inputs.size() || n.inputs[input] == kNoValue) return {};
  const Value& v = g_.value(n.inputs[input]);
  if (!v.constant) fail(n, what + " must be a constant" + from_inputs(n.inputs[input]));
  return v.constant->as_ints();
}

std::int64_t Lowerer::axis_in(const Node& n, std::int64_t axis, std::size_t rank) const {
  const auto r = static_cast<std::int64_t>(rank);
  if (axis < -r || axis >= r) fail(n, "axis " + std::to_string(axis) + " is outside rank " + std::to_string(rank));
  return axis < 0 ? axis + r : axis;
}

int Lowerer::bias_or_zeros(const Node& n, std::size_t input, std::uint64_t h, DType dtype) {
  if (n.inputs.size() > input && n.inputs[input] != kNoValue) return in(n, input);
  const int zeros = temp(n.name + "/zero_bias", ops::TensorDesc{ops::Shape{h}, dtype});
  t(zeros).constant.assign(h * hw::isa::dtype_bytes(dtype), 0);
  return zeros;
}

int Lowerer::expanded(const Node& n, int x, const ops::Shape& to) {
  if (t(x).desc.shape == to) return x;
  ops::ExpandCall call{to};  // before temp(): `to` may be a tensor's shape, and temp() may move the tensors
  const int e = temp(n.name + "/" + t(x).name + "/expanded", ops::TensorDesc{call.to, t(x).desc.dtype});
  step(n, "expand", std::move(call), {x}, {e});
  return e;
}

int Lowerer::broadcast_operand(const Node& n, int x, const ops::Shape& shape) {
  ops::Shape xs = t(x).desc.shape;
  while (xs.size() > 1 && xs.front() == 1) xs.erase(xs.begin());
  if (ops::elements(xs) == 1 || xs.size() > shape.size() ||
      !std::equal(xs.begin(), xs.end(), shape.end() - static_cast<std::ptrdiff_t>(xs.size())))
    return expanded(n, x, shape);
  return x;
}

void Lowerer::expression(const Node& n, const std::string& kernel, const std::vector<ValueId>& operands,
                         const std::function<std::string(const std::vector<std::string>&)>& build) {
  const std::string where = where_of(n);
  const int o = tensor(n.outputs.at(0), where);
  const ops::Shape shape = t(o).desc.shape;
  const DType dt = t(o).desc.dtype;
  std::vector<int> ins;
  std::vector<std::string> args;
  for (const ValueId v : operands) {
    const Value& val = g_.value(v);
    if (val.constant && val.constant->elements() == 1) {  // a literal (integers and bools as numbers)
      args.push_back(num(val.constant->as_doubles()[0]));
      continue;
    }
    const int x = broadcast_operand(n, tensor(v, where), shape);  // any type: the kernel converts each to fp32
    args.push_back("x" + std::to_string(ins.size()));
    ins.push_back(x);
  }
  if (ins.size() > 8) fail(n, "more than 8 tensor inputs");
  // The output's type when the kernel's default (the first float input's) is not it: a bool or integer result, or
  // a float one from integer inputs.
  std::optional<DType> to = dt;
  for (const int x : ins)
    if (hw::isa::is_float(t(x).desc.dtype)) {
      if (t(x).desc.dtype == dt) to.reset();
      break;
    }
  step(n, "fused_elementwise", ops::FusedElementwiseCall{build(args), shape, to}, ins, {o});
  p_.steps.back().kernel = kernel;
}

int Lowerer::to_half(const Node& n, int x, DType cube, const std::string& what) {
  if (t(x).desc.dtype == cube) return x;
  if (const auto it = halves_.find(x); it != halves_.end()) return it->second;
  if (const auto it = widened_.find(x); it != widened_.end() && t(it->second).desc.dtype == cube)
    return it->second;  // x is the exact fp32 widening of a Cube result: that result, with no cast back
  const int h = make_half(n, x, cube, what);
  halves_[x] = h;
  return h;
}

int Lowerer::make_half(const Node& n, int x, DType cube, const std::string& what) {
  if (!t(x).constant.empty()) {
    const int c = temp(t(x).name + "/fp16", ops::TensorDesc{t(x).desc.shape, cube});
    const Tensor tmp{ElemType::kFloat32, {}, t(x).constant};
    t(c).constant = convert(tmp, cube);
    return c;
  }
  const int c = temp(n.name + "/" + what + "_fp16", ops::TensorDesc{t(x).desc.shape, cube});
  step(n, "cast", ops::CastCall{cube}, {x}, {c});
  return c;
}

void Lowerer::widen(const Node& n, int result, int o) {
  if (result == o) return;
  step(n, "cast", ops::CastCall{t(o).desc.dtype}, {result}, {o});
  widened_[o] = result;
}

}  // namespace npusim::stack::graph::onnx_ops
