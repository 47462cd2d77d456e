// CumSum along one axis (-p axis=k, default the last; -p exclusive=1, -p reverse=1 as ONNX's CumSum). The tensor
// is viewed as [outer, R, inner] around the axis; units of (outer index, chunk of inner) go round-robin to the
// vector cores, and a unit streams its R rows of the chunk through a double-buffered queue, keeping the running sum
// in fp32 and writing it after each row (before it for an exclusive sum). A scan along the last axis (inner = 1)
// would move one element per row: the graph's lowering transposes such a tensor first (docs/graph.md).
#include <algorithm>
#include <array>
#include <cmath>

#include "common/util/error.hpp"
#include "stack/ops/kernel_util.hpp"
#include "stack/ops/op.hpp"

namespace npusim::stack::ops {

using hw::isa::DType;

namespace {

struct ScanArgs {
  GM_ADDR x = 0, out = 0;
  std::uint64_t outer = 1, r = 1, inner = 1;
  std::uint64_t chunk = 0, units = 0;
  bool exclusive = false, reverse = false;
};

template <class T>
void cumsum_kernel(const ScanArgs& a) {
  const std::uint64_t es = sizeof(T), chunks = ceil_div(a.inner, a.chunk);
  TPipe pipe;
  TQue<TPosition::VECIN, 2> qin;
  TQue<TPosition::VECOUT, 2> qout;
  TBuf<TPosition::VECCALC> facc, fx;
  pipe.InitBuffer(qin, 2, ceil_to(a.chunk * es, 32));
  pipe.InitBuffer(qout, 2, ceil_to(a.chunk * es, 32));
  pipe.InitBuffer(facc, a.chunk * 4);
  pipe.InitBuffer(fx, a.chunk * 4);
  const LocalTensor<float> acc = facc.Get<float>(), x = fx.Get<float>();
  for (std::uint64_t u = GetBlockIdx(); u < a.units; u += GetBlockNum()) {
    const std::uint64_t o = u / chunks, c0 = (u % chunks) * a.chunk, len = std::min(a.chunk, a.inner - c0);
    Duplicate(acc, 0.0f, len);
    for (std::uint64_t step = 0; step < a.r; ++step) {
      const std::uint64_t row = a.reverse ? a.r - 1 - step : step;
      const std::uint64_t at = ((o * a.r + row) * a.inner + c0) * es;
      LocalTensor<T> in = qin.AllocTensor<T>();
      copy_in(in, a.x + at, len);
      qin.EnQue(in);
      in = qin.DeQue<T>();
      convert(x, in, len);
      qin.FreeTensor(in);
      if (!a.exclusive) Add(acc, acc, x, len);
      LocalTensor<T> out = qout.AllocTensor<T>();
      convert(out, acc, len);
      qout.EnQue(out);
      if (a.exclusive) Add(acc, acc, x, len);
      out = qout.DeQue<T>();
      copy_out(a.out + at, out, len);
      qout.FreeTensor(out);
    }
  }
}

CumSumCall parse(const Params& p) {
  CumSumCall c;
  if (const auto it = p.find("axis"); it != p.end()) {
    std::size_t pos = 0;
    try {
      c.axis = std::stoll(it->second, &pos);
    } catch (const std::exception&) {
      pos = 0;
    }
    if (pos == 0 || pos != it->second.size()) throw InputError("cumsum: axis='" + it->second + "' is not an integer");
  }
  c.exclusive = param_uint(p, "exclusive", 0, 1) != 0;
  c.reverse = param_uint(p, "reverse", 0, 1) != 0;
  return c;
}

std::size_t axis_of(const Call& call, const Shape& s) {
  const std::int64_t v = call_as<CumSumCall>(call, "cumsum").axis, r = static_cast<std::int64_t>(s.size());
  if (v < -r || v >= r)
    throw InputError("cumsum: axis='" + std::to_string(v) + "' is not an axis of shape " + shape_string(s));
  return static_cast<std::size_t>(v < 0 ? v + r : v);
}

// [outer, R, inner] around the axis.
std::array<std::uint64_t, 3> around(const Shape& s, std::size_t axis) {
  std::array<std::uint64_t, 3> d{1, s[axis], 1};
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (i < axis)
      d[0] *= s[i];
    else if (i > axis)
      d[2] *= s[i];
  }
  return d;
}

OpDef cumsum_op() {
  OpDef d;
  d.name = "cumsum";
  d.summary = "running sum along one axis (-p axis=k, default the last; exclusive=1, reverse=1 as ONNX's CumSum)";
  d.params = {{"shape", kRequired}, {"axis", "-1"}, {"exclusive", "0"}, {"reverse", "0"}};
  d.inputs = [](const Params& p, DType t) { return std::vector<TensorDesc>{{param_shape(p), t}}; };
  d.parse = [](const Params& p) -> Call { return parse(p); };
  d.takes_integers = true;  // int32 (integer data as the graph stores it) sums in fp32: exact up to 2^24
  d.plan = [](const std::vector<TensorDesc>& in, const Call& call, const config::ChipConfig& chip) {
    const Shape& s = in[0].shape;
    const auto [outer, r, inner] = around(s, axis_of(call, s));
    const auto& c = call_as<CumSumCall>(call, "cumsum");
    const DType t = in[0].dtype;
    if (!hw::isa::is_float(t) && t != DType::kInt32)
      throw InputError("cumsum: " + std::string(hw::isa::dtype_name(t)) + " is not fp16, bf16, fp32 or int32");
    ScanArgs a;
    a.outer = outer;
    a.r = r;
    a.inner = inner;
    a.exclusive = c.exclusive;
    a.reverse = c.reverse;
    // Two in and two out buffers of T, two fp32 rows; whole 32 B blocks, at most 255 repeats of 64 lanes.
    const std::uint64_t es = hw::isa::dtype_bytes(t), ub = chip.buffers.ub.size - 256, cores = chip.vector_units();
    std::uint64_t chunk = std::min<std::uint64_t>(ub / (4 * es + 8) / 64 * 64, 255 * 64);
    if (outer * ceil_div(inner, chunk) < cores)  // too few units: smaller chunks spread over the cores
      chunk = std::max<std::uint64_t>(64, ceil_to(ceil_div(inner * outer, cores), 64));
    a.chunk = std::min(chunk, ceil_to(inner, 64));
    a.units = outer * ceil_div(inner, a.chunk);
    OpPlan plan;
    plan.outputs = {{s, t}};
    plan.type = fw::kernel::KernelType::kVector;
    plan.block_dim = u32(std::min<std::uint64_t>(a.units, cores));
    plan.tiling = {{"chunk", static_cast<double>(a.chunk)}, {"units", static_cast<double>(a.units)}};
    plan.flops = static_cast<double>(elements(s));
    plan.kernel = [a, t](const std::vector<std::uint64_t>& buf) -> std::function<void()> {
      ScanArgs g = a;
      g.x = buf[0];
      g.out = buf[1];
      switch (t) {
        case DType::kFp16: return [g] { cumsum_kernel<half>(g); };
        case DType::kBf16: return [g] { cumsum_kernel<bfloat16_t>(g); };
        case DType::kInt32: return [g] { cumsum_kernel<std::int32_t>(g); };
        default: return [g] { cumsum_kernel<float>(g); };
      }
    };
    return plan;
  };
  // A running sum of R terms in [-1, 1) in fp32, bounded as reduce_sum's (8 R 2^-24).
  d.extra_atol = [](const std::vector<TensorDesc>& in, const Call& call) {
    return 8.0 * static_cast<double>(in[0].shape[axis_of(call, in[0].shape)]) * std::ldexp(1.0, -24);
  };
  d.reference = [](const std::vector<TensorDesc>& in, const Call& call, const std::vector<HostTensor>& v) {
    const Shape& s = in[0].shape;
    const auto [outer, r, inner] = around(s, axis_of(call, s));
    const auto& c = call_as<CumSumCall>(call, "cumsum");
    HostTensor out(v[0].size());
    for (std::uint64_t o = 0; o < outer; ++o) {
      for (std::uint64_t i = 0; i < inner; ++i) {
        double acc = 0;
        for (std::uint64_t step = 0; step < r; ++step) {
          const std::uint64_t k = (o * r + (c.reverse ? r - 1 - step : step)) * inner + i;
          if (c.exclusive) out[k] = static_cast<float>(acc);
          acc += v[0][k];
          if (!c.exclusive) out[k] = static_cast<float>(acc);
        }
      }
    }
    return std::vector<HostTensor>{out};
  };
  return d;
}

}  // namespace

std::vector<OpDef> cumsum_ops() {
  return {cumsum_op()};
}

}  // namespace npusim::stack::ops
