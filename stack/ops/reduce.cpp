// ReduceSum, ReduceMean, ReduceMax along one axis (-p axis=k, default the last), the axis removed from the output.
// The tensor is viewed as [outer, R, inner] around the axis:
// - inner == 1 (the last axis): rows of R; each vector core reduces its rows tile by tile with the row reductions
//   of row_math.hpp and writes one value per row;
// - inner > 1: units of (outer index, chunk of inner) go round-robin to the cores; a unit streams its R rows of the
//   chunk through a double-buffered queue and accumulates them with elementwise Add/Max in fp32.
#include <algorithm>

#include "common/util/error.hpp"
#include "stack/ops/op.hpp"
#include "stack/ops/row_math.hpp"

namespace npusim::stack::ops {

using hw::isa::DType;

namespace {

enum class Red { kSum, kMean, kMax };

struct ReduceArgs {
  Red red = Red::kSum;
  GM_ADDR x = 0, out = 0;
  std::uint64_t outer = 1, r = 1, inner = 1;
  std::uint64_t per_block = 0, tile = 0;  // last axis: rows per core and per tile; else: chunk of inner
  std::uint64_t units = 0;
};

template <class T>
void reduce_last(const ReduceArgs& a) {
  const std::uint64_t first = GetBlockIdx() * a.per_block;
  if (first >= a.outer) return;
  const std::uint64_t count = std::min(a.per_block, a.outer - first), tr = a.tile, len = a.r, es = sizeof(T);
  TPipe pipe;
  TQue<TPosition::VECIN, 2> qin;
  TQue<TPosition::VECOUT, 2> qout;
  TBuf<TPosition::VECCALC> fx, fpart, fv;
  pipe.InitBuffer(qin, 2, tr * ub_row<T>(len) * es);
  pipe.InitBuffer(qout, 2, ceil_to(tr * es, 32));
  pipe.InitBuffer(fx, tr * ceil_to(len, 64) * 4);
  ReduceScratch rs;
  rs.part_stride = ReduceScratch::stride_for(len);
  pipe.InitBuffer(fpart, tr * rs.part_stride * 4);
  rs.part = fpart.Get<float>();
  pipe.InitBuffer(fv, ceil_to(tr, 8) * 4);
  const F32Rows X{fx.Get<float>(), len, ceil_to(len, 64)};
  const LocalTensor<float> v = fv.Get<float>();
  for (std::uint64_t done = 0; done < count;) {
    const std::uint64_t row0 = first + done, nr = std::min(tr, count - done);
    LocalTensor<T> in = qin.AllocTensor<T>();
    copy_rows_in(in, a.x + row0 * len * es, nr, len, len);
    qin.EnQue(in);
    in = qin.DeQue<T>();
    rows_to_f32(X, in, nr);
    qin.FreeTensor(in);
    pad_rows(X, nr, a.red == Red::kMax ? kLowest : 0.0f);
    reduce_rows(a.red == Red::kMax, v, X, nr, rs);
    if (a.red == Red::kMean) Muls(v, v, 1.0f / static_cast<float>(len), nr);
    LocalTensor<T> out = qout.AllocTensor<T>();
    convert(out, v, nr);
    qout.EnQue(out);
    out = qout.DeQue<T>();
    copy_out(a.out + row0 * es, out, nr);
    qout.FreeTensor(out);
    done += nr;
  }
}

template <class T>
void reduce_middle(const ReduceArgs& a) {
  const std::uint64_t es = sizeof(T), chunk = a.tile;
  const std::uint64_t chunks = ceil_div(a.inner, chunk);
  TPipe pipe;
  TQue<TPosition::VECIN, 2> qin;
  TQue<TPosition::VECOUT, 1> qout;
  TBuf<TPosition::VECCALC> facc, fx;
  pipe.InitBuffer(qin, 2, ceil_to(chunk * es, 32));
  pipe.InitBuffer(qout, 1, ceil_to(chunk * es, 32));
  pipe.InitBuffer(facc, chunk * 4);
  pipe.InitBuffer(fx, chunk * 4);
  const LocalTensor<float> acc = facc.Get<float>(), x = fx.Get<float>();
  for (std::uint64_t u = GetBlockIdx(); u < a.units; u += GetBlockNum()) {
    const std::uint64_t o = u / chunks, c0 = (u % chunks) * chunk, len = std::min(chunk, a.inner - c0);
    for (std::uint64_t r = 0; r < a.r; ++r) {
      LocalTensor<T> in = qin.AllocTensor<T>();
      copy_in(in, a.x + ((o * a.r + r) * a.inner + c0) * es, len);
      qin.EnQue(in);
      in = qin.DeQue<T>();
      convert(r == 0 ? acc : x, in, len);
      qin.FreeTensor(in);
      if (r == 0) continue;
      if (a.red == Red::kMax) Max(acc, acc, x, len);
      else Add(acc, acc, x, len);
    }
    if (a.red == Red::kMean) Muls(acc, acc, 1.0f / static_cast<float>(a.r), len);
    LocalTensor<T> out = qout.AllocTensor<T>();
    convert(out, acc, len);
    qout.EnQue(out);
    out = qout.DeQue<T>();
    copy_out(a.out + (o * a.inner + c0) * es, out, len);
    qout.FreeTensor(out);
  }
}

OpDef reduce_op(const std::string& name, Red red) {
  OpDef d;
  d.name = name;
  d.summary = std::string(red == Red::kSum ? "sum" : red == Red::kMean ? "mean" : "max") +
              " along one axis (-p axis=k, default the last; the axis is removed)";
  d.params = {{"shape", kRequired}, {"axis", "-1"}};
  d.inputs = [](const Params& p, DType t) {
    return std::vector<TensorDesc>{{param_shape(p), t}};
  };
  d.parse = [name](const Params& p) -> Call {
    ReduceCall c;
    const auto it = p.find("axis");
    if (it == p.end()) return c;
    std::size_t pos = 0;
    try {
      c.axis = std::stoll(it->second, &pos);
    } catch (const std::exception&) {
      pos = 0;
    }
    if (pos == 0 || pos != it->second.size()) throw InputError(name + ": axis='" + it->second + "' is not an integer");
    return c;
  };
  auto axis_of = [name](const Call& call, const Shape& s) {
    const std::int64_t v = call_as<ReduceCall>(call, name).axis, r = static_cast<std::int64_t>(s.size());
    if (v < -r || v >= r) throw InputError(name + ": axis='" + std::to_string(v) + "' is not an axis of shape " + shape_string(s));
    return static_cast<std::size_t>(v < 0 ? v + r : v);
  };
  d.plan = [red, name, axis_of](const std::vector<TensorDesc>& in, const Call& p, const config::ChipConfig& chip) {
    const Shape& s = in[0].shape;
    const std::size_t axis = axis_of(p, s);
    ReduceArgs a;
    a.red = red;
    for (std::size_t i = 0; i < s.size(); ++i) {
      if (i < axis) a.outer *= s[i];
      else if (i > axis) a.inner *= s[i];
    }
    a.r = s[axis];
    const std::uint64_t es = hw::isa::dtype_bytes(in[0].dtype), ub = chip.buffers.ub.size - 256;
    const std::uint64_t cores = chip.vector_units();
    OpPlan plan;
    Shape out;
    for (std::size_t i = 0; i < s.size(); ++i)
      if (i != axis) out.push_back(s[i]);
    if (out.empty()) out = {1};
    plan.outputs = {{out, in[0].dtype}};
    plan.type = KernelType::kVector;
    const bool last = a.inner == 1;
    if (last) {
      const std::uint64_t per_row = 2 * ceil_to(a.r * es, 32) + ceil_to(a.r, 64) * 4 +
                                    ReduceScratch::stride_for(a.r) * 4 + 4 + 2 * es;
      if (ceil_to(a.r, 64) / 64 > 255 || per_row > ub)
        throw InputError(name + ": a row of " + std::to_string(a.r) + " elements does not fit the UB of chip " + chip.name);
      a.per_block = ceil_div(a.outer, cores);
      a.tile = std::min<std::uint64_t>({255, ub / per_row, a.per_block});
      plan.block_dim = u32(ceil_div(a.outer, a.per_block));
    } else {
      // Chunks: two in and one out buffer of T, two fp32 buffers; whole 32 B blocks of T.
      std::uint64_t chunk = ub / (3 * es + 8) / 64 * 64;
      chunk = std::min<std::uint64_t>(chunk, 255 * 64);
      if (a.outer * ceil_div(a.inner, chunk) < cores)  // too few units: smaller chunks spread over the cores
        chunk = std::max<std::uint64_t>(64, ceil_to(ceil_div(a.inner * a.outer, cores), 64));
      a.tile = std::min(chunk, ceil_to(a.inner, 64));
      a.units = a.outer * ceil_div(a.inner, a.tile);
      plan.block_dim = u32(std::min<std::uint64_t>(a.units, cores));
    }
    plan.tiling = {{"axis", static_cast<double>(axis)}, {"tile", static_cast<double>(a.tile)}, {"last_axis", last ? 1.0 : 0.0}};
    const DType t = in[0].dtype;
    plan.kernel = [a, t, last](const std::vector<std::uint64_t>& buf) -> std::function<void()> {
      ReduceArgs g = a;
      g.x = buf[0];
      g.out = buf[1];
      switch (t) {
        case DType::kFp16: return last ? std::function<void()>([g] { reduce_last<half>(g); }) : [g] { reduce_middle<half>(g); };
        case DType::kBf16: return last ? std::function<void()>([g] { reduce_last<bfloat16_t>(g); }) : [g] { reduce_middle<bfloat16_t>(g); };
        default: return last ? std::function<void()>([g] { reduce_last<float>(g); }) : [g] { reduce_middle<float>(g); };
      }
    };
    return plan;
  };
  if (red == Red::kSum) {
    // A sum of R terms in [-1, 1) accumulated in fp32: a random walk of R roundings of partial sums up to about
    // sqrt(R) in size, bounded here (8x margin) by 8 R 2^-24.
    d.extra_atol = [axis_of](const std::vector<TensorDesc>& in, const Call& p) {
      return 8.0 * static_cast<double>(in[0].shape[axis_of(p, in[0].shape)]) * std::ldexp(1.0, -24);
    };
  }
  d.reference = [red, axis_of](const std::vector<TensorDesc>& in, const Call& p, const std::vector<HostTensor>& v) {
    const Shape& s = in[0].shape;
    const std::size_t axis = axis_of(p, s);
    std::uint64_t outer = 1, inner = 1;
    for (std::size_t i = 0; i < s.size(); ++i) {
      if (i < axis) outer *= s[i];
      else if (i > axis) inner *= s[i];
    }
    const std::uint64_t r = s[axis];
    HostTensor out(outer * inner);
    for (std::uint64_t o = 0; o < outer; ++o) {
      for (std::uint64_t i = 0; i < inner; ++i) {
        double acc = red == Red::kMax ? -INFINITY : 0.0;
        for (std::uint64_t k = 0; k < r; ++k) {
          const double x = v[0][(o * r + k) * inner + i];
          acc = red == Red::kMax ? std::max(acc, x) : acc + x;
        }
        out[o * inner + i] = static_cast<float>(red == Red::kMean ? acc / static_cast<double>(r) : acc);
      }
    }
    return std::vector<HostTensor>{out};
  };
  return d;
}

}  // namespace

std::vector<OpDef> reduce_ops() {
  return {reduce_op("reduce_sum", Red::kSum), reduce_op("reduce_mean", Red::kMean), reduce_op("reduce_max", Red::kMax)};
}

}  // namespace npusim::stack::ops
