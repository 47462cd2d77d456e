// Constant folding: a node whose inputs are all constants is evaluated on the host and its outputs become
// constants; Shape and Size fold from static shapes alone. Frameworks export the arithmetic of shapes and masks as
// nodes (Shape -> Gather -> Concat -> Reshape, ConstantOfShape -> Equal -> Where -> Expand, triangular masks), and
// none of it belongs on the device. Nodes left without a use are removed afterwards (dead-code elimination).
// Results above kMaxFoldElements stay nodes (an Expand to a [B, N, S, S] mask would only cost host memory).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>

#include "stack/graph/passes/passes.hpp"

namespace npusim::stack::graph::passes {

namespace {

constexpr std::int64_t kMaxFoldElements = 1 << 24;

bool integral(ElemType t) {
  return t == ElemType::kInt64 || t == ElemType::kInt32 || t == ElemType::kInt16 || t == ElemType::kInt8 ||
         t == ElemType::kUint8 || t == ElemType::kBool;
}

// A host array: integers (and bools) exactly in `i`, floats in `f`.
struct Arr {
  ElemType type = ElemType::kUndefined;
  std::vector<std::int64_t> shape;
  std::vector<std::int64_t> i;
  std::vector<double> f;
  bool is_int() const { return integral(type); }
  std::int64_t size() const { return static_cast<std::int64_t>(is_int() ? i.size() : f.size()); }
  double num(std::int64_t k) const { return is_int() ? static_cast<double>(i[static_cast<std::size_t>(k)]) : f[static_cast<std::size_t>(k)]; }
};

// The failure of one fold: the node stays.
struct NoFold {};

// A double as an int64 (an integral result), or NoFold when no int64 holds it.
std::int64_t to_int(double v) {
  if (!std::isfinite(v) || std::fabs(v) >= 9.2e18) throw NoFold{};
  return static_cast<std::int64_t>(v);
}

Arr from_tensor(const Tensor& t) {
  Arr a;
  a.type = t.type;
  a.shape = t.shape;
  if (a.is_int()) a.i = t.as_ints();
  else a.f = t.as_doubles();
  return a;
}

Tensor to_tensor(const Arr& a) {
  Tensor t;
  t.type = a.type;
  t.shape = a.shape;
  const std::size_t es = elem_bytes(a.type), n = static_cast<std::size_t>(a.size());
  if (es == 0) throw NoFold{};
  t.bytes.resize(n * es);
  for (std::size_t k = 0; k < n; ++k) {
    std::uint8_t* p = t.bytes.data() + k * es;
    switch (a.type) {
      case ElemType::kFloat32: case ElemType::kFloat16: case ElemType::kBFloat16:
        hw::isa::store_float(p, *device_dtype(a.type), static_cast<float>(a.f[k]));
        break;
      case ElemType::kFloat64: std::memcpy(p, &a.f[k], 8); break;
      case ElemType::kInt64: std::memcpy(p, &a.i[k], 8); break;
      case ElemType::kInt32: { const auto v = static_cast<std::int32_t>(a.i[k]); std::memcpy(p, &v, 4); break; }
      case ElemType::kInt16: { const auto v = static_cast<std::int16_t>(a.i[k]); std::memcpy(p, &v, 2); break; }
      case ElemType::kInt8: case ElemType::kUint8: *p = static_cast<std::uint8_t>(a.i[k]); break;
      case ElemType::kBool: *p = a.i[k] != 0; break;
      case ElemType::kUndefined: break;
    }
  }
  return t;
}

std::int64_t count(const std::vector<std::int64_t>& s) {
  std::int64_t n = 1;
  for (auto d : s) n *= d;
  return n;
}

// An array of `type` and `shape` with element k = get(k) (as int or double by the type).
Arr make(ElemType type, std::vector<std::int64_t> shape, const std::function<double(std::int64_t)>& getf,
         const std::function<std::int64_t(std::int64_t)>& geti) {
  Arr a;
  a.type = type;
  a.shape = std::move(shape);
  const std::int64_t n = count(a.shape);
  if (n > kMaxFoldElements) throw NoFold{};
  if (a.is_int()) {
    a.i.resize(static_cast<std::size_t>(n));
    for (std::int64_t k = 0; k < n; ++k) a.i[static_cast<std::size_t>(k)] = geti(k);
  } else {
    a.f.resize(static_cast<std::size_t>(n));
    for (std::int64_t k = 0; k < n; ++k) a.f[static_cast<std::size_t>(k)] = getf(k);
  }
  return a;
}

// A copy of `a` with its elements picked: element k of the result is element src(k) of a.
Arr gather_elems(const Arr& a, std::vector<std::int64_t> shape, const std::function<std::int64_t(std::int64_t)>& src) {
  return make(a.type, std::move(shape), [&](std::int64_t k) { return a.f[static_cast<std::size_t>(src(k))]; },
              [&](std::int64_t k) { return a.i[static_cast<std::size_t>(src(k))]; });
}

std::vector<std::int64_t> broadcast_shape(const std::vector<std::vector<std::int64_t>>& shapes) {
  std::size_t rank = 0;
  for (const auto& s : shapes) rank = std::max(rank, s.size());
  std::vector<std::int64_t> out(rank, 1);
  for (const auto& s : shapes) {
    for (std::size_t k = 0; k < s.size(); ++k) {
      std::int64_t& o = out[rank - s.size() + k];
      if (s[k] == o || s[k] == 1) continue;
      if (o != 1) throw NoFold{};
      o = s[k];
    }
  }
  return out;
}

// The flat index into an array of shape `s` for the flat index k of the broadcast shape `out`.
std::int64_t bcast_index(const std::vector<std::int64_t>& s, const std::vector<std::int64_t>& out, std::int64_t k) {
  std::int64_t idx = 0, stride = 1;
  for (std::size_t d = out.size(); d-- > 0;) {
    const std::int64_t coord = k % out[d];
    k /= out[d];
    const std::size_t sd = d + s.size();
    if (sd < out.size()) continue;  // a missing leading dim
    const std::int64_t size = s[sd - out.size()];
    if (size != 1) idx += coord * stride;
    stride *= size;
  }
  return idx;
}

std::int64_t norm_axis(std::int64_t axis, std::int64_t rank) {
  if (axis < -rank || axis >= rank) throw NoFold{};
  return axis < 0 ? axis + rank : axis;
}

std::vector<std::int64_t> strides_of(const std::vector<std::int64_t>& s) {
  std::vector<std::int64_t> st(s.size(), 1);
  for (std::size_t k = s.size(); k-- > 1;) st[k - 1] = st[k] * s[k];
  return st;
}

class Folder {
 public:
  explicit Folder(const Graph& g) : g_(g) {}

