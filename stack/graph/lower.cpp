#include "stack/graph/lower.hpp"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <functional>

#include "common/util/error.hpp"
#include "hw/isa/dtype.hpp"
#include "stack/graph/activations.hpp"

namespace npusim::stack::graph {

using hw::isa::DType;

const std::vector<std::string>& supported_op_types() {
  static const std::vector<std::string> types = {
      "Add", "Sub", "Mul", "Div", "Pow", "MatMul", "Gemm", "Relu", "Exp", "Log", "Sqrt", "Abs", "Neg", "Reciprocal",
      "Sigmoid", "Tanh", "Erf", "Softmax", "LogSoftmax", "LayerNormalization", "Transpose", "Cast", "Slice", "Concat", "Split",
      "Expand", "Where", "LeakyRelu", "Elu", "Selu", "HardSigmoid", "Softplus", "Softsign", "PRelu", "Clip", "Max",
      "Min", "Sum", "Mean",
      "ReduceSum", "ReduceMean", "ReduceMax", "Reshape", "Flatten", "Squeeze", "Unsqueeze", "Identity", "Constant",
      "npusim.FlashAttention", "npusim.RMSNormalization", "npusim.Gelu", "npusim.MatMulBias", "npusim.RoPE",
      "npusim.AddLayerNorm", "npusim.FusedElementwise"};
  return types;
}

namespace {


// A float attribute as an op parameter, without losing digits (std::to_string keeps six decimals).
std::string num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.9g", v);
  return buf;
}

ops::NormCall norm_call(float eps) {
  ops::NormCall c;
  c.eps = eps;
  return c;
}

class Lowering {
 public:
  explicit Lowering(const Graph& g) : g_(g), map_(g.value_count(), -1) {}

  Program run() {
    for (ValueId in : g_.inputs) p_.inputs.push_back(tensor(in, "graph input"));
    for (NodeId id : g_.topo_order()) node(g_.node(id));
    for (ValueId out : g_.outputs) p_.outputs.push_back(tensor(out, "graph output"));
    drop_unread_steps();
    return std::move(p_);
  }

 private:
  // Steps none of whose outputs is read (by a later step, through a view, or as a graph output) are dropped: the
  // widening casts of Cube results that only went back to the Cube.
  void drop_unread_steps() {
    auto base = [&](int x) { return t(x).alias >= 0 ? t(x).alias : x; };
    for (bool again = true; again;) {
      again = false;
      std::vector<bool> read(p_.tensors.size(), false);
      for (int o : p_.outputs) read[static_cast<std::size_t>(base(o))] = true;
      for (const Step& st : p_.steps)
        for (int i : st.inputs) read[static_cast<std::size_t>(base(i))] = true;
      for (std::size_t k = p_.steps.size(); k-- > 0;) {
        const Step& st = p_.steps[k];
        if (std::any_of(st.outputs.begin(), st.outputs.end(), [&](int o) { return read[static_cast<std::size_t>(base(o))]; })) continue;
        p_.steps.erase(p_.steps.begin() + static_cast<std::ptrdiff_t>(k));
        again = true;
      }
    }
  }

  [[noreturn]] void fail(const Node& n, const std::string& what) const {
    throw InputError("node '" + n.name + "' (" + n.op_type + "): " + what);
  }

  DType dtype_of(const Value& v, const std::string& where) const {
    if (const auto d = device_dtype(v.type)) return *d;
    throw InputError(where + ": value '" + v.name + "' is " + std::string(elem_name(v.type)) +
                     " (the device ops take float32, float16 and bfloat16)");
  }
  ops::Shape shape_of(const Value& v, const std::string& where) const {
    if (!v.shape) throw InputError(where + ": the shape of '" + v.name + "' is unknown (bind its symbolic dims with --dim NAME=SIZE)");
    ops::Shape s;
    for (const Dim& d : *v.shape) {
      if (!d.known()) throw InputError(where + ": value '" + v.name + "' has the unbound dim '" + d.str() + "' (use --dim " + d.str() + "=SIZE)");
      // Empty tensors have no kernels, and counts past ops::kMaxElements would wrap (both divided by zero).
      if (d.value <= 0) throw InputError(where + ": value '" + v.name + "' has a dim of " + std::to_string(d.value) + " (empty tensors are not run)");
      const auto size = static_cast<std::uint64_t>(d.value);
      if (size > ops::kMaxElements / ops::elements(s))
        throw InputError(where + ": value '" + v.name + "' " + graph::dims_string(*v.shape) + " has more than 2^53 elements");
      s.push_back(size);
    }
    if (s.empty()) s = {1};
    return s;
  }

