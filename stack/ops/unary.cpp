// Elementwise unary ops over a flat range: ReLU, GELU (erf and tanh forms), SiLU, Exp, Log, Sqrt, Abs, Neg,
// Reciprocal, Sigmoid, Tanh, Erf, and Cast between fp16, bf16 and fp32.
// The range is split evenly over the vector cores in whole 32 B blocks; each core streams UB-sized tiles through
// double-buffered queues and computes in fp32 (kernel_util.hpp has the formulas).
#include <algorithm>

#include "common/util/error.hpp"
#include "stack/ops/kernel_util.hpp"
#include "stack/ops/op.hpp"

namespace npusim::stack::ops {

using hw::isa::DType;

namespace {

struct UnaryArgs {
  Activation act = Activation::kNone;  // kNone: a cast
  GM_ADDR x = 0, out = 0;
  std::uint64_t n = 0, per_block = 0, tile = 0;
};

template <class In, class Out>
void unary_kernel(const UnaryArgs& a) {
  const std::uint64_t first = GetBlockIdx() * a.per_block;
  if (first >= a.n) return;
  const std::uint64_t count = std::min(a.per_block, a.n - first), tile = a.tile;
  TPipe pipe;
  TQue<TPosition::VECIN, 2> qin;
  TQue<TPosition::VECOUT, 2> qout;
  TBuf<TPosition::VECCALC> fx, fa, fb, fc;
  pipe.InitBuffer(qin, 2, ceil_to(tile * sizeof(In), 32));
  pipe.InitBuffer(qout, 2, ceil_to(tile * sizeof(Out), 32));
  const bool math = a.act != Activation::kNone;
  if (math) {
    for (auto* b : {&fx, &fa, &fb}) pipe.InitBuffer(*b, tile * 4);
    if (a.act == Activation::kGeluErf || a.act == Activation::kErf) pipe.InitBuffer(fc, tile * 4);
  } else if (!std::is_same_v<In, float> && !std::is_same_v<Out, float>) {
    pipe.InitBuffer(fx, tile * 4);  // fp16 <-> bf16 goes through fp32
  }
  for (std::uint64_t off = 0; off < count; off += tile) {
    const std::uint64_t len = std::min(tile, count - off);
    LocalTensor<In> in = qin.AllocTensor<In>();
    copy_in(in, a.x + (first + off) * sizeof(In), len);
    qin.EnQue(in);
    in = qin.DeQue<In>();
    LocalTensor<Out> out = qout.AllocTensor<Out>();
    if (math) {
      const LocalTensor<float> x = fx.Get<float>();
      convert(x, in, len);
      const bool three = a.act == Activation::kGeluErf || a.act == Activation::kErf;
      activate(a.act, x, fa.Get<float>(), fb.Get<float>(), three ? fc.Get<float>() : x, len);
      convert(out, x, len);
    } else if constexpr (std::is_same_v<In, float> || std::is_same_v<Out, float>) {
      convert(out, in, len);
    } else {
      convert(fx.Get<float>(), in, len);
      convert(out, fx.Get<float>(), len);
    }
    qin.FreeTensor(in);
    qout.EnQue(out);
    out = qout.DeQue<Out>();
    copy_out(a.out + (first + off) * sizeof(Out), out, len);
    qout.FreeTensor(out);
  }
}

template <class In>
std::function<void()> pick_out(const UnaryArgs& a, DType out) {
  switch (out) {
    case DType::kFp16: return [a] { unary_kernel<In, half>(a); };
    case DType::kBf16: return [a] { unary_kernel<In, bfloat16_t>(a); };
    default: return [a] { unary_kernel<In, float>(a); };
  }
}

OpDef unary_op(const std::string& name, Activation act, const std::string& summary) {
  OpDef d;
  d.name = name;
  d.summary = summary;
  d.params = {{"shape", kRequired}};
  if (act == Activation::kNone) d.params.push_back({"to", kRequired});
  d.parse = [act](const Params& p) -> Call {
    if (act != Activation::kNone) return Operands{};
    const auto it = p.find("to");
    if (it == p.end()) throw InputError("cast: parameter 'to' is required (fp16, bf16 or fp32)");
    if (it->second != "fp16" && it->second != "bf16" && it->second != "fp32")
      throw InputError("cast: parameter to='" + it->second + "' is not one of fp16, bf16, fp32");
    return CastCall{parse_dtype(it->second)};
  };
  d.inputs = [](const Params& p, DType t) {
    return std::vector<TensorDesc>{{param_shape(p), t}};
  };
  d.plan = [act, name](const std::vector<TensorDesc>& in, const Call& call, const config::ChipConfig& chip) {
    const DType out_t = act == Activation::kNone ? call_as<CastCall>(call, name).to : (call_as<Operands>(call, name), in[0].dtype);
    UnaryArgs a;
    a.act = act;
    a.n = elements(in[0].shape);
    const std::uint64_t si = hw::isa::dtype_bytes(in[0].dtype), so = hw::isa::dtype_bytes(out_t);
    // Tile: two in and two out buffers, plus the fp32 work buffers of the formula.
    const bool three = act == Activation::kGeluErf || act == Activation::kErf;
    const std::uint64_t work = three ? 4 : act == Activation::kNone ? (si < 4 && so < 4 ? 1 : 0) : 3;
    std::uint64_t tile = (chip.buffers.ub.size - 256) / (2 * si + 2 * so + 4 * work);
    tile = std::min<std::uint64_t>(tile / 64 * 64, 255 * 64);
    const std::uint64_t unit = 32;  // elements per split unit: whole 32 B blocks for every element size
    a.per_block = ceil_div(ceil_div(a.n, unit), chip.vector_units()) * unit;
    a.tile = std::min(tile, a.per_block);
    OpPlan plan;
    plan.outputs = {{in[0].shape, out_t}};
    plan.type = KernelType::kVector;
    plan.block_dim = u32(ceil_div(a.n, a.per_block));
    plan.tiling = {{"tile_elements", static_cast<double>(a.tile)}, {"per_block", static_cast<double>(a.per_block)}};
    const DType in_t = in[0].dtype;
    plan.kernel = [a, in_t, out_t](const std::vector<std::uint64_t>& buf) -> std::function<void()> {
      UnaryArgs g = a;
      g.x = buf[0];
      g.out = buf[1];
      switch (in_t) {
        case DType::kFp16: return pick_out<half>(g, out_t);
        case DType::kBf16: return pick_out<bfloat16_t>(g, out_t);
        default: return pick_out<float>(g, out_t);
      }
    };
    return plan;
  };
  d.reference = [act](const std::vector<TensorDesc>&, const Call&, const std::vector<HostTensor>& v) {
    HostTensor out(v[0].size());
    for (std::size_t i = 0; i < out.size(); ++i) out[i] = activate_ref(act, v[0][i]);
    return std::vector<HostTensor>{out};
  };
  if (act == Activation::kGeluErf || act == Activation::kGeluTanh || act == Activation::kSilu || act == Activation::kSigmoid ||
      act == Activation::kTanh || act == Activation::kErf || act == Activation::kExp)
    d.input_ranges = {{-4.0f, 4.0f}};  // both tails and the curved middle
  if (act == Activation::kLog || act == Activation::kSqrt || act == Activation::kReciprocal)
    d.input_ranges = {{0.25f, 4.0f}};  // inside the domain, away from the pole
  return d;
}

}  // namespace

std::vector<OpDef> unary_ops() {
  return {unary_op("relu", Activation::kRelu, "ReLU: max(x, 0)"),
          unary_op("gelu", Activation::kGeluErf, "GELU, erf form: x Phi(x)"),
          unary_op("gelu_tanh", Activation::kGeluTanh, "GELU, tanh approximation"),
          unary_op("silu", Activation::kSilu, "SiLU: x sigmoid(x)"),
          unary_op("exp", Activation::kExp, "e^x"),
          unary_op("log", Activation::kLog, "natural logarithm"),
          unary_op("sqrt", Activation::kSqrt, "square root"),
          unary_op("abs", Activation::kAbs, "|x|"),
          unary_op("neg", Activation::kNeg, "-x"),
          unary_op("reciprocal", Activation::kReciprocal, "1 / x"),
          unary_op("sigmoid", Activation::kSigmoid, "1 / (1 + e^-x)"),
          unary_op("tanh", Activation::kTanh, "hyperbolic tangent, as 1 - 2 / (e^2x + 1)"),
          unary_op("erf", Activation::kErf, "error function (A&S 7.1.26, |error| <= 1.5e-7)"),
          unary_op("cast", Activation::kNone, "dtype conversion to fp16, bf16 or fp32 (-p to=...), round to nearest even")};
}

}  // namespace npusim::stack::ops