  // The node's outputs, or NoFold.
  std::vector<Arr> eval(const Node& n) {
    const std::string& op = n.op_type;
    if (!n.domain.empty()) throw NoFold{};
    if (op == "Shape" || op == "Size") {
      const Value& x = g_.value(n.inputs.at(0));
      if (!x.shape) throw NoFold{};
      std::vector<std::int64_t> dims;
      for (const Dim& d : *x.shape) {
        if (!d.known()) throw NoFold{};
        dims.push_back(d.value);
      }
      if (op == "Size") return {ints({}, {count(dims)})};
      const auto r = static_cast<std::int64_t>(dims.size());
      auto clampi = [&](std::int64_t v) { return std::clamp(v < 0 ? v + r : v, std::int64_t{0}, r); };
      const std::int64_t b = clampi(n.attr_int("start", 0)), e = clampi(n.attr_int("end", r));
      std::vector<std::int64_t> part(dims.begin() + b, dims.begin() + std::max(b, e));
      return {ints({static_cast<std::int64_t>(part.size())}, part)};
    }
    if (op == "Constant") {
      if (const Attribute* a = n.attr("value")) return {from_tensor(a->t)};
      if (const Attribute* a = n.attr("value_float")) return {floats({}, {a->f})};
      if (const Attribute* a = n.attr("value_floats"))
        return {floats({static_cast<std::int64_t>(a->floats.size())}, std::vector<double>(a->floats.begin(), a->floats.end()))};
      if (const Attribute* a = n.attr("value_int")) return {ints({}, {a->i})};
      if (const Attribute* a = n.attr("value_ints")) return {ints({static_cast<std::int64_t>(a->ints.size())}, a->ints)};
      throw NoFold{};
    }
    // Everything else needs constant inputs.
    std::vector<const Arr*> in;
    for (ValueId v : n.inputs) in.push_back(v == kNoValue ? nullptr : &constant(v));
    auto need = [&](std::size_t k) -> const Arr& {
      if (k >= in.size() || !in[k]) throw NoFold{};
      return *in[k];
    };
    const Arr& x = need(0);
    if (op == "Identity") return {x};
    if (op == "Cast") {
      const Attribute* to = n.attr("to");
      if (!to) throw NoFold{};
      const ElemType t = g_.value(n.outputs[0]).type;
      if (t == ElemType::kUndefined) throw NoFold{};
      // Integers stay exact (int64 through int64, not double); a float that no integer holds is not folded.
      return {make(t, x.shape, [&](std::int64_t k) { return x.num(k); }, [&](std::int64_t k) -> std::int64_t {
        if (x.is_int()) return t == ElemType::kBool ? x.i[static_cast<std::size_t>(k)] != 0 : x.i[static_cast<std::size_t>(k)];
        const double v = x.f[static_cast<std::size_t>(k)];
        if (t == ElemType::kBool) return v != 0;
        return to_int(v);
      })};
    }
    if (op == "Reshape" || op == "Flatten" || op == "Squeeze" || op == "Unsqueeze") {
      Arr out = x;
      out.shape = reshaped(n, x, in);
      if (count(out.shape) != count(x.shape)) throw NoFold{};
      return {out};
    }
    if (op == "ConstantOfShape") {
      const std::vector<std::int64_t> shape = x.i;
      Arr v = floats({}, {0.0});
      v.type = ElemType::kFloat32;
      if (const Attribute* a = n.attr("value")) v = from_tensor(a->t);
      return {make(v.type, shape, [&](std::int64_t) { return v.f.at(0); }, [&](std::int64_t) { return v.i.at(0); })};
    }
    if (op == "Range") {
      const Arr &lim = need(1), &dl = need(2);
      const double s = x.num(0), l = lim.num(0), d = dl.num(0);
      if (d == 0) throw NoFold{};
      const auto len = std::max<std::int64_t>(0, to_int(std::ceil((l - s) / d)));
      return {make(x.type, {len}, [&](std::int64_t k) { return s + static_cast<double>(k) * d; },
                   [&](std::int64_t k) { return to_int(s) + k * to_int(d); })};
    }
    if (op == "Concat") {
      const auto rank = static_cast<std::int64_t>(x.shape.size());
      const std::int64_t axis = norm_axis(n.attr_int("axis", 0), rank);
      std::vector<std::int64_t> shape = x.shape;
      shape[static_cast<std::size_t>(axis)] = 0;
      for (std::size_t k = 0; k < in.size(); ++k) shape[static_cast<std::size_t>(axis)] += need(k).shape.at(static_cast<std::size_t>(axis));
      Arr out = make(x.type, shape, [](std::int64_t) { return 0.0; }, [](std::int64_t) { return std::int64_t{0}; });
      const auto st = strides_of(shape);
      std::int64_t at = 0;
      for (std::size_t k = 0; k < in.size(); ++k) {
        const Arr& p = need(k);
        if (p.shape.size() != shape.size() || p.is_int() != out.is_int()) throw NoFold{};
        const auto ps = strides_of(p.shape);
        for (std::int64_t e = 0; e < p.size(); ++e) {
          std::int64_t rem = e, dst = 0;
          for (std::size_t d = 0; d < shape.size(); ++d) {
            const std::int64_t c = rem / ps[d];
            rem %= ps[d];
            dst += (c + (static_cast<std::int64_t>(d) == axis ? at : 0)) * st[d];
          }
          if (out.is_int()) out.i[static_cast<std::size_t>(dst)] = p.i[static_cast<std::size_t>(e)];
          else out.f[static_cast<std::size_t>(dst)] = p.f[static_cast<std::size_t>(e)];
        }
        at += p.shape[static_cast<std::size_t>(axis)];
      }
      return {out};
    }
    if (op == "Gather") {
      const Arr& idx = need(1);
      const auto rank = static_cast<std::int64_t>(x.shape.size());
      const std::int64_t axis = norm_axis(n.attr_int("axis", 0), rank);
      std::vector<std::int64_t> shape(x.shape.begin(), x.shape.begin() + axis);
      shape.insert(shape.end(), idx.shape.begin(), idx.shape.end());
      shape.insert(shape.end(), x.shape.begin() + axis + 1, x.shape.end());
      std::int64_t inner = 1;
      for (std::int64_t d = axis + 1; d < rank; ++d) inner *= x.shape[static_cast<std::size_t>(d)];
      const std::int64_t dim = x.shape[static_cast<std::size_t>(axis)], ni = idx.size();
      return {gather_elems(x, shape, [&](std::int64_t k) {
        const std::int64_t o = k / (ni * inner), j = (k / inner) % ni, r = k % inner;
        std::int64_t id = idx.i.at(static_cast<std::size_t>(j));
        if (id < 0) id += dim;
        if (id < 0 || id >= dim) throw NoFold{};
        return (o * dim + id) * inner + r;
      })};
    }
    if (op == "Slice") {
      const Arr &st = need(1), &en = need(2);
      const auto rank = static_cast<std::int64_t>(x.shape.size());
      std::vector<std::int64_t> axes, steps;
      if (in.size() > 3 && in[3]) axes = in[3]->i;
      else for (std::int64_t d = 0; d < static_cast<std::int64_t>(st.i.size()); ++d) axes.push_back(d);
      if (in.size() > 4 && in[4]) steps = in[4]->i;
      else steps.assign(axes.size(), 1);
      std::vector<std::int64_t> start(x.shape.size(), 0), step(x.shape.size(), 1), shape = x.shape;
      for (std::size_t k = 0; k < axes.size(); ++k) {
        const auto a = static_cast<std::size_t>(norm_axis(axes[k], rank));
        const std::int64_t dim = x.shape[a], s = steps.at(k);
        if (s == 0) throw NoFold{};
        std::int64_t b = st.i.at(k), e = en.i.at(k);
        if (b < 0) b += dim;
        if (e < 0) e += dim;
        if (s > 0) {
          b = std::clamp<std::int64_t>(b, 0, dim);
          e = std::clamp<std::int64_t>(e, 0, dim);
          shape[a] = e > b ? (e - b + s - 1) / s : 0;
        } else {
          if (dim == 0) throw NoFold{};
          b = std::clamp<std::int64_t>(b, 0, dim - 1);
          e = std::clamp<std::int64_t>(e, -1, dim - 1);
          shape[a] = b > e ? (b - e - s - 1) / -s : 0;
        }
        start[a] = b;
        step[a] = s;
      }
      const auto xs = strides_of(x.shape), os = strides_of(shape);
      return {gather_elems(x, shape, [&](std::int64_t k) {
        std::int64_t src = 0;
        for (std::size_t d = 0; d < shape.size(); ++d) src += (start[d] + (k / os[d]) % shape[d] * step[d]) * xs[d];
        return src;
      })};
    }
    if (op == "Expand") {
      const Arr& s = need(1);
      const auto shape = broadcast_shape({x.shape, s.i});
      return {gather_elems(x, shape, [&](std::int64_t k) { return bcast_index(x.shape, shape, k); })};
    }
    if (op == "Transpose") {
      std::vector<std::int64_t> perm;
      if (const Attribute* a = n.attr("perm")) perm = a->ints;
      else for (std::size_t d = x.shape.size(); d-- > 0;) perm.push_back(static_cast<std::int64_t>(d));
      if (perm.size() != x.shape.size()) throw NoFold{};
      std::vector<std::int64_t> shape;
      for (auto p : perm) shape.push_back(x.shape.at(static_cast<std::size_t>(p)));
      const auto xs = strides_of(x.shape), os = strides_of(shape);
      return {gather_elems(x, shape, [&](std::int64_t k) {
        std::int64_t src = 0;
        for (std::size_t d = 0; d < shape.size(); ++d) src += (k / os[d]) % shape[d] * xs[static_cast<std::size_t>(perm[d])];
        return src;
      })};
    }
    if (op == "Where") {
      const Arr &a = need(1), &b = need(2);
      const auto shape = broadcast_shape({x.shape, a.shape, b.shape});
      auto pick = [&](std::int64_t k) { return x.num(bcast_index(x.shape, shape, k)) != 0; };
      return {make(a.type, shape,
                   [&](std::int64_t k) { return pick(k) ? a.num(bcast_index(a.shape, shape, k)) : b.num(bcast_index(b.shape, shape, k)); },
                   [&](std::int64_t k) {
                     return pick(k) ? a.i[static_cast<std::size_t>(bcast_index(a.shape, shape, k))]
                                    : b.i[static_cast<std::size_t>(bcast_index(b.shape, shape, k))];
                   })};
    }
    static const std::vector<std::string> unary = {"Neg", "Abs", "Sqrt", "Reciprocal", "Exp", "Log", "Floor", "Ceil", "Not"};
    if (std::find(unary.begin(), unary.end(), op) != unary.end()) {
      auto f = [&](double v) {
        if (op == "Neg") return -v;
        if (op == "Abs") return std::fabs(v);
        if (op == "Sqrt") return std::sqrt(v);
        if (op == "Reciprocal") return 1.0 / v;
        if (op == "Exp") return std::exp(v);
        if (op == "Log") return std::log(v);
        if (op == "Floor") return std::floor(v);
        if (op == "Ceil") return std::ceil(v);
        return v == 0 ? 1.0 : 0.0;  // Not
      };
      return {make(x.type, x.shape, [&](std::int64_t k) { return f(x.f[static_cast<std::size_t>(k)]); },
                   [&](std::int64_t k) {
                     const std::int64_t v = x.i[static_cast<std::size_t>(k)];
                     if (op == "Neg") return -v;
                     if (op == "Abs") return v < 0 ? -v : v;
                     if (op == "Not") return std::int64_t{v == 0};
                     if (op == "Floor" || op == "Ceil") return v;
                     throw NoFold{};
                   })};
    }
    static const std::vector<std::string> binary = {"Add", "Sub", "Mul", "Div", "Pow", "Max", "Min", "Equal", "Less",
                                                    "Greater", "LessOrEqual", "GreaterOrEqual", "And", "Or"};
    if (std::find(binary.begin(), binary.end(), op) != binary.end()) {
      if (in.size() != 2) throw NoFold{};  // Max and Min of more than two inputs
      const Arr& y = need(1);
      const auto shape = broadcast_shape({x.shape, y.shape});
      const bool cmp = op == "Equal" || op == "Less" || op == "Greater" || op == "LessOrEqual" || op == "GreaterOrEqual" ||
                       op == "And" || op == "Or";
      const ElemType t = cmp ? ElemType::kBool : x.type;
      auto fd = [&](double a, double b) -> double {
        if (op == "Add") return a + b;
        if (op == "Sub") return a - b;
        if (op == "Mul") return a * b;
        if (op == "Div") return a / b;
        if (op == "Pow") return std::pow(a, b);
        if (op == "Max") return std::max(a, b);
        if (op == "Min") return std::min(a, b);
        if (op == "Equal") return a == b;
        if (op == "Less") return a < b;
        if (op == "Greater") return a > b;
        if (op == "LessOrEqual") return a <= b;
        if (op == "GreaterOrEqual") return a >= b;
        if (op == "And") return a != 0 && b != 0;
        return a != 0 || b != 0;  // Or
      };
      auto fi = [&](std::int64_t a, std::int64_t b) -> std::int64_t {
        if (op == "Add") return a + b;
        if (op == "Sub") return a - b;
        if (op == "Mul") return a * b;
        if (op == "Div") {
          if (b == 0) throw NoFold{};
          return a / b;  // integer division truncates, as ONNX Runtime's
        }
        if (op == "Max") return std::max(a, b);
        if (op == "Min") return std::min(a, b);
        if (op == "Pow") return to_int(std::pow(static_cast<double>(a), static_cast<double>(b)));
        return to_int(fd(static_cast<double>(a), static_cast<double>(b)));
      };
      const bool ints_in = x.is_int() && y.is_int();
      return {make(t, shape,
                   [&](std::int64_t k) { return fd(x.num(bcast_index(x.shape, shape, k)), y.num(bcast_index(y.shape, shape, k))); },
                   [&](std::int64_t k) {
                     const std::int64_t xi = bcast_index(x.shape, shape, k), yi = bcast_index(y.shape, shape, k);
                     if (ints_in) return fi(x.i[static_cast<std::size_t>(xi)], y.i[static_cast<std::size_t>(yi)]);
                     return to_int(fd(x.num(xi), y.num(yi)));
                   })};
    }
    throw NoFold{};
  }