  // The program tensor of a graph value (created on first use; constants carry their bytes in the tensor's dtype).
  int tensor(ValueId id, const std::string& where) {
    if (map_[static_cast<std::size_t>(id)] >= 0) return map_[static_cast<std::size_t>(id)];
    const Value& v = g_.value(id);
    ProgramTensor t;
    t.name = v.name;
    t.desc = {shape_of(v, where), dtype_of(v, where)};
    if (v.constant) t.constant = convert(*v.constant, t.desc.dtype);
    p_.tensors.push_back(std::move(t));
    map_[static_cast<std::size_t>(id)] = static_cast<int>(p_.tensors.size() - 1);
    return map_[static_cast<std::size_t>(id)];
  }
  int temp(const std::string& name, ops::TensorDesc d) {
    ProgramTensor t;
    t.name = name;
    t.desc = std::move(d);
    p_.tensors.push_back(std::move(t));
    return static_cast<int>(p_.tensors.size() - 1);
  }
  static std::vector<std::uint8_t> convert(const Tensor& c, DType to) {
    if (c.type == elem_type_of(to)) return c.bytes;  // weights already in the device type: as they are
    const std::uint32_t es = hw::isa::dtype_bytes(to);
    if (const auto from = device_dtype(c.type)) {  // float -> float, element by element (no double copy of a weight)
      const std::uint32_t fs = hw::isa::dtype_bytes(*from);
      const std::size_t n = c.bytes.size() / fs;
      std::vector<std::uint8_t> out(n * es);
      for (std::size_t i = 0; i < n; ++i) hw::isa::store_float(&out[i * es], to, hw::isa::load_float(&c.bytes[i * fs], *from));
      return out;
    }
    const std::vector<double> v = c.as_doubles();
    std::vector<std::uint8_t> out(v.size() * es);
    for (std::size_t i = 0; i < v.size(); ++i) hw::isa::store_float(&out[i * es], to, static_cast<float>(v[i]));
    return out;
  }
  const ProgramTensor& t(int i) const { return p_.tensors[static_cast<std::size_t>(i)]; }
  ProgramTensor& t(int i) { return p_.tensors[static_cast<std::size_t>(i)]; }

  void step(const Node& n, const std::string& op, ops::Call call, std::vector<int> in, std::vector<int> out) {
    p_.steps.push_back(Step{n.name, op, std::move(call), std::move(in), std::move(out), {}, {}});
  }
  void view(const Node& n, ValueId out, int base) {
    const int o = tensor(out, "node '" + n.name + "'");
    if (ops::elements(t(o).desc.shape) != ops::elements(t(base).desc.shape))
      fail(n, "the output has " + std::to_string(ops::elements(t(o).desc.shape)) + " elements, the input " +
                  std::to_string(ops::elements(t(base).desc.shape)));
    t(o).alias = t(base).alias >= 0 ? t(base).alias : base;
    t(o).desc.dtype = t(base).desc.dtype;
  }
  std::vector<std::int64_t> ints_of(const Node& n, std::size_t input, const std::string& what) const {
    if (input >= n.inputs.size() || n.inputs[input] == kNoValue) return {};
    const Value& v = g_.value(n.inputs[input]);
    if (!v.constant) fail(n, what + " must be a constant");
    return v.constant->as_ints();
  }
  std::int64_t axis_in(const Node& n, std::int64_t axis, std::size_t rank) const {
    const auto r = static_cast<std::int64_t>(rank);
    if (axis < -r || axis >= r) fail(n, "axis " + std::to_string(axis) + " is outside rank " + std::to_string(rank));
    return axis < 0 ? axis + r : axis;
  }

