#include "stack/graph/onnx_ops/host_array.hpp"

#include <cmath>
#include <cstring>

namespace npusim::stack::graph::onnx_ops {

bool integral(ElemType t) {
  return t == ElemType::kInt64 || t == ElemType::kInt32 || t == ElemType::kInt16 || t == ElemType::kInt8 ||
         t == ElemType::kUint8 || t == ElemType::kUint32 || t == ElemType::kUint64 || t == ElemType::kBool;
}

std::int64_t to_int(double v) {
  if (!std::isfinite(v) || std::fabs(v) >= 9.2e18) throw NoFold{};
  return static_cast<std::int64_t>(v);
}

HostArray from_tensor(const Tensor& t) {
  HostArray a;
  a.type = t.type;
  a.shape = t.shape;
  if (a.is_int())
    a.i = t.as_ints();
  else
    a.f = t.as_doubles();
  return a;
}

Tensor to_tensor(const HostArray& a) {
  Tensor t;
  t.type = a.type;
  t.shape = a.shape;
  const std::size_t es = elem_bytes(a.type), n = static_cast<std::size_t>(a.size());
  if (es == 0) throw NoFold{};
  t.bytes.resize(n * es);
  for (std::size_t k = 0; k < n; ++k) {
    std::uint8_t* p = t.bytes.data() + k * es;
    switch (a.type) {
      case ElemType::kFloat32:
      case ElemType::kFloat16:
      case ElemType::kBFloat16: hw::isa::store_float(p, *device_dtype(a.type), static_cast<float>(a.f[k])); break;
      case ElemType::kFloat64: std::memcpy(p, &a.f[k], 8); break;
      case ElemType::kInt64:
      case ElemType::kUint64: std::memcpy(p, &a.i[k], 8); break;
      case ElemType::kUint32: {
        const auto v = static_cast<std::uint32_t>(a.i[k]);
        std::memcpy(p, &v, 4);
        break;
      }
      case ElemType::kInt32: {
        const auto v = static_cast<std::int32_t>(a.i[k]);
        std::memcpy(p, &v, 4);
        break;
      }
      case ElemType::kInt16: {
        const auto v = static_cast<std::int16_t>(a.i[k]);
        std::memcpy(p, &v, 2);
        break;
      }
      case ElemType::kInt8:
      case ElemType::kUint8: *p = static_cast<std::uint8_t>(a.i[k]); break;
      case ElemType::kBool: *p = a.i[k] != 0; break;
      case ElemType::kUndefined: break;
    }
  }
  return t;
}

HostArray int_array(std::vector<std::int64_t> shape, std::vector<std::int64_t> v) {
  HostArray a;
  a.type = ElemType::kInt64;
  a.shape = std::move(shape);
  a.i = std::move(v);
  return a;
}

HostArray float_array(std::vector<std::int64_t> shape, std::vector<double> v) {
  HostArray a;
  a.type = ElemType::kFloat32;
  a.shape = std::move(shape);
  a.f = std::move(v);
  return a;
}

std::int64_t count(const std::vector<std::int64_t>& shape) {
  std::int64_t n = 1;
  for (auto d : shape) n *= d;
  return n;
}

HostArray make(ElemType type, std::vector<std::int64_t> shape, const std::function<double(std::int64_t)>& getf,
               const std::function<std::int64_t(std::int64_t)>& geti) {
  HostArray a;
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

HostArray gather_elems(const HostArray& a, std::vector<std::int64_t> shape,
                       const std::function<std::int64_t(std::int64_t)>& src) {
  return make(
      a.type, std::move(shape), [&](std::int64_t k) { return a.f[static_cast<std::size_t>(src(k))]; },
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

std::vector<std::int64_t> strides_of(const std::vector<std::int64_t>& shape) {
  std::vector<std::int64_t> st(shape.size(), 1);
  for (std::size_t k = shape.size(); k-- > 1;) st[k - 1] = st[k] * shape[k];
  return st;
}

}  // namespace npusim::stack::graph::onnx_ops