  void remember(ValueId v, Arr a) { cache_[v] = std::move(a); }

 private:
  const Arr& constant(ValueId v) {
    if (const auto it = cache_.find(v); it != cache_.end()) return it->second;
    const Value& val = g_.value(v);
    if (!val.constant || val.constant->elements() > kMaxFoldElements) throw NoFold{};  // weights are not expanded
    return cache_[v] = from_tensor(*val.constant);
  }
  static Arr ints(std::vector<std::int64_t> shape, std::vector<std::int64_t> v) {
    Arr a;
    a.type = ElemType::kInt64;
    a.shape = std::move(shape);
    a.i = std::move(v);
    return a;
  }
  static Arr floats(std::vector<std::int64_t> shape, std::vector<double> v) {
    Arr a;
    a.type = ElemType::kFloat32;
    a.shape = std::move(shape);
    a.f = std::move(v);
    return a;
  }
  // The output shape of Reshape, Flatten, Squeeze and Unsqueeze.
  std::vector<std::int64_t> reshaped(const Node& n, const Arr& x, const std::vector<const Arr*>& in) const {
    const auto rank = static_cast<std::int64_t>(x.shape.size());
    if (n.op_type == "Flatten") {
      const std::int64_t axis = n.attr_int("axis", 1) < 0 ? n.attr_int("axis", 1) + rank : n.attr_int("axis", 1);
      std::int64_t a = 1;
      for (std::int64_t d = 0; d < axis; ++d) a *= x.shape[static_cast<std::size_t>(d)];
      return {a, count(x.shape) / std::max<std::int64_t>(a, 1)};
    }
    if (n.op_type == "Reshape") {
      if (in.size() < 2 || !in[1]) throw NoFold{};
      std::vector<std::int64_t> s = in[1]->i;
      std::int64_t known = 1, infer = -1;
      for (std::size_t d = 0; d < s.size(); ++d) {
        if (s[d] == 0 && !n.attr_int("allowzero", 0)) s[d] = x.shape.at(d);
        if (s[d] == -1) infer = static_cast<std::int64_t>(d);
        else known *= s[d];
      }
      if (infer >= 0) s[static_cast<std::size_t>(infer)] = known ? count(x.shape) / known : 0;
      return s;
    }
    std::vector<std::int64_t> axes;
    if (const Attribute* a = n.attr("axes")) axes = a->ints;
    else if (in.size() > 1 && in[1]) axes = in[1]->i;
    if (n.op_type == "Squeeze") {
      std::vector<std::int64_t> s;
      for (std::int64_t d = 0; d < rank; ++d) {
        const bool listed = std::any_of(axes.begin(), axes.end(), [&](std::int64_t a) { return norm_axis(a, rank) == d; });
        if ((axes.empty() && x.shape[static_cast<std::size_t>(d)] == 1) || listed) continue;
        s.push_back(x.shape[static_cast<std::size_t>(d)]);
      }
      return s;
    }
    const std::int64_t out_rank = rank + static_cast<std::int64_t>(axes.size());  // Unsqueeze
    std::vector<std::int64_t> s;
    std::size_t next = 0;
    for (std::int64_t d = 0; d < out_rank; ++d) {
      const bool listed = std::any_of(axes.begin(), axes.end(), [&](std::int64_t a) { return norm_axis(a, out_rank) == d; });
      s.push_back(listed ? 1 : x.shape.at(next++));
    }
    return s;
  }