  void node(const Node& n) {
    const std::string where = "node '" + n.name + "' (" + n.op_type + ")";
    if (n.domain == "npusim" && n.op_type == "FlashAttention") {
      lower_attention(n);
      return;
    }
    if (n.domain == "npusim" && n.op_type == "RMSNormalization") {
      const int x = tensor(n.inputs.at(0), where);
      step(n, "rmsnorm", norm_call(n.attr_float("epsilon", 1e-6f)), {x, tensor(n.inputs.at(1), where)}, {tensor(n.outputs.at(0), where)});
      return;
    }
    if (n.domain == "npusim" && n.op_type == "Gelu") {
      const int x = tensor(n.inputs.at(0), where);
      const Attribute* approx = n.attr("approximate");
      step(n, approx && approx->s == "tanh" ? "gelu_tanh" : "gelu", ops::Operands{}, {x}, {tensor(n.outputs.at(0), where)});
      return;
    }
    if (n.domain == "npusim" && n.op_type == "RoPE") {
      const int x = tensor(n.inputs.at(0), where), c = tensor(n.inputs.at(1), where), sn = tensor(n.inputs.at(2), where);
      const ops::Shape s = t(x).desc.shape;
      const Attribute* layout = n.attr("layout");
      const bool bsnd = layout && layout->s == "bsnd";
      const ops::Shape table{s[s.size() - (bsnd ? 3 : 2)], s.back()};
      step(n, "rope", ops::RopeCall{bsnd ? ops::RopeLayout::kBsnd : ops::RopeLayout::kBnsd}, {x, c, sn}, {tensor(n.outputs.at(0), where)});
      p_.steps.back().shapes = {s, table, table};
      return;
    }
    if (n.domain == "npusim" && n.op_type == "AddLayerNorm") {
      const int a = tensor(n.inputs.at(0), where), b = tensor(n.inputs.at(1), where);
      const ops::Shape s = t(a).desc.shape;
      const std::uint64_t h = s.back(), rows = ops::elements(s) / h;
      const int gamma = tensor(n.inputs.at(2), where);
      int beta = -1;
      if (n.inputs.size() > 3 && n.inputs[3] != kNoValue) {
        beta = tensor(n.inputs[3], where);
      } else {
        beta = temp(n.name + "/zero_bias", ops::TensorDesc{ops::Shape{h}, t(a).desc.dtype});
        t(beta).constant.assign(h * hw::isa::dtype_bytes(t(a).desc.dtype), 0);
      }
      std::vector<int> outs{tensor(n.outputs.at(0), where)};
      const bool sum = n.outputs.size() > 1 && n.outputs[1] != kNoValue;
      if (sum) outs.push_back(tensor(n.outputs[1], where));
      ops::NormCall call = norm_call(n.attr_float("epsilon", 1e-5f));
      call.sum = sum;
      step(n, "add_layernorm", call, {a, b, gamma, beta}, outs);
      p_.steps.back().shapes = {{rows, h}, {rows, h}, {h}, {h}};
      return;
    }
    if (n.domain == "npusim" && n.op_type == "FusedElementwise") {
      const int o = tensor(n.outputs.at(0), where);
      const Attribute* expr = n.attr("expr");
      if (!expr) fail(n, "the 'expr' attribute is missing");
      std::vector<int> ins;
      for (std::size_t k = 0; k < n.inputs.size(); ++k) {
        const Value& v = g_.value(n.inputs[k]);
        int x = -1;
        if (v.constant && !device_dtype(v.type)) {  // a Where's bool condition: 0/1 in the data type
          x = temp(n.name + "/x" + std::to_string(k), ops::TensorDesc{shape_of(v, where), t(o).desc.dtype});
          t(x).constant = convert(*v.constant, t(o).desc.dtype);
        } else {
          x = tensor(n.inputs[k], where);
        }
        ins.push_back(x);
      }
      step(n, "fused_elementwise", ops::FusedElementwiseCall{expr->s, t(o).desc.shape}, ins, {o});
      if (const Attribute* k = n.attr("kernel")) p_.steps.back().kernel = k->s;
      return;
    }
    if (!n.domain.empty() && !(n.domain == "npusim" && n.op_type == "MatMulBias"))
      fail(n, "domain '" + n.domain + "' is not supported");
    const std::string& op = n.op_type;
    // Inputs the lowering reads, by op type (ONNX's own checks may let a malformed node through).
    static const std::map<std::string, std::size_t> arity = {
        {"Add", 2}, {"Sub", 2}, {"Mul", 2}, {"Div", 2}, {"Pow", 2}, {"MatMul", 2}, {"Gemm", 2}, {"LayerNormalization", 2},
        {"Where", 3}, {"PRelu", 2}};
    const auto need = arity.count(op) ? arity.at(op) : (op == "Constant" ? 0 : 1);
    for (std::size_t i = 0; i < need; ++i)
      if (i >= n.inputs.size() || n.inputs[i] == kNoValue) fail(n, "input " + std::to_string(i) + " is missing");
    if (n.outputs.empty() || n.outputs[0] == kNoValue) fail(n, "has no output");
    auto in = [&](std::size_t i) { return tensor(n.inputs.at(i), where); };
    auto out = [&](std::size_t i) { return tensor(n.outputs.at(i), where); };
    if (op == "Constant") {
      const Value& v = g_.value(n.outputs[0]);
      const Attribute* a = n.attr("value");
      if (!a || a->kind != Attribute::Kind::kTensor) fail(n, "only the 'value' tensor form is supported");
      if (v.type == ElemType::kFloat32 || v.type == ElemType::kFloat16 || v.type == ElemType::kBFloat16) {
        const int o = out(0);
        t(o).constant = convert(a->t, t(o).desc.dtype);
      }
      return;  // integer constants serve as shapes and axes on the host
    }
    if (op == "Identity" || op == "Reshape" || op == "Flatten" || op == "Squeeze" || op == "Unsqueeze") {
      view(n, n.outputs[0], in(0));
      return;
    }
    if (op == "Add" || op == "Sub" || op == "Mul" || op == "Div") {
      int a = in(0), b = in(1);
      const ops::Shape sa = t(a).desc.shape, sb = t(b).desc.shape;
      auto trailing = [](ops::Shape small, const ops::Shape& big) {
        const bool column = small.size() == big.size() && big.size() >= 2 && small.back() == 1 &&
                            std::equal(small.begin(), small.end() - 1, big.begin());  // a per-row scalar
        while (small.size() > 1 && small.front() == 1) small.erase(small.begin());
        return column ||
               (small.size() <= big.size() && std::equal(small.begin(), small.end(), big.end() - static_cast<std::ptrdiff_t>(small.size())));
      };
      if (op == "Div" && ops::elements(sa) == 1 && !t(a).constant.empty() && ops::elements(sb) > 1) {
        const auto one = g_.value(n.inputs[0]).constant->as_doubles();
        if (one.size() == 1 && one[0] == 1.0) {  // 1 / x
          step(n, "reciprocal", ops::Operands{}, {b}, {out(0)});
          return;
        }
      }
      if (!trailing(sb, sa)) {
        if ((op == "Add" || op == "Mul") && trailing(sa, sb)) std::swap(a, b);
        else if (ops::elements(sb) == 1 && !t(b).constant.empty()) {
          // A scalar constant: widened to a row of the last dim on the host.
          const std::uint64_t h = sa.back(), es = hw::isa::dtype_bytes(t(b).desc.dtype);
          const int wide = temp(t(b).name + "/row", ops::TensorDesc{ops::Shape{h}, t(b).desc.dtype});
          for (std::uint64_t i = 0; i < h; ++i) t(wide).constant.insert(t(wide).constant.end(), t(b).constant.begin(), t(b).constant.begin() + static_cast<std::ptrdiff_t>(es));
          b = wide;
        } else {
          // Any other numpy broadcast: the inputs are expanded to the output's shape first.
          const ops::Shape o = t(out(0)).desc.shape;
          a = expanded(n, a, o);
          b = expanded(n, b, o);
        }
      }
      if (t(a).desc.dtype != t(b).desc.dtype) fail(n, "inputs of different dtypes");
      std::string name = op;
      std::transform(name.begin(), name.end(), name.begin(), ::tolower);
      step(n, name, ops::Operands{}, {a, b}, {out(0)});
      return;
    }
    static const std::map<std::string, std::string> unary = {
        {"Relu", "relu"}, {"Exp", "exp"}, {"Log", "log"}, {"Sqrt", "sqrt"}, {"Abs", "abs"}, {"Neg", "neg"},
        {"Reciprocal", "reciprocal"}, {"Sigmoid", "sigmoid"}, {"Tanh", "tanh"}, {"Erf", "erf"}};
    if (const auto u = unary.find(op); u != unary.end()) {
      step(n, u->second, ops::Operands{}, {in(0)}, {out(0)});
      return;
    }
    if (op == "Pow") {  // constant exponents: x^2 as x * x, x^0.5 as sqrt, other small ones as one fused expression
      const Value& e = g_.value(n.inputs.at(1));
      if (!e.constant || e.constant->elements() != 1) fail(n, "the exponent must be a constant scalar");
      const double ex = e.constant->as_doubles()[0];
      const int x = in(0);
      static const std::map<double, std::string> forms = {
          {1.0, "x0"}, {3.0, "mul(mul(x0,x0),x0)"}, {4.0, "mul(mul(x0,x0),mul(x0,x0))"}, {-1.0, "reciprocal(x0)"},
          {-2.0, "reciprocal(mul(x0,x0))"}, {-0.5, "rsqrt(x0)"}, {1.5, "mul(x0,sqrt(x0))"}};
      if (ex == 2.0)
        step(n, "mul", ops::Operands{}, {x, x}, {out(0)});
      else if (ex == 0.5)
        step(n, "sqrt", ops::Operands{}, {x}, {out(0)});
      else if (const auto f = forms.find(ex); f != forms.end())
        step(n, "fused_elementwise", ops::FusedElementwiseCall{f->second, t(x).desc.shape}, {x}, {out(0)});
      else
        fail(n, "the exponent " + num(ex) + " is not supported (2, 0.5, 3, 4, 1.5, 1, -0.5, -1, -2 are)");
      return;
    }
    if (op == "Softmax" || op == "LogSoftmax") {
      const char* kernel = op == "Softmax" ? "softmax" : "log_softmax";
      const int x = in(0);
      const ops::Shape s = t(x).desc.shape;
      const std::int64_t axis = axis_in(n, n.attr_int("axis", g_.opset && g_.opset < 13 ? 1 : -1), s.size());
      if (axis == static_cast<std::int64_t>(s.size()) - 1) {
        step(n, kernel, ops::SoftmaxCall{}, {x}, {out(0)});
        return;
      }
      if (g_.opset && g_.opset < 13) fail(n, op + " before opset 13 (over the flattened trailing dims) is supported on the last axis only");
      // Over an inner axis: [A, K, B] -> transpose to [A, B, K] -> softmax over K -> transpose back.
      std::uint64_t a = 1, k = s[static_cast<std::size_t>(axis)], b = 1;
      for (std::int64_t d = 0; d < axis; ++d) a *= s[static_cast<std::size_t>(d)];
      for (std::size_t d = static_cast<std::size_t>(axis) + 1; d < s.size(); ++d) b *= s[d];
      const DType dt = t(x).desc.dtype;
      const int tr = temp(n.name + "/transposed", ops::TensorDesc{{a, b, k}, dt});
      const int sm = temp(n.name + "/softmax", ops::TensorDesc{{a, b, k}, dt});
      step(n, "transpose", ops::TransposeCall{{0, 2, 1}}, {x}, {tr});
      p_.steps.back().shapes = {{a, k, b}};
      step(n, kernel, ops::SoftmaxCall{}, {tr}, {sm});
      step(n, "transpose", ops::TransposeCall{{0, 2, 1}}, {sm}, {out(0)});
      return;
    }
    if (op == "Slice") {
      const int x = in(0);
      const ops::Shape s = t(x).desc.shape;
      const auto starts = ints_of(n, 1, "starts"), ends = ints_of(n, 2, "ends");
      std::vector<std::int64_t> axes = ints_of(n, 3, "axes"), steps = ints_of(n, 4, "steps");
      if (axes.empty()) for (std::size_t d = 0; d < starts.size(); ++d) axes.push_back(static_cast<std::int64_t>(d));
      if (steps.empty()) steps.assign(axes.size(), 1);
      if (starts.size() != axes.size() || ends.size() != axes.size() || steps.size() != axes.size())
        fail(n, "starts, ends, axes and steps differ in length");
      std::vector<std::int64_t> b(s.size(), 0), e(s.begin(), s.end()), st(s.size(), 1);
      for (std::size_t k = 0; k < axes.size(); ++k) {
        const auto d = static_cast<std::size_t>(axis_in(n, axes[k], s.size()));
        if (steps[k] <= 0) fail(n, "negative steps are not supported");
        b[d] = starts[k];
        e[d] = std::min<std::int64_t>(ends[k], static_cast<std::int64_t>(s[d]));
        st[d] = steps[k];
      }
      step(n, "slice", ops::SliceCall{b, e, st}, {x}, {out(0)});
      return;
    }
    if (op == "Concat") {
      std::vector<int> ins;
      for (std::size_t k = 0; k < n.inputs.size(); ++k) ins.push_back(in(k));
      const std::int64_t axis = axis_in(n, n.attr_int("axis", 0), t(ins[0]).desc.shape.size());
      step(n, "concat", ops::ConcatCall{axis}, ins, {out(0)});
      return;
    }
    if (op == "Split") {
      const int x = in(0);
      const ops::Shape s = t(x).desc.shape;
      const std::int64_t axis = axis_in(n, n.attr_int("axis", 0), s.size());
      std::vector<std::int64_t> sizes = ints_of(n, 1, "split");
      if (const Attribute* a = n.attr("split")) sizes = a->ints;
      std::vector<int> outs;
      for (std::size_t k = 0; k < n.outputs.size(); ++k) {
        outs.push_back(out(k));
        if (sizes.size() < n.outputs.size()) sizes.push_back(static_cast<std::int64_t>(t(outs.back()).desc.shape[static_cast<std::size_t>(axis)]));
      }
      sizes.resize(n.outputs.size());
      step(n, "split", ops::SplitCall{axis, sizes}, {x}, outs);
      return;
    }
    if (op == "Expand") {
      const int x = in(0), o = out(0);
      step(n, "expand", ops::ExpandCall{t(o).desc.shape}, {x}, {o});
      return;
    }
    if (lower_as_expression(n)) return;
    if (op == "LayerNormalization") {
      // Over the dims from `axis` on: rows of their product, gamma and beta flattened to one row.
      const int x = in(0);
      const ops::Shape s = t(x).desc.shape;
      const std::int64_t axis = axis_in(n, n.attr_int("axis", -1), s.size());
      std::uint64_t rows = 1, h = 1;
      for (std::size_t d = 0; d < s.size(); ++d) (static_cast<std::int64_t>(d) < axis ? rows : h) *= s[d];
      const int gamma = in(1);
      if (ops::elements(t(gamma).desc.shape) != h) fail(n, "the scale has " + std::to_string(ops::elements(t(gamma).desc.shape)) + " elements, the normalised dims " + std::to_string(h));
      int beta = -1;
      if (n.inputs.size() > 2 && n.inputs[2] != kNoValue) {
        beta = in(2);
      } else {
        beta = temp(n.name + "/zero_bias", ops::TensorDesc{ops::Shape{h}, t(x).desc.dtype});
        t(beta).constant.assign(h * hw::isa::dtype_bytes(t(x).desc.dtype), 0);
      }
      // Mean and InvStdDev, when the graph uses them, come from the op's fp32 row statistics.
      std::vector<int> outs{out(0)};
      bool stats = false;
      for (std::size_t k = 1; k < n.outputs.size(); ++k) {
        const ValueId o = n.outputs[k];
        if (o == kNoValue) continue;
        const bool used = !g_.value(o).consumers.empty() || std::find(g_.outputs.begin(), g_.outputs.end(), o) != g_.outputs.end();
        stats = stats || used;
      }
      ops::NormCall call = norm_call(n.attr_float("epsilon", 1e-5f));
      call.stats = stats;
      if (stats) {
        for (std::size_t k = 1; k < 3; ++k) {
          const bool present = k < n.outputs.size() && n.outputs[k] != kNoValue;
          const int o = present ? out(k) : temp(n.name + "/stat" + std::to_string(k), ops::TensorDesc{{rows, 1}, DType::kFp32});
          if (t(o).desc.dtype != DType::kFp32) fail(n, "Mean and InvStdDev are supported as float32 (stash_type 1)");
          outs.push_back(o);
        }
      }
      step(n, "layernorm", call, {x, gamma, beta}, outs);
      p_.steps.back().shapes = {{rows, h}, {h}, {h}};
      return;
    }
    if (op == "Transpose") {
      lower_transpose(n);
      return;
    }
    if (op == "Cast") {
      const int x = in(0), o = out(0);
      if (t(x).desc.dtype == t(o).desc.dtype) {
        view(n, n.outputs[0], x);
        return;
      }
      step(n, "cast", ops::CastCall{t(o).desc.dtype}, {x}, {o});
      return;
    }
    if (op == "ReduceSum" || op == "ReduceMean" || op == "ReduceMax") {
      const int x = in(0);
      std::vector<std::int64_t> axes = op == "ReduceSum" ? ints_of(n, 1, "axes") : std::vector<std::int64_t>{};
      if (const Attribute* a = n.attr("axes")) axes = a->ints;
      if (axes.size() != 1) fail(n, "exactly one reduction axis is supported");
      const std::int64_t axis = axis_in(n, axes[0], t(x).desc.shape.size());
      ops::Shape reduced;
      for (std::size_t i = 0; i < t(x).desc.shape.size(); ++i)
        if (static_cast<std::int64_t>(i) != axis) reduced.push_back(t(x).desc.shape[i]);
      if (reduced.empty()) reduced = {1};
      const int r = temp(n.name + "/reduced", ops::TensorDesc{reduced, t(x).desc.dtype});
      std::string name = op == "ReduceSum" ? "reduce_sum" : op == "ReduceMean" ? "reduce_mean" : "reduce_max";
      step(n, name, ops::ReduceCall{axis}, {x}, {r});
      view(n, n.outputs[0], r);  // keepdims or not: the same bytes
      return;
    }
    if (op == "MatMul" || op == "Gemm" || (n.domain == "npusim" && op == "MatMulBias")) {
      lower_matmul(n);
      return;
    }
    fail(n, "not supported");
  }

