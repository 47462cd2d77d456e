// The row ops' definitions: text parameters, typed calls, operands, the plan (tiling and kernel choice) and the CPU
// reference, for each kind of row op (row_kernel.hpp).
#include <cmath>

#include "common/util/error.hpp"
#include "stack/ops/rows/row_ops.hpp"

namespace npusim::stack::ops::rows {

namespace {

using hw::isa::DType;

// v rounded to the element type t (as a store to t and a load back).
float round_to(DType t, float v) {
  std::uint8_t b[4];
  hw::isa::store_float(b, t, v);
  return hw::isa::load_float(b, t);
}

// The call's options, whichever kind of call the op takes.
struct Options {
  double eps = 1e-5;
  bool stats = false, sum = false, bsnd = false;
  std::uint64_t chunk = 0;
};

// One row op: its kind, and whether it is AddLayerNorm (a LayerNorm with a residual input).
struct RowOpDef {
  std::string name;
  RowKind kind;
  bool add;

  Call parse(const Params& p) const {
    if (kind == RowKind::kSoftmax || kind == RowKind::kLogSoftmax) return SoftmaxCall{param_uint(p, "chunk", 0, 16320)};
    if (is_norm(kind)) {
      NormCall c;
      c.eps = param_real(p, "eps", 1e-5, true);
      c.stats = kind == RowKind::kLayerNorm && param_uint(p, "stats", 0, 1);
      c.sum = !add || param_uint(p, "sum", 1, 1);
      c.chunk = param_uint(p, "chunk", 0, 16320);
      return c;
    }
    if (kind == RowKind::kRopeHalf) {
      const auto it = p.find("layout");
      if (it == p.end() || it->second == "bnsd") return RopeCall{RopeLayout::kBnsd};
      if (it->second != "bsnd") throw InputError(name + ": layout='" + it->second + "' is not bnsd or bsnd");
      return RopeCall{RopeLayout::kBsnd};
    }
    return Operands{};
  }

  Options options(const Call& call) const {
    Options o;
    if (kind == RowKind::kSoftmax || kind == RowKind::kLogSoftmax) {
      o.chunk = call_as<SoftmaxCall>(call, name).chunk;
    } else if (is_norm(kind)) {
      const NormCall& c = call_as<NormCall>(call, name);
      if (!std::isfinite(c.eps) || c.eps < 0)
        throw InputError(name + ": eps=" + std::to_string(c.eps) + " is not a non-negative number");
      o.eps = c.eps;
      o.stats = kind == RowKind::kLayerNorm && c.stats;
      o.sum = add && c.sum;
      o.chunk = c.chunk;
    } else if (kind == RowKind::kRopeHalf) {
      o.bsnd = call_as<RopeCall>(call, name).layout == RopeLayout::kBsnd;
    } else {
      call_as<Operands>(call, name);
    }
    return o;
  }

  // x (and the residual), gamma (and beta), or the cos and sin tables (S x D; x is ... x S x D, or ... x S x N x D
  // in BSND, where the N heads of a position share its table row).
  std::vector<TensorDesc> inputs(const Params& p, DType t) const {
    const Shape s = param_shape(p);
    const std::uint64_t h = s.back();
    std::vector<TensorDesc> in{{s, t}};
    if (add) in.push_back({s, t});
    if (is_norm(kind)) in.push_back({Shape{h}, t});
    if (kind == RowKind::kLayerNorm) in.push_back({Shape{h}, t});
    if (is_rope(kind)) {
      const bool bsnd = kind == RowKind::kRopeHalf && std::get<RopeCall>(parse(p)).layout == RopeLayout::kBsnd;
      const std::size_t sd = bsnd ? 3 : 2;  // dims from the end to S
      if (s.size() < sd)
        throw InputError(name + ": shape " + shape_string(s) + " needs at least " +
                         (sd == 2 ? "two dims (... x S x D)" : "three dims (... x S x N x D)"));
      const Shape cs{s[s.size() - sd], h};
      in.push_back({cs, t});
      in.push_back({cs, t});
    }
    return in;
  }

