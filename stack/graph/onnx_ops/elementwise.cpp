// Elementwise ops: binary arithmetic (with broadcasting), Pow, the unary functions, the variadic Max/Min/Sum/Mean,
// Where, the comparisons and logic of masks, and IsNaN. On the device: the binary and unary library ops, or
// one fused_elementwise expression (comparisons and logic give bool, stored as int8 0/1).
#include <algorithm>
#include <cmath>
#include <map>

#include "stack/graph/onnx_ops/lowerer.hpp"
#include "stack/graph/onnx_ops/op_table.hpp"

namespace npusim::stack::graph::onnx_ops {

namespace {

using Fd = double (*)(double, double);
using Fi = std::int64_t (*)(std::int64_t, std::int64_t);

// A binary op's fold over broadcast inputs: `fd` on doubles, `fi` on exact integers (none: through fd); comparisons
// and logic (`to_bool`) give bool.
FoldRule binary_fold(Fd fd, Fi fi, bool to_bool) {
  return [fd, fi, to_bool](const FoldArgs& a) -> std::vector<HostArray> {
    if (a.in.size() != 2) throw NoFold{};  // Max and Min of more than two inputs
    const HostArray &x = a.need(0), &y = a.need(1);
    const auto shape = broadcast_shape({x.shape, y.shape});
    const bool ints_in = x.is_int() && y.is_int();
    return {make(
        to_bool ? ElemType::kBool : x.type, shape,
        [&](std::int64_t k) {
          return fd(x.num(bcast_index(x.shape, shape, k)), y.num(bcast_index(y.shape, shape, k)));
        },
        [&](std::int64_t k) {
          const std::int64_t xi = bcast_index(x.shape, shape, k), yi = bcast_index(y.shape, shape, k);
          if (ints_in && fi) return fi(x.i[static_cast<std::size_t>(xi)], y.i[static_cast<std::size_t>(yi)]);
          if (ints_in)
            return to_int(fd(static_cast<double>(x.i[static_cast<std::size_t>(xi)]),
                             static_cast<double>(y.i[static_cast<std::size_t>(yi)])));
          return to_int(fd(x.num(xi), y.num(yi)));
        })};
  };
}

// A unary op's fold: `fd` on doubles, `fi` on integers (none: integers are not folded).
FoldRule unary_fold(double (*fd)(double), std::int64_t (*fi)(std::int64_t)) {
  return [fd, fi](const FoldArgs& a) -> std::vector<HostArray> {
    const HostArray& x = a.need(0);
    return {make(
        x.type, x.shape, [&](std::int64_t k) { return fd(x.f[static_cast<std::size_t>(k)]); },
        [&](std::int64_t k) {
          if (!fi) throw NoFold{};
          return fi(x.i[static_cast<std::size_t>(k)]);
        })};
  };
}

// Integer Add, Sub, Mul, Div: one fused_elementwise expression (computed in fp32, so exact while the values stay
// below 2^24; the conversion to the integer output truncates a quotient toward zero, as ONNX's Div does). uint8,
// int8 and int16 live in int32 on the device: their results wrap into the type's range in the expression, so the
// device holds what the model's type would.
void lower_integer_binary(Lowerer& l, const Node& n) {
  const ElemType type = l.graph().value(n.outputs[0]).type;
  const double span = type == ElemType::kUint8 || type == ElemType::kInt8 ? 256 : type == ElemType::kInt16 ? 65536 : 0;
  const double lo = type == ElemType::kUint8 ? 0 : -span / 2;
  std::string fn = n.op_type;
  std::transform(fn.begin(), fn.end(), fn.begin(), ::tolower);
  l.expression(n, n.op_type, {n.inputs[0], n.inputs[1]}, [&](const auto& a) {
    std::string e = fn + "(" + a[0] + "," + a[1] + ")";
    if (span == 0) return e;
    // e - span * floor((e - lo) / span): the representative in [lo, lo + span)
    return "sub(" + e + ",mul(floor(mul(sub(" + e + "," + num(lo) + ")," + num(1.0 / span) + "))," + num(span) + "))";
  });
}

// Add, Sub, Mul, Div: broadcasting of trailing dims or of a per-row scalar; Add and Mul swap operands; a scalar
// constant becomes a row; Div(1, x) is reciprocal; any other numpy broadcast expands the inputs first. Integers:
// lower_integer_binary.
void lower_binary(Lowerer& l, const Node& n) {
  const std::string& op = n.op_type;
  if (!hw::isa::is_float(l.t(l.out(n, 0)).desc.dtype)) {
    lower_integer_binary(l, n);
    return;
  }
  int a = l.in(n, 0), b = l.in(n, 1);
  const ops::Shape sa = l.t(a).desc.shape, sb = l.t(b).desc.shape;
  auto trailing = [](ops::Shape small, const ops::Shape& big) {
    const bool column = small.size() == big.size() && big.size() >= 2 && small.back() == 1 &&
                        std::equal(small.begin(), small.end() - 1, big.begin());  // a per-row scalar
    while (small.size() > 1 && small.front() == 1) small.erase(small.begin());
    return column || (small.size() <= big.size() &&
                      std::equal(small.begin(), small.end(), big.end() - static_cast<std::ptrdiff_t>(small.size())));
  };
  if (op == "Div" && ops::elements(sa) == 1 && !l.t(a).constant.empty() && ops::elements(sb) > 1) {
    const auto one = l.graph().value(n.inputs[0]).constant->as_doubles();
    if (one.size() == 1 && one[0] == 1.0) {  // 1 / x
      l.step(n, "reciprocal", ops::Operands{}, {b}, {l.out(n, 0)});
      return;
    }
  }
  if (!trailing(sb, sa)) {
    if ((op == "Add" || op == "Mul") && trailing(sa, sb)) {
      std::swap(a, b);
    } else if (ops::elements(sb) == 1 && !l.t(b).constant.empty()) {
      // A scalar constant: widened to a row of the last dim on the host.
      const std::uint64_t h = sa.back(), es = hw::isa::dtype_bytes(l.t(b).desc.dtype);
      const int wide = l.temp(l.t(b).name + "/row", ops::TensorDesc{ops::Shape{h}, l.t(b).desc.dtype});
      for (std::uint64_t i = 0; i < h; ++i)
        l.t(wide).constant.insert(l.t(wide).constant.end(), l.t(b).constant.begin(),
                                  l.t(b).constant.begin() + static_cast<std::ptrdiff_t>(es));
      b = wide;
    } else {
      const ops::Shape o = l.t(l.out(n, 0)).desc.shape;
      a = l.expanded(n, a, o);
      b = l.expanded(n, b, o);
    }
  }
  if (l.t(a).desc.dtype != l.t(b).desc.dtype) l.fail(n, "inputs of different dtypes");
  std::string name = op;
  std::transform(name.begin(), name.end(), name.begin(), ::tolower);
  l.step(n, name, ops::Operands{}, {a, b}, {l.out(n, 0)});
}

// x^y in the fused_elementwise language, for any x and y: exp(y ln|x|), negated for a negative x and an odd
// integer y, NaN for a negative x and a y that is not an integer, 1 for y = 0 (0^y: exp(-inf) = 0 for y > 0, inf
// for y < 0, as C's pow). A |y| of 2^24 or more is a whole even number (fp32 has no fraction there, and floor's cast
// to int32 would saturate). `integer`: where y is whole the result is rounded to the nearest integer (x^y computed
// through exp and ln is off by a few ulps, and the conversion to the integer output truncates 728.99 to 728);
// elsewhere the conversion truncates, as ONNX's reference does.
std::string pow_expression(const std::string& x, const std::string& y, bool integer) {
  const std::string big = "ge(abs(" + y + "),16777216)";
  const std::string whole = "or(eq(floor(" + y + ")," + y + ")," + big + ")";
  const std::string odd = "and(not(" + big + "),ne(sub(" + y + ",mul(floor(mul(" + y + ",0.5)),2)),0))";
  std::string mag = "exp(mul(" + y + ",log(abs(" + x + "))))";
  if (integer) mag = "where(" + whole + ",floor(add(" + mag + ",0.5))," + mag + ")";
  std::string negative = "where(" + whole + ",where(" + odd + ",neg(" + mag + ")," + mag + "),nan)";
  return "where(eq(" + y + ",0),1,where(lt(" + x + ",0)," + negative + "," + mag + "))";
}

// Pow: constant exponents 2 as x * x, 0.5 as sqrt, other small ones as short expressions; any other exponent
// (another constant, a tensor) as pow_expression.
void lower_pow(Lowerer& l, const Node& n) {
  const Value& e = l.graph().value(n.inputs.at(1));
  if (!e.constant || e.constant->elements() != 1) {
    const bool integer = !hw::isa::is_float(l.t(l.out(n, 0)).desc.dtype);
    l.expression(n, "Pow", {n.inputs[0], n.inputs[1]},
                 [integer](const auto& a) { return pow_expression(a[0], a[1], integer); });
    return;
  }
  const double ex = e.constant->as_doubles()[0];
  const int x = l.in(n, 0);
  static const std::map<double, std::string> forms = {{1.0, "x0"},
                                                      {3.0, "mul(mul(x0,x0),x0)"},
                                                      {4.0, "mul(mul(x0,x0),mul(x0,x0))"},
                                                      {-1.0, "reciprocal(x0)"},
                                                      {-2.0, "reciprocal(mul(x0,x0))"},
                                                      {-0.5, "rsqrt(x0)"},
                                                      {1.5, "mul(x0,sqrt(x0))"}};
  if (ex == 2.0)
    l.step(n, "mul", ops::Operands{}, {x, x}, {l.out(n, 0)});
  else if (ex == 0.5)
    l.step(n, "sqrt", ops::Operands{}, {x}, {l.out(n, 0)});
  else if (const auto f = forms.find(ex); f != forms.end())
    l.step(n, "fused_elementwise", ops::FusedElementwiseCall{f->second, l.t(x).desc.shape, std::nullopt}, {x},
           {l.out(n, 0)});
  else
    l.expression(n, "Pow", {n.inputs[0], n.inputs[1]}, [&](const auto& a) {
      return pow_expression(a[0], a[1], !hw::isa::is_float(l.t(l.out(n, 0)).desc.dtype));
    });
}

// Trilu: the upper (j - i >= k) or lower (j - i <= k) triangle of the last two dims, the rest zero.
bool trilu_keeps(bool upper, std::int64_t k, std::int64_t i, std::int64_t j) {
  return upper ? j - i >= k : j - i <= k;
}

std::vector<HostArray> fold_trilu(const FoldArgs& a) {
  const HostArray& x = a.need(0);
  const HostArray* kk = a.optional(1);
  const std::int64_t k = kk && kk->size() > 0 ? kk->i.at(0) : 0;
  const bool upper = a.node.attr_int("upper", 1) != 0;
  if (x.shape.size() < 2) throw NoFold{};
  const std::int64_t rows = x.shape[x.shape.size() - 2], cols = x.shape.back();
  auto keep = [&](std::int64_t e) { return trilu_keeps(upper, k, (e / cols) % rows, e % cols); };
  return {make(
      x.type, x.shape, [&](std::int64_t e) { return keep(e) ? x.f[static_cast<std::size_t>(e)] : 0.0; },
      [&](std::int64_t e) { return keep(e) ? x.i[static_cast<std::size_t>(e)] : 0; })};
}

// On the device: where(mask, x, 0) with the mask a constant [rows, cols] of bools that repeats over the leading dims
// (a select, so inf and NaN outside the triangle become 0 too).
void lower_trilu(Lowerer& l, const Node& n) {
  const int x = l.in(n, 0), o = l.out(n, 0);
  const ops::Shape s = l.t(x).desc.shape;
  if (s.size() < 2) l.fail(n, "the input's rank is below 2");
  const auto kv = l.ints_of(n, 1, "k");
  const std::int64_t k = kv.empty() ? 0 : kv.at(0);
  const bool upper = n.attr_int("upper", 1) != 0;
  const std::uint64_t rows = s[s.size() - 2], cols = s.back();
  const int mask = l.temp(n.name + "/mask", ops::TensorDesc{ops::Shape{rows, cols}, hw::isa::DType::kInt8});
  l.t(mask).constant.resize(rows * cols);
  for (std::uint64_t i = 0; i < rows; ++i)
    for (std::uint64_t j = 0; j < cols; ++j)
      l.t(mask).constant[i * cols + j] =
          trilu_keeps(upper, k, static_cast<std::int64_t>(i), static_cast<std::int64_t>(j)) ? 1 : 0;
  l.step(n, "fused_elementwise", ops::FusedElementwiseCall{"where(x1,x0,0)", s, std::nullopt}, {x, mask}, {o});
  l.program().steps.back().kernel = "Trilu";
}

// The unary library op of the op's lower-case name.
void lower_unary(Lowerer& l, const Node& n) {
  std::string name = n.op_type;
  std::transform(name.begin(), name.end(), name.begin(), ::tolower);
  l.step(n, name, ops::Operands{}, {l.in(n, 0)}, {l.out(n, 0)});
}

// Max, Min, Sum, Mean of any number of inputs as one expression.
void lower_variadic(Lowerer& l, const Node& n) {
  const std::string& op = n.op_type;
  for (ValueId v : n.inputs)
    if (v == kNoValue) l.fail(n, "an input is missing");
  auto chain = [](const char* fn, const std::vector<std::string>& a) {
    std::string e = a.at(0);
    for (std::size_t k = 1; k < a.size(); ++k) {
      std::string next = std::string(fn) + "(";
      next += e;
      next += ",";
      next += a[k];
      e = std::move(next) + ")";
    }
    return e;
  };
  l.expression(n, op, n.inputs, [&](const auto& a) {
    if (op == "Mean") return "mul(" + chain("add", a) + "," + num(1.0 / static_cast<double>(a.size())) + ")";
    return chain(op == "Max" ? "max" : op == "Min" ? "min" : "add", a);
  });
}

std::vector<HostArray> fold_where(const FoldArgs& args) {
  const HostArray &x = args.need(0), &a = args.need(1), &b = args.need(2);
  const auto shape = broadcast_shape({x.shape, a.shape, b.shape});
  auto pick = [&](std::int64_t k) { return x.num(bcast_index(x.shape, shape, k)) != 0; };
  return {make(
      a.type, shape,
      [&](std::int64_t k) {
        return pick(k) ? a.num(bcast_index(a.shape, shape, k)) : b.num(bcast_index(b.shape, shape, k));
      },
      [&](std::int64_t k) {
        return pick(k) ? a.i[static_cast<std::size_t>(bcast_index(a.shape, shape, k))]
                       : b.i[static_cast<std::size_t>(bcast_index(b.shape, shape, k))];
      })};
}

void lower_where(Lowerer& l, const Node& n) {
  l.expression(n, "Where", n.inputs, [](const auto& a) { return "where(" + a[0] + "," + a[1] + "," + a[2] + ")"; });
}

// A comparison, logic op or test as the fused_elementwise function of the same meaning.
LowerRule lower_as(const std::string& fn) {
  return [fn](Lowerer& l, const Node& n) {
    l.expression(n, n.op_type, n.inputs, [&](const std::vector<std::string>& a) {
      std::string e = fn + "(" + a.at(0);
      for (std::size_t i = 1; i < a.size(); ++i) e += "," + a[i];
      return e + ")";
    });
  };
}

std::int64_t int_pow(std::int64_t a, std::int64_t b) {
  return to_int(std::pow(static_cast<double>(a), static_cast<double>(b)));
}

// Integer arithmetic in two's complement, wrapping as numpy's int64 does (INT64_MAX + 1 is INT64_MIN): C++'s
// signed overflow is undefined, and INT64_MIN / -1 traps (SIGFPE, issue 23).
std::int64_t wrap(std::uint64_t v) {
  return static_cast<std::int64_t>(v);
}
std::int64_t int_add(std::int64_t a, std::int64_t b) {
  return wrap(static_cast<std::uint64_t>(a) + static_cast<std::uint64_t>(b));
}
std::int64_t int_sub(std::int64_t a, std::int64_t b) {
  return wrap(static_cast<std::uint64_t>(a) - static_cast<std::uint64_t>(b));
}
std::int64_t int_mul(std::int64_t a, std::int64_t b) {
  return wrap(static_cast<std::uint64_t>(a) * static_cast<std::uint64_t>(b));
}
std::int64_t int_div(std::int64_t a, std::int64_t b) {
  if (b == 0) throw NoFold{};  // left to run, where the device gives inf's integer conversion
  if (b == -1) return int_sub(0, a);
  return a / b;  // integer division truncates, as ONNX Runtime's
}
// Mod: fmod = 0 takes the divisor's sign (Python's %, integers only), fmod = 1 the dividend's (C's fmod).
std::int64_t int_mod(std::int64_t a, std::int64_t b) {
  if (b == 0) throw NoFold{};
  if (b == -1) return 0;  // INT64_MIN % -1 overflows in C++
  const std::int64_t r = a % b;
  return r != 0 && ((r < 0) != (b < 0)) ? r + b : r;
}
std::int64_t int_fmod(std::int64_t a, std::int64_t b) {
  if (b == 0) throw NoFold{};
  return b == -1 ? 0 : a % b;
}
double c_fmod(double a, double b) {
  return std::fmod(a, b);
}

}  // namespace

void add_elementwise(std::vector<OpInfo>& table) {
  const std::string binary_text =
      "`add`, `sub`, `mul`, `div`, broadcasting trailing dims or a per-row scalar (Add and Mul swap operands; a scalar "
      "constant becomes a row; `Div(1, x)` is `reciprocal`; any other numpy broadcast expands the inputs first); "
      "integers as one `fused_elementwise` expression (exact below 2^24; uint8, int8, int16 wrap)";
  auto binary = [&](const char* type, const char* fn, Fd fd, Fi fi) {
    table.push_back(OpInfo::onnx(type, 2, 2)
                        .in_expressions_as(fn)
                        .folds(binary_fold(fd, fi, false))
                        .lowers(lower_binary, binary_text));
  };
  binary(
      "Add", "add", [](double a, double b) { return a + b; }, int_add);
  binary(
      "Sub", "sub", [](double a, double b) { return a - b; }, int_sub);
  binary(
      "Mul", "mul", [](double a, double b) { return a * b; }, int_mul);
  binary(
      "Div", "div", [](double a, double b) { return a / b; }, int_div);
  table.push_back(OpInfo::onnx("Pow", 2, 2)
                      .in_expressions_as("pow")
                      .folds(binary_fold([](double a, double b) { return std::pow(a, b); }, int_pow, false))
                      .lowers(lower_pow,
                              "constant exponents: 2 as `mul(x, x)`, 0.5 as `sqrt`; 3, 4, 1.5, 1, -0.5, -1, "
                              "-2 as one `fused_elementwise` expression; any other exponent, a tensor too, as "
                              "`exp(y log(abs(x)))` with the sign and the special cases of C's pow (rounded for "
                              "integers)"));
  // Host only: the exporters' shape arithmetic (TorchScript's head split) computes indices with Mod.
  // uint64 values past 2^63 are held as negative int64s here: not folded. Floats need fmod = 1 (ONNX): with 0 the
  // node is left, and refused as not run on the device.
  table.push_back(OpInfo::onnx("Mod", 2, 2).reads({"fmod"}).folds([](const FoldArgs& a) {
    const HostArray &x = a.need(0), &y = a.need(1);
    if (x.type == ElemType::kUint64 || y.type == ElemType::kUint64) throw NoFold{};
    const bool fmod = a.node.attr_int("fmod", 0) != 0;
    if (!fmod && !(x.is_int() && y.is_int())) throw NoFold{};
    // fmod = 0 reaches here with integers only, which take int_mod; c_fmod is the float path of both.
    return binary_fold(c_fmod, fmod ? int_fmod : int_mod, false)(a);
  }));
  table.push_back(OpInfo::onnx("Trilu", 1, 2)
                      .reads({"upper"})
                      .needs_values_of({1})
                      .folds(fold_trilu)
                      .lowers(lower_trilu, "`fused_elementwise` `where(mask, x, 0)` with a constant triangle mask"));

  auto variadic = [&](const char* type, const char* fn, FoldRule fold) {
    OpInfo op = OpInfo::onnx(type, 1, kVariadic)
                    .in_expressions_as(fn)
                    .lowers(lower_variadic, "one `fused_elementwise` expression over any number of inputs");
    if (fold) op.folds(std::move(fold));
    table.push_back(std::move(op));
  };
  variadic("Max", "max",
           binary_fold([](double a, double b) { return std::max(a, b); },
                       [](std::int64_t a, std::int64_t b) { return std::max(a, b); }, false));
  variadic("Min", "min",
           binary_fold([](double a, double b) { return std::min(a, b); },
                       [](std::int64_t a, std::int64_t b) { return std::min(a, b); }, false));
  variadic("Sum", "", nullptr);
  variadic("Mean", "", nullptr);

  // Unary: Neg..Log fold too, Relu..Erf do not; Floor and Ceil are host only (Not and IsNaN: with the logic below).
  auto unary = [&](const char* type, const char* fn, FoldRule fold) {
    OpInfo op = OpInfo::onnx(type, 1, 1).in_expressions_as(fn);
    if (fold) op.folds(std::move(fold));
    if (*fn) op.lowers(lower_unary, "the unary op of the same name (`relu`, `exp`...)");
    table.push_back(std::move(op));
  };
  unary("Neg", "neg", unary_fold([](double v) { return -v; }, [](std::int64_t v) { return int_sub(0, v); }));
  unary("Abs", "abs",
        unary_fold([](double v) { return std::fabs(v); }, [](std::int64_t v) { return v < 0 ? int_sub(0, v) : v; }));
  unary("Sqrt", "sqrt", unary_fold([](double v) { return std::sqrt(v); }, nullptr));
  unary("Reciprocal", "reciprocal", unary_fold([](double v) { return 1.0 / v; }, nullptr));
  unary("Exp", "exp", unary_fold([](double v) { return std::exp(v); }, nullptr));
  unary("Log", "log", unary_fold([](double v) { return std::log(v); }, nullptr));
  unary("Relu", "relu", nullptr);
  unary("Sigmoid", "sigmoid", nullptr);
  unary("Tanh", "tanh", nullptr);
  unary("Erf", "erf", nullptr);
  unary("Floor", "", unary_fold([](double v) { return std::floor(v); }, [](std::int64_t v) { return v; }));
  unary("Ceil", "", unary_fold([](double v) { return std::ceil(v); }, [](std::int64_t v) { return v; }));
  const std::string logic_text = "a `fused_elementwise` expression (`eq`, `lt`, `and`, `isnan`...) giving bool";
  table.push_back(OpInfo::onnx("Not", 1, 1)
                      .folds(unary_fold([](double v) { return v == 0 ? 1.0 : 0.0; },
                                        [](std::int64_t v) { return std::int64_t{v == 0}; }))
                      .lowers(lower_as("not"), logic_text));
  table.push_back(OpInfo::onnx("IsNaN", 1, 1)
                      .folds(unary_fold([](double v) -> double { return std::isnan(v); }, nullptr))
                      .lowers(lower_as("isnan"), logic_text));

  // Comparisons and logic (bool results): folded on the host, run as expressions otherwise (a mask from an input).
  auto logic = [&](const char* type, const char* fn, Fd fd) {
    table.push_back(OpInfo::onnx(type, 2, 2).folds(binary_fold(fd, nullptr, true)).lowers(lower_as(fn), logic_text));
  };
  logic("Equal", "eq", [](double a, double b) -> double { return a == b; });
  logic("Less", "lt", [](double a, double b) -> double { return a < b; });
  logic("Greater", "gt", [](double a, double b) -> double { return a > b; });
  logic("LessOrEqual", "le", [](double a, double b) -> double { return a <= b; });
  logic("GreaterOrEqual", "ge", [](double a, double b) -> double { return a >= b; });
  logic("And", "and", [](double a, double b) -> double { return a != 0 && b != 0; });
  logic("Or", "or", [](double a, double b) -> double { return a != 0 || b != 0; });
  logic("Xor", "xor", [](double a, double b) -> double { return (a != 0) != (b != 0); });

  table.push_back(OpInfo::onnx("Where", 3, 3)
                      .in_expressions_as("where")
                      .folds(fold_where)
                      .lowers(lower_where, "`fused_elementwise` `where(...)` (the bool condition read as int8)"));
}

}  // namespace npusim::stack::graph::onnx_ops