  // A permutation as transpose steps the op takes (the last dim stays last, or the last two swap): at most three,
  //   keep-last: [others, p[r-1], r-1] -> swap the last two -> keep-last: p,
  // with `others` the remaining dims in p's order; steps that would not move anything are left out.
  void lower_transpose(const Node& n) {
    const int x = tensor(n.inputs.at(0), "node '" + n.name + "'"), o = tensor(n.outputs.at(0), "node '" + n.name + "'");
    const ops::Shape s = t(x).desc.shape;
    const std::size_t r = s.size();
    std::vector<std::size_t> p;
    if (const Attribute* a = n.attr("perm")) {
      for (auto v : a->ints) p.push_back(static_cast<std::size_t>(axis_in(n, v, r)));
    } else {
      for (std::size_t i = r; i-- > 0;) p.push_back(i);  // ONNX's default reverses the dims
    }
    std::vector<std::size_t> sorted = p;
    std::sort(sorted.begin(), sorted.end());
    for (std::size_t i = 0; i < r; ++i)
      if (sorted[i] != i || p.size() != r) fail(n, "perm is not a permutation of the " + std::to_string(r) + " dims");
    // Permutes `cur` (the current dim order, as input dims) to `want` with one transpose step.
    int at = x;
    std::vector<std::size_t> cur(r);
    for (std::size_t i = 0; i < r; ++i) cur[i] = i;
    auto apply = [&](const std::vector<std::size_t>& want, bool last) {
      if (want == cur) return;
      std::vector<std::size_t> q;
      ops::Shape shape;
      for (std::size_t d : want) {
        q.push_back(static_cast<std::size_t>(std::find(cur.begin(), cur.end(), d) - cur.begin()));
        shape.push_back(s[d]);
      }
      const int dst = last ? o : temp(n.name + "/step" + std::to_string(p_.steps.size()), ops::TensorDesc{shape, t(x).desc.dtype});
      ops::Shape from;
      for (std::size_t d : cur) from.push_back(s[d]);
      step(n, "transpose", ops::TransposeCall{q}, {at}, {dst});
      at = dst;
      cur = want;
    };
    const bool direct = r < 2 || p[r - 1] == r - 1 || (p[r - 1] == r - 2 && p[r - 2] == r - 1);
    if (direct) {
      apply(p, true);
      if (at != o) view(n, n.outputs[0], at);  // the identity permutation
      return;
    }
    std::vector<std::size_t> others;
    for (std::size_t d : p)
      if (d != p[r - 1] && d != r - 1) others.push_back(d);
    std::vector<std::size_t> first = others, second = others;
    first.insert(first.end(), {p[r - 1], r - 1});
    second.insert(second.end(), {r - 1, p[r - 1]});
    apply(first, false);
    apply(second, second == p);
    apply(p, true);
  }