  OpPlan plan(const std::vector<TensorDesc>& in, const Call& call, const config::ChipConfig& chip) const;
  std::vector<HostTensor> reference(const std::vector<TensorDesc>& in, const Call& call,
                                    const std::vector<HostTensor>& v) const;
};

// The kernel for the buffers: inputs (x, residual, parameters) then outputs (out, sum, mean, rstd).
std::function<void()> bind_kernel(RowArgs a, DType t, bool sum, const std::vector<std::uint64_t>& buf) {
  a.x = buf[0];
  std::size_t i = 1;
  if (a.add) a.res = buf[i++];
  if (is_norm(a.kind) || is_rope(a.kind)) a.p1 = buf[i++];
  if (a.kind == RowKind::kLayerNorm || is_rope(a.kind)) a.p2 = buf[i++];
  a.out = buf[i++];
  if (sum) a.sum = buf[i++];
  if (a.stats) {
    a.mean = buf[i++];
    a.rstd = buf[i++];
  }
  if (a.chunk) {
    switch (t) {
      case DType::kFp16: return [a] { long_row_kernel<half>(a); };
      case DType::kBf16: return [a] { long_row_kernel<bfloat16_t>(a); };
      default: return [a] { long_row_kernel<float>(a); };
    }
  }
  switch (t) {
    case DType::kFp16: return [a] { row_kernel<half>(a); };
    case DType::kBf16: return [a] { row_kernel<bfloat16_t>(a); };
    default: return [a] { row_kernel<float>(a); };
  }
}

OpPlan RowOpDef::plan(const std::vector<TensorDesc>& in, const Call& call, const config::ChipConfig& chip) const {
  const Options opt = options(call);
  const Shape& s = in[0].shape;
  const std::uint64_t h = s.back();
  if ((loads_halves(kind) || is_rope(kind)) && h % 2)
    throw InputError(name + ": the last dimension (" + std::to_string(h) + ") must be even");
  if (opt.bsnd && s.size() < 3) throw InputError(name + ": layout=bsnd needs ... x S x N x D");
  RowArgs a;
  a.kind = kind;
  a.rows = elements(s) / h;
  a.h = h;
  a.ho = kind == RowKind::kSwiGlu ? h / 2 : h;
  a.heads = opt.bsnd ? s[s.size() - 2] : 1;
  a.seq = is_rope(kind) ? s[s.size() - (opt.bsnd ? 3 : 2)] : 0;
  a.eps = static_cast<float>(opt.eps);
  a.add = add;
  a.stats = opt.stats;
  const RowTiling t =
      plan_rows({kind, a.rows, h, a.heads, hw::isa::dtype_bytes(in[0].dtype), add, a.stats, opt.chunk}, chip, name);
  a.per_block = t.per_block;
  a.tile = t.tile;
  a.chunk = t.chunk;
  OpPlan plan;
  Shape out = s;
  out.back() = a.ho;
  plan.outputs = {{out, in[0].dtype}};
  if (opt.sum) plan.outputs.push_back({s, in[0].dtype});
  if (a.stats) {
    Shape st(s.begin(), s.end() - 1);
    st.push_back(1);
    plan.outputs.push_back({st, DType::kFp32});
    plan.outputs.push_back({st, DType::kFp32});
  }
  plan.type = KernelType::kVector;
  plan.block_dim = u32(ceil_div(a.rows, a.per_block));
  plan.tiling = {{"rows_per_tile", static_cast<double>(a.tile)}, {"rows_per_block", static_cast<double>(a.per_block)}};
  if (a.chunk) plan.tiling["chunk"] = static_cast<double>(a.chunk);
  const DType dt = in[0].dtype;
  const bool sum = opt.sum;
  plan.kernel = [a, dt, sum](const std::vector<std::uint64_t>& buf) { return bind_kernel(a, dt, sum, buf); };
  return plan;
}

std::vector<HostTensor> RowOpDef::reference(const std::vector<TensorDesc>& in, const Call& call,
                                            const std::vector<HostTensor>& v) const {
  const Options opt = options(call);
  const Shape& s = in[0].shape;
  const std::uint64_t h = s.back(), rows = elements(s) / h, ho = kind == RowKind::kSwiGlu ? h / 2 : h;
  const double eps = static_cast<float>(opt.eps);
  const std::uint64_t seq = is_rope(kind) ? s[s.size() - (opt.bsnd ? 3 : 2)] : 1, nh = opt.bsnd ? s[s.size() - 2] : 1;
  HostTensor out(rows * ho), sums(opt.sum ? rows * h : 0), means(opt.stats ? rows : 0), rstds(opt.stats ? rows : 0);
  std::vector<float> xs(h);
  const std::size_t pi = add ? 2 : 1;  // the first parameter input (gamma, cos)
  for (std::uint64_t r = 0; r < rows; ++r) {
    const float* x = v[0].data() + r * h;
    if (add) {  // the sum, rounded to the op's dtype as the kernel keeps it
      for (std::uint64_t c = 0; c < h; ++c) xs[c] = round_to(in[0].dtype, x[c] + v[1][r * h + c]);
      if (opt.sum) std::copy(xs.begin(), xs.end(), sums.begin() + static_cast<std::ptrdiff_t>(r * h));
      x = xs.data();
    }
    float* y = out.data() + r * ho;
    if (kind == RowKind::kSoftmax || kind == RowKind::kLogSoftmax) {
      softmax_reference(x, y, h, kind == RowKind::kLogSoftmax);
    } else if (is_norm(kind)) {
      const NormStats st =
          norm_reference(x, v[pi].data(), kind == RowKind::kLayerNorm ? v[pi + 1].data() : nullptr, y, h, eps);
      if (opt.stats) {
        means[r] = st.mean;
        rstds[r] = st.rstd;
      }
    } else if (kind == RowKind::kSwiGlu) {
      swiglu_reference(x, y, ho);
    } else {
      const std::uint64_t pos = (r / nh) % seq;
      rope_reference(x, v[1].data() + pos * h, v[2].data() + pos * h, y, h, kind == RowKind::kRopeHalf);
    }
  }
  std::vector<HostTensor> outs{out};
  if (opt.sum) outs.push_back(sums);
  if (opt.stats) {
    outs.push_back(means);
    outs.push_back(rstds);
  }
  return outs;
}

OpDef row_op(const std::string& name, RowKind kind, const std::string& summary) {
  const RowOpDef op{name, kind, name == "add_layernorm"};
  OpDef d;
  d.name = name;
  d.summary = summary;
  d.params = {{"shape", kRequired}};
  if (reduces_rows(kind)) d.params.push_back({"chunk", "0 (chosen by the tiling)"});
  if (is_norm(kind)) d.params.push_back({"eps", "1e-5"});
  if (kind == RowKind::kLayerNorm) d.params.push_back({"stats", "0"});
  if (op.add) d.params.push_back({"sum", "1"});
  if (kind == RowKind::kRopeHalf) d.params.push_back({"layout", "bnsd"});
  d.parse = [op](const Params& p) { return op.parse(p); };
  d.inputs = [op](const Params& p, DType t) { return op.inputs(p, t); };
  d.plan = [op](const std::vector<TensorDesc>& in, const Call& call, const config::ChipConfig& chip) {
    return op.plan(in, call, chip);
  };
  d.reference = [op](const std::vector<TensorDesc>& in, const Call& call, const std::vector<HostTensor>& v) {
    return op.reference(in, call, v);
  };
  if (kind == RowKind::kLayerNorm) {
    // The mean and rstd outputs are fp32, but for 16-bit inputs the row sums come from 128-lane partials rounded
    // to the dtype (RowKernel::norm_stats16): 2^-11 relative per partial, amplified up to 8x in the rstd.
    d.extra_atol = [op](const std::vector<TensorDesc>& in, const Call& call) {
      return op.options(call).stats && hw::isa::dtype_bytes(in[0].dtype) == 2 ? std::ldexp(1.0, -8) : 0.0;
    };
  }
  return d;
}

}  // namespace

std::vector<OpDef> row_ops() {
  return {row_op("softmax", RowKind::kSoftmax, "softmax over the last dimension"),
          row_op("log_softmax", RowKind::kLogSoftmax,
                 "log-softmax over the last dimension: x - max - log(sum(exp(x - max)))"),
          row_op("layernorm", RowKind::kLayerNorm,
                 "LayerNorm over the last dimension: (x - mean) / sqrt(var + eps) * gamma + beta (-p stats=1: also the "
                 "rows' mean and rstd, fp32)"),
          row_op("add_layernorm", RowKind::kLayerNorm,
                 "LayerNorm of x + residual (AddLayerNorm); -p sum=1 (default) also writes the sum"),
          row_op("rmsnorm", RowKind::kRmsNorm, "RMSNorm over the last dimension: x / sqrt(mean(x^2) + eps) * gamma"),
          row_op("swiglu", RowKind::kSwiGlu, "SwiGLU: silu(a) * b with [a, b] the two halves of the last dimension"),
          row_op("rope", RowKind::kRopeHalf,
                 "rotary embedding, half form: x cos + rotate_half(x) sin (x: ... x S x D, or ... x S x N x D with -p "
                 "layout=bsnd; cos, sin: S x D)"),
          row_op("rope_interleaved", RowKind::kRopeInterleaved,
                 "rotary embedding, interleaved pairs (GPT-J form; cos, sin: S x D)")};
}

}  // namespace npusim::stack::ops::rows