  const Graph& g_;
  std::map<ValueId, Arr> cache_;
};

}  // namespace

int fold_constants(Graph& g) {
  int folded = 0;
  Folder folder(g);
  for (NodeId id : g.topo_order()) {
    const Node& n = g.node(id);
    std::vector<Arr> out;
    try {
      out = folder.eval(n);
    } catch (const NoFold&) {
      continue;
    } catch (const std::exception&) {  // a malformed node (an axis out of range...): left for the lowering to report
      continue;
    }
    if (out.size() != n.outputs.size() || std::any_of(out.begin(), out.end(), [](const Arr& a) { return a.size() > kMaxFoldElements; }))
      continue;
    std::vector<Tensor> tensors;
    try {
      for (const Arr& a : out) tensors.push_back(to_tensor(a));
    } catch (const NoFold&) {
      continue;
    }
    const std::vector<ValueId> outs = n.outputs;
    g.remove_node(id);
    for (std::size_t k = 0; k < outs.size(); ++k) {
      Value& v = g.value(outs[k]);
      Dims dims;
      for (auto d : tensors[k].shape) dims.push_back(Dim::of(d));
      v.shape = dims;
      v.type = tensors[k].type;
      v.constant = std::move(tensors[k]);
      folder.remember(outs[k], out[k]);
    }
    ++folded;
  }
  return folded;
}

int remove_dead_nodes(Graph& g) {
  int removed = 0;
  for (bool again = true; again;) {
    again = false;
    std::vector<NodeId> order = g.topo_order();
    for (auto it = order.rbegin(); it != order.rend(); ++it) {
      const Node& n = g.node(*it);
      const bool used = std::any_of(n.outputs.begin(), n.outputs.end(), [&](ValueId v) {
        return v != kNoValue && (!g.value(v).consumers.empty() || std::find(g.outputs.begin(), g.outputs.end(), v) != g.outputs.end());
      });
      if (used) continue;
      g.remove_node(*it);
      ++removed;
      again = true;
    }
  }
  return removed;
}

}  // namespace npusim::stack::graph::passes

namespace npusim::stack::graph::passes {

int remove_identities(Graph& g) {
  int removed = 0;
  for (NodeId id : g.topo_order()) {
    const Node& n = g.node(id);
    if (!n.domain.empty() || n.inputs.empty() || n.outputs.size() != 1 || n.inputs[0] == kNoValue) continue;
    const ValueId in = n.inputs[0], out = n.outputs[0];
    const bool same_cast = n.op_type == "Cast" && g.value(in).type != ElemType::kUndefined && g.value(in).type == g.value(out).type;
    if (n.op_type != "Identity" && !same_cast) continue;
    if (std::find(g.outputs.begin(), g.outputs.end(), out) != g.outputs.end()) continue;
    g.remove_node(id);
    g.replace_uses(out, in);
    ++removed;
  }
  return removed;
}

}  // namespace npusim::stack::graph::passes