  // `x` broadcast to `shape` by an expand step (itself when it already has that shape).
  int expanded(const Node& n, int x, const ops::Shape& shape) {
    if (t(x).desc.shape == shape) return x;
    const int e = temp(n.name + "/" + t(x).name + "/expanded", ops::TensorDesc{shape, t(x).desc.dtype});
    step(n, "expand", ops::ExpandCall{shape}, {x}, {e});
    return e;
  }

  // A node computed as one fused_elementwise expression over `operands`: a scalar constant becomes a literal, a
  // constant bool (Where's condition) 0/1 in the data type, any other operand an input xK, expanded to the output
  // shape first when it does not repeat over the output's trailing dims (a one-element tensor included: the kernel
  // would cut its tiles to one element). `build` writes the expression from the operands' texts.
  void lower_expression(const Node& n, const std::string& kernel, const std::vector<ValueId>& operands,
                        const std::function<std::string(const std::vector<std::string>&)>& build) {
    const std::string where = "node '" + n.name + "' (" + n.op_type + ")";
    const int o = tensor(n.outputs.at(0), where);
    const ops::Shape shape = t(o).desc.shape;
    const DType dt = t(o).desc.dtype;
    std::vector<int> ins;
    std::vector<std::string> args;
    for (const ValueId v : operands) {
      const Value& val = g_.value(v);
      if (val.constant && val.constant->elements() == 1 && device_dtype(val.type)) {
        args.push_back(num(val.constant->as_doubles()[0]));
        continue;
      }
      int x = -1;
      if (val.constant && !device_dtype(val.type)) {
        x = temp(n.name + "/operand" + std::to_string(args.size()), ops::TensorDesc{shape_of(val, where), dt});
        t(x).constant = convert(*val.constant, dt);
      } else {
        x = tensor(v, where);
        if (t(x).desc.dtype != dt) fail(n, "the inputs differ in dtype");
      }
      ops::Shape xs = t(x).desc.shape;
      while (xs.size() > 1 && xs.front() == 1) xs.erase(xs.begin());
      if (ops::elements(xs) == 1 || xs.size() > shape.size() ||
          !std::equal(xs.begin(), xs.end(), shape.end() - static_cast<std::ptrdiff_t>(xs.size())))
        x = expanded(n, x, shape);
      args.push_back("x" + std::to_string(ins.size()));
      ins.push_back(x);
    }
    if (ins.size() > 8) fail(n, "more than 8 tensor inputs");
    step(n, "fused_elementwise", ops::FusedElementwiseCall{build(args), shape}, ins, {o});
    p_.steps.back().kernel = kernel;
  }

