// The matmul op (matmul_common.hpp has the shape, tiling and kernels): the text form, the operands, the plan and
// the reference (accumulated in double).
#include <algorithm>

#include "common/util/error.hpp"
#include "stack/ops/matmul/matmul_common.hpp"

namespace npusim::stack::ops {

using hw::isa::DType;
using matmul::matmul_kernel;
using matmul::MatmulArgs;
using matmul::MatmulShape;
using matmul::plan_tiling;

namespace {

MatMulAct parse_act(const std::string& v) {
  if (v == "none") return MatMulAct::kNone;
  if (v == "relu") return MatMulAct::kRelu;
  if (v == "gelu" || v == "gelu_erf") return MatMulAct::kGelu;
  if (v == "gelu_tanh") return MatMulAct::kGeluTanh;
  throw InputError("parameter act='" + v + "' is not one of none, relu, gelu, gelu_tanh");
}

Activation activation_of(MatMulAct a) {
  switch (a) {
    case MatMulAct::kRelu: return Activation::kRelu;
    case MatMulAct::kGelu: return Activation::kGeluErf;
    case MatMulAct::kGeluTanh: return Activation::kGeluTanh;
    default: return Activation::kNone;
  }
}

MatMulCall parse_call(const Params& p) {
  MatMulCall c;
  c.trans_a = param_uint(p, "trans_a", 0, 1);
  c.trans_b = param_uint(p, "trans_b", 0, 1);
  c.bias = param_uint(p, "bias", 0, 1);
  if (const auto it = p.find("act"); it != p.end()) c.act = parse_act(it->second);
  return c;
}

// The operands the text form describes: -p M, N, K (and B for a batch).
MatmulShape parse_matmul(const Params& p) {
  MatmulShape s;
  for (const char* key : {"M", "N", "K"})
    if (!p.count(key))
      throw InputError(std::string("parameter '") + key + "' is required, e.g. -p M=1024 -p N=1024 -p K=1024");
  s.M = param_uint(p, "M", 0, 65535);
  s.N = param_uint(p, "N", 0, 65535);
  s.K = param_uint(p, "K", 0, 65535);
  s.batch = param_uint(p, "B", 1, 1u << 20);
  if (!s.M || !s.N || !s.K || !s.batch) throw InputError("matmul: M, N, K and B must be positive");
  const MatMulCall c = parse_call(p);
  s.trans_a = c.trans_a;
  s.trans_b = c.trans_b;
  s.bias = c.bias;
  s.act = activation_of(c.act);
  return s;
}

// The call's shape from its operands' descriptions and the call's flags.
MatmulShape shape_of(const std::vector<TensorDesc>& in, const MatMulCall& c) {
  MatmulShape s;
  s.trans_a = c.trans_a;
  s.trans_b = c.trans_b;
  s.bias = c.bias;
  s.act = activation_of(c.act);
  if (in.size() != (c.bias ? 3u : 2u))
    throw InputError("matmul: " + std::to_string(c.bias ? 3 : 2) + " operands (a, b" + (c.bias ? ", bias" : "") +
                     ") expected, " + std::to_string(in.size()) + " given");
  const Shape& a = in[0].shape;
  const Shape& b = in[1].shape;
  if (a.size() != b.size() || a.size() < 2 || a.size() > 3)
    throw InputError("matmul: a and b must both be 2-D or both 3-D (batch), got " + shape_string(a) + " and " +
                     shape_string(b));
  s.batch = a.size() == 3 ? u32(a[0]) : 1;
  if (a.size() == 3 && b[0] != a[0])
    throw InputError("matmul: batch sizes differ: " + shape_string(a) + " and " + shape_string(b));
  const std::uint64_t am = a[a.size() - 2], ak = a[a.size() - 1], bk = b[b.size() - 2], bn = b[b.size() - 1];
  s.M = u32(s.trans_a ? ak : am);
  s.K = u32(s.trans_a ? am : ak);
  const std::uint64_t kb = s.trans_b ? bn : bk;
  s.N = u32(s.trans_b ? bk : bn);
  if (kb != s.K)
    throw InputError("matmul: K of a (" + std::to_string(s.K) + ") and b (" + std::to_string(kb) + ") differ");
  if (c.bias && elements(in[2].shape) != s.N)
    throw InputError("matmul: the bias is " + shape_string(in[2].shape) + ", not N = " + std::to_string(s.N) +
                     " elements");
  return s;
}

OpDef matmul_op() {
  OpDef d;
  d.name = "matmul";
  d.summary =
      "C = act(op(A) op(B) + bias), batched with B > 1; fp16/bf16, fp32 accumulation (act: none, relu, gelu, "
      "gelu_tanh)";
  d.params = {{"M", kRequired}, {"N", kRequired}, {"K", kRequired}, {"B", "1"},
              {"trans_a", "0"}, {"trans_b", "0"}, {"bias", "0"},    {"act", "none"}};
  d.parse = [](const Params& p) -> Call { return parse_call(p); };
  d.inputs = [](const Params& p, DType t) {
    if (t == DType::kFp32)
      throw InputError("matmul takes fp16 or bf16 (the Cube's fp32 path is not modelled by this kernel)");
    const MatmulShape s = parse_matmul(p);
    std::vector<TensorDesc> in;
    Shape a = s.trans_a ? Shape{s.K, s.M} : Shape{s.M, s.K};
    Shape b = s.trans_b ? Shape{s.N, s.K} : Shape{s.K, s.N};
    if (s.batch > 1) {
      a.insert(a.begin(), s.batch);
      b.insert(b.begin(), s.batch);
    }
    in.push_back({a, t});
    in.push_back({b, t});
    if (s.bias) in.push_back({Shape{s.N}, t});
    return in;
  };
  d.plan = [](const std::vector<TensorDesc>& in, const Call& call, const config::ChipConfig& chip) {
    const MatmulShape s = shape_of(in, call_as<MatMulCall>(call, "matmul"));
    const std::uint64_t es = hw::isa::dtype_bytes(in[0].dtype);
    OpPlan plan;
    Shape out = s.batch > 1 ? Shape{s.batch, s.M, s.N} : Shape{s.M, s.N};
    plan.outputs = {{out, in[0].dtype}};
    MatmulArgs g;
    g.s = s;
    g.t = plan_tiling(s, es, chip);
    g.split = chip.split();
    plan.type = g.t.vector_epilogue && g.split ? KernelType::kMix : KernelType::kCube;
    plan.block_dim = g.t.block_dim;
    plan.tiling = {{"base_m", g.t.base_m},           {"base_n", g.t.base_n},
                   {"base_k", g.t.base_k},           {"step_k", g.t.step_k},
                   {"l0c_buffers", g.t.l0c_buffers}, {"group_m", g.t.group_m},
                   {"serpentine", g.t.serpentine},   {"tiles", s.batch * g.t.tiles_m * g.t.tiles_n},
                   {"bias_table", g.t.bias_table},   {"vector_epilogue", g.t.vector_epilogue}};
    plan.flops = 2.0 * s.batch * s.M * s.N * s.K;
    const DType t = in[0].dtype;
    plan.kernel = [g, t](const std::vector<std::uint64_t>& buf) -> std::function<void()> {
      MatmulArgs args = g;
      args.a = buf[0];
      args.b = buf[1];
      args.bias = g.s.bias ? buf[2] : 0;
      args.c = buf[g.s.bias ? 3 : 2];
      if (t == DType::kBf16) return [args] { matmul_kernel<bfloat16_t>(args); };
      return [args] { matmul_kernel<half>(args); };
    };
    return plan;
  };
  d.reference = [](const std::vector<TensorDesc>& in, const Call& call, const std::vector<HostTensor>& v) {
    const MatmulShape s = shape_of(in, call_as<MatMulCall>(call, "matmul"));
    HostTensor out(static_cast<std::size_t>(s.batch) * s.M * s.N);
    std::vector<double> row(s.N);
    for (std::uint32_t b = 0; b < s.batch; ++b) {
      const float* A = v[0].data() + static_cast<std::size_t>(b) * s.M * s.K;
      const float* B = v[1].data() + static_cast<std::size_t>(b) * s.K * s.N;
      for (std::uint32_t i = 0; i < s.M; ++i) {
        std::fill(row.begin(), row.end(), 0.0);
        for (std::uint32_t k = 0; k < s.K; ++k) {
          const double a =
              s.trans_a ? A[static_cast<std::size_t>(k) * s.M + i] : A[static_cast<std::size_t>(i) * s.K + k];
          for (std::uint32_t j = 0; j < s.N; ++j)
            row[j] +=
                a * (s.trans_b ? B[static_cast<std::size_t>(j) * s.K + k] : B[static_cast<std::size_t>(k) * s.N + j]);
        }
        for (std::uint32_t j = 0; j < s.N; ++j) {
          const double x = row[j] + (s.bias ? v[2][j] : 0.0);
          out[(static_cast<std::size_t>(b) * s.M + i) * s.N + j] = activate_ref(s.act, static_cast<float>(x));
        }
      }
    }
    return std::vector<HostTensor>{out};
  };
  return d;
}

}  // namespace

std::vector<OpDef> matmul_ops() {
  return {matmul_op()};
}

}  // namespace npusim::stack::ops