  // Where, the activations of activations.hpp, PRelu, Clip and the variadic Max/Min/Sum/Mean as expressions.
  bool lower_as_expression(const Node& n) {
    const std::string& op = n.op_type;
    auto fold = [](const char* fn, const std::vector<std::string>& a) {
      std::string e = a.at(0);
      for (std::size_t k = 1; k < a.size(); ++k) e = std::string(fn) + "(" + e + "," + a[k] + ")";
      return e;
    };
    if (op == "Where") {
      if (!g_.value(n.inputs.at(0)).constant) fail(n, "the condition must be a constant (bool tensors do not live on the device)");
      lower_expression(n, "Where", n.inputs, [](const auto& a) { return "where(" + a[0] + "," + a[1] + "," + a[2] + ")"; });
    } else if (activation_expr(n, "x")) {
      lower_expression(n, op, {n.inputs.at(0)}, [&](const auto& a) { return *activation_expr(n, a[0]); });
    } else if (op == "PRelu") {
      lower_expression(n, op, {n.inputs.at(0), n.inputs.at(1)}, [](const auto& a) {
        return "add(relu(" + a[0] + "),mul(min(" + a[0] + ",0)," + a[1] + "))";
      });
    } else if (op == "Max" || op == "Min" || op == "Sum" || op == "Mean") {
      for (ValueId v : n.inputs)
        if (v == kNoValue) fail(n, "an input is missing");
      lower_expression(n, op, n.inputs, [&](const auto& a) {
        if (op == "Mean") return "mul(" + fold("add", a) + "," + num(1.0 / static_cast<double>(a.size())) + ")";
        return fold(op == "Max" ? "max" : op == "Min" ? "min" : "add", a);
      });
    } else if (op == "Clip") {  // bounds as inputs 1 and 2 (opset 11 on) or as attributes (before)
      std::vector<ValueId> operands{n.inputs.at(0)};
      std::string lo, hi;
      for (std::size_t k = 1; k < 3 && k < n.inputs.size(); ++k)
        if (n.inputs[k] != kNoValue) operands.push_back(n.inputs[k]);
      if (n.inputs.size() == 1) {
        if (const Attribute* a = n.attr("min")) lo = num(a->f);
        if (const Attribute* a = n.attr("max")) hi = num(a->f);
      }
      const bool has_lo = n.inputs.size() > 1 && n.inputs[1] != kNoValue, has_hi = n.inputs.size() > 2 && n.inputs[2] != kNoValue;
      if (!has_lo && !has_hi && lo.empty() && hi.empty()) {  // no bounds: the input itself, as its ONNX function says
        view(n, n.outputs[0], tensor(n.inputs[0], "node '" + n.name + "' (Clip)"));
        return true;
      }
      lower_expression(n, op, operands, [&](const auto& a) {
        std::size_t k = 1;
        if (has_lo) lo = a[k++];
        if (has_hi) hi = a[k++];
        std::string e = a[0];  // min(max(x, lo), hi): hi wins when lo > hi, as np.clip
        if (!lo.empty()) e = "max(" + e + "," + lo + ")";
        if (!hi.empty()) e = "min(" + e + "," + hi + ")";
        return e;
      });
    } else {
      return false;
    }
    return true;
  }

  // A float32 tensor as fp16 for the Cube: a compile-time conversion for constants, a device cast otherwise.
  int to_half(const Node& n, int x, DType cube, const std::string& what) {
    if (t(x).desc.dtype == cube) return x;
    if (const auto it = halves_.find(x); it != halves_.end()) return it->second;  // e.g. one QKV tensor for Q, K and V
    if (const auto it = widened_.find(x); it != widened_.end() && t(it->second).desc.dtype == cube)
      return it->second;  // x is the exact fp32 widening of a Cube result: that result, with no cast back
    const int h = make_half(n, x, cube, what);
    halves_[x] = h;
    return h;
  }
  int make_half(const Node& n, int x, DType cube, const std::string& what) {
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

  // A Cube result in fp16 `result` cast to the graph's fp32 `o` (nothing when they are the same tensor).
  void widen(const Node& n, int result, int o) {
    if (result == o) return;
    step(n, "cast", ops::CastCall{t(o).desc.dtype}, {result}, {o});
    widened_[o] = result;
  }

  // The fused attention node (fuse_attention): Q, K, V are the buffers the pass found under the layout nodes, read
  // with the per-tensor layouts (strides and offsets) it computed; O is written the same way into its final tensor.
  void lower_attention(const Node& n) {
    const std::string where = "node '" + n.name + "' (FlashAttention)";
    const Attribute* shape = n.attr("shape");
    if (!shape || shape->ints.size() != 6) fail(n, "the 'shape' attribute (B, N, KVN, S, SK, D) is missing");
    int q = tensor(n.inputs.at(0), where), k = tensor(n.inputs.at(1), where), v = tensor(n.inputs.at(2), where);
    const int o = tensor(n.outputs.at(0), where);
    const DType dt = t(q).desc.dtype, cube = dt == DType::kFp32 ? DType::kFp16 : dt;
    ops::FlashAttentionCall call;
    std::uint32_t* dims[] = {&call.B, &call.N, &call.KVN, &call.S, &call.SK, &call.D};
    for (std::size_t i = 0; i < 6; ++i) {
      if (shape->ints[i] <= 0 || shape->ints[i] > (1 << 20)) fail(n, "the 'shape' attribute has " + std::to_string(shape->ints[i]));
      *dims[i] = static_cast<std::uint32_t>(shape->ints[i]);
    }
    call.causal = n.attr_int("causal", 0) != 0;
    call.scale = n.attr_float("scale", 1.0f);
    for (auto [tn, strides] : {std::pair{"q", &call.q}, {"k", &call.k}, {"v", &call.v}, {"o", &call.o}}) {
      const Attribute* l = n.attr(std::string(tn) + "_layout");
      if (!l || l->ints.size() != 4) fail(n, std::string("the '") + tn + "_layout' attribute (b, n, s strides, offset) is missing");
      for (auto v : l->ints)
        if (v < 0) fail(n, std::string("the '") + tn + "_layout' attribute has a negative stride or offset");
      *strides = ops::AttentionStrides{static_cast<std::uint64_t>(l->ints[0]), static_cast<std::uint64_t>(l->ints[1]),
                                       static_cast<std::uint64_t>(l->ints[2]), static_cast<std::uint64_t>(l->ints[3])};
    }
    q = to_half(n, q, cube, "q");
    k = to_half(n, k, cube, "k");
    v = to_half(n, v, cube, "v");
    std::vector<int> ins{q, k, v};
    if (n.inputs.size() > 3 && n.inputs[3] != kNoValue) {
      int m = tensor(n.inputs[3], where);
      if (t(m).desc.dtype != cube) m = to_half(n, m, cube, "mask");
      ins.push_back(m);
      call.mask = true;
      if (const Attribute* ms = n.attr("mask_shape")) {
        if (ms->ints.size() != 3) fail(n, "the 'mask_shape' attribute (batch, head, row dims of the mask) is not three ints");
        std::vector<std::uint32_t> dims3;
        for (auto v : ms->ints) {
          if (v <= 0 || v > (1 << 20)) fail(n, "the 'mask_shape' attribute has " + std::to_string(v));
          dims3.push_back(static_cast<std::uint32_t>(v));
        }
        call.mask_shape = dims3;
      }
    }
    int result = o;
    if (t(o).desc.dtype != cube) result = temp(n.name + "/out_fp16", ops::TensorDesc{t(o).desc.shape, cube});
    step(n, "flash_attention", call, ins, {result});
    widen(n, result, o);
  }

  void lower_matmul(const Node& n) {
    const std::string where = "node '" + n.name + "' (" + n.op_type + ")";
    int a = tensor(n.inputs.at(0), where), b = tensor(n.inputs.at(1), where);
    const int o = tensor(n.outputs.at(0), where);
    const bool gemm = n.op_type == "Gemm", fused = n.op_type == "MatMulBias";
    const bool ta = gemm && n.attr_int("transA", 0), tb = gemm && n.attr_int("transB", 0);
    if (gemm && (n.attr_float("alpha", 1.0f) != 1.0f || n.attr_float("beta", 1.0f) != 1.0f)) fail(n, "alpha and beta must be 1");
    const ops::Shape sa = t(a).desc.shape, sb = t(b).desc.shape;
    ops::MatMulCall call;
    std::uint64_t M = 0, K = 0, N = 0, batch = 1;
    if (sb.size() == 2 && sa.size() >= 2) {  // [..., M, K] x [K, N]: the leading dims fold into M
      K = ta ? sa[0] : sa.back();
      M = ta ? sa[1] : ops::elements(sa) / K;
      N = tb ? sb[0] : sb[1];
      if ((tb ? sb[1] : sb[0]) != K) fail(n, "K differs: " + ops::shape_string(sa) + " x " + ops::shape_string(sb));
    } else if (sa.size() == sb.size() && sa.size() >= 3 && !gemm &&
               std::equal(sa.begin(), sa.end() - 2, sb.begin())) {  // equal leading (batch) dims
      batch = ops::elements(sa) / (sa[sa.size() - 2] * sa.back());
      M = sa[sa.size() - 2];
      K = sa.back();
      N = sb.back();
      if (sb[sb.size() - 2] != K) fail(n, "K differs: " + ops::shape_string(sa) + " x " + ops::shape_string(sb));
    } else {
      fail(n, "shapes " + ops::shape_string(sa) + " x " + ops::shape_string(sb) + " are not supported (2-D weights or equal batch dims)");
    }
    if (fused) {
      static const std::map<std::string, ops::MatMulAct> acts = {
          {"none", ops::MatMulAct::kNone}, {"relu", ops::MatMulAct::kRelu}, {"gelu", ops::MatMulAct::kGelu}, {"gelu_tanh", ops::MatMulAct::kGeluTanh}};
      if (const Attribute* act = n.attr("act")) {
        const auto it = acts.find(act->s);
        if (it == acts.end()) fail(n, "the activation '" + act->s + "' is not one of none, relu, gelu, gelu_tanh");
        call.act = it->second;
      }
    }
    call.trans_a = ta;
    call.trans_b = tb;
    // The matmul op's own input shapes: A as M x K (or K x M), B as given, batched as [B, ...].
    const DType dt = t(a).desc.dtype;
    const DType cube = dt == DType::kFp32 ? DType::kFp16 : dt;
    a = to_half(n, a, cube, "a");
    b = to_half(n, b, cube, "b");
    std::vector<int> ins{a, b};
    if ((gemm || fused) && n.inputs.size() > 2 && n.inputs[2] != kNoValue) {
      int c = tensor(n.inputs[2], where);
      if (ops::elements(t(c).desc.shape) != N) fail(n, "the bias must have N = " + std::to_string(N) + " elements");
      ins.push_back(to_half(n, c, cube, "bias"));
      call.bias = true;
    }
    int result = o;
    if (t(o).desc.dtype != cube) result = temp(n.name + "/out_fp16", ops::TensorDesc{t(o).desc.shape, cube});
    step(n, "matmul", call, ins, {result});
    // The op's own view of its inputs: A as M x K (K x M transposed), B as K x N (N x K), batched as [B, ...].
    std::vector<ops::Shape>& shapes = p_.steps.back().shapes;
    shapes.push_back(batch > 1 ? ops::Shape{batch, M, K} : (ta ? ops::Shape{K, M} : ops::Shape{M, K}));
    shapes.push_back(batch > 1 ? ops::Shape{batch, K, N} : (tb ? ops::Shape{N, K} : ops::Shape{K, N}));
    if (ins.size() > 2) shapes.push_back(ops::Shape{N});
    widen(n, result, o);
  }

  const Graph& g_;
  std::vector<int> map_;
  std::map<int, int> halves_;   // tensor -> its fp16 copy for the Cube
  std::map<int, int> widened_;  // fp32 tensor -> the fp16 Cube result it was cast from (exact)
  Program p_;
};

}  // namespace

Program lower(const Graph& g) { return Lowering(g).run(); }

}  // namespace npusim::stack::graph
