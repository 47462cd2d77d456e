// Cube ops: MatMul, Gemm, npusim.MatMulBias (fuse_matmul_epilogue) and npusim.FlashAttention (fuse_attention).
// float32 operands run on the Cube in fp16, as CANN's default `allow_fp32_to_fp16`: activations cast on the device,
// weights converted at compile time, the result cast back (Lowerer::to_half, widen).
#include <algorithm>
#include <map>

#include "stack/graph/onnx_ops/lowerer.hpp"
#include "stack/graph/onnx_ops/op_table.hpp"

namespace npusim::stack::graph::onnx_ops {

namespace {

using hw::isa::DType;

void lower_matmul(Lowerer& l, const Node& n) {
  int a = l.in(n, 0), b = l.in(n, 1);
  const int o = l.out(n, 0);
  const bool gemm = n.op_type == "Gemm", fused = n.op_type == "MatMulBias";
  const bool ta = gemm && n.attr_int("transA", 0), tb = gemm && n.attr_int("transB", 0);
  const double alpha = gemm ? n.attr_float("alpha", 1.0f) : 1.0, beta = gemm ? n.attr_float("beta", 1.0f) : 1.0;
  const ops::Shape sa = l.t(a).desc.shape, sb = l.t(b).desc.shape;
  ops::MatMulCall call;
  std::uint64_t M = 0, K = 0, N = 0, batch = 1;
  if (sb.size() == 2 && sa.size() >= 2) {  // [..., M, K] x [K, N]: the leading dims fold into M
    K = ta ? sa[0] : sa.back();
    M = ta ? sa[1] : ops::elements(sa) / K;
    N = tb ? sb[0] : sb[1];
    if ((tb ? sb[1] : sb[0]) != K) l.fail(n, "K differs: " + ops::shape_string(sa) + " x " + ops::shape_string(sb));
  } else if (sa.size() == sb.size() && sa.size() >= 3 && !gemm && std::equal(sa.begin(), sa.end() - 2, sb.begin())) {
    batch = ops::elements(sa) / (sa[sa.size() - 2] * sa.back());  // equal leading (batch) dims
    M = sa[sa.size() - 2];
    K = sa.back();
    N = sb.back();
    if (sb[sb.size() - 2] != K) l.fail(n, "K differs: " + ops::shape_string(sa) + " x " + ops::shape_string(sb));
  } else {
    l.fail(n, "shapes " + ops::shape_string(sa) + " x " + ops::shape_string(sb) +
                  " are not supported (2-D weights or equal batch dims)");
  }
  if (fused) {
    static const std::map<std::string, ops::MatMulAct> acts = {{"none", ops::MatMulAct::kNone},
                                                               {"relu", ops::MatMulAct::kRelu},
                                                               {"gelu", ops::MatMulAct::kGelu},
                                                               {"gelu_tanh", ops::MatMulAct::kGeluTanh}};
    if (const Attribute* act = n.attr("act")) {
      const auto it = acts.find(act->s);
      if (it == acts.end()) l.fail(n, "the activation '" + act->s + "' is not one of none, relu, gelu, gelu_tanh");
      call.act = it->second;
    }
  }
  call.trans_a = ta;
  call.trans_b = tb;
  const DType dt = l.t(a).desc.dtype;
  const DType cube = dt == DType::kFp32 ? DType::kFp16 : dt;
  a = l.to_half(n, a, cube, "a");
  b = l.to_half(n, b, cube, "b");
  std::vector<int> ins{a, b};
  const int c = (gemm || fused) && n.inputs.size() > 2 && n.inputs[2] != kNoValue && beta != 0.0 ? l.in(n, 2) : -1;
  ops::Shape cs = c < 0 ? ops::Shape{} : l.t(c).desc.shape;
  while (cs.size() > 1 && cs.front() == 1) cs.erase(cs.begin());
  // A row of N (a bias) goes into the Cube's bias table; alpha, beta and any other C broadcast to M x N (a scalar,
  // a column, a matrix) into one fused expression after the product: alpha * AB + beta * C.
  const bool epilogue = alpha != 1.0 || (c >= 0 && (beta != 1.0 || cs != ops::Shape{N}));
  if (fused && epilogue) l.fail(n, "the bias must have N = " + std::to_string(N) + " elements");
  if (c >= 0 && !epilogue) {
    ins.push_back(l.to_half(n, c, cube, "bias"));
    call.bias = true;
  }
  int result = o;
  if (l.t(o).desc.dtype != cube || epilogue)
    result = l.temp(n.name + "/out_fp16", ops::TensorDesc{l.t(o).desc.shape, cube});
  l.step(n, "matmul", call, ins, {result});
  // The op's own view of its inputs: A as M x K (K x M transposed), B as K x N (N x K), batched as [B, ...].
  std::vector<ops::Shape>& shapes = l.program().steps.back().shapes;
  shapes.push_back(batch > 1 ? ops::Shape{batch, M, K} : (ta ? ops::Shape{K, M} : ops::Shape{M, K}));
  shapes.push_back(batch > 1 ? ops::Shape{batch, K, N} : (tb ? ops::Shape{N, K} : ops::Shape{K, N}));
  if (ins.size() > 2) shapes.push_back(ops::Shape{N});
  if (!epilogue) {
    l.widen(n, result, o);
    return;
  }
  std::string expr = alpha == 1.0 ? "x0" : "mul(x0," + num(alpha) + ")";
  std::vector<int> terms{result};
  if (c >= 0) {
    terms.push_back(l.broadcast_operand(n, c, l.t(o).desc.shape));
    expr = "add(" + expr + "," + (beta == 1.0 ? std::string("x1") : "mul(x1," + num(beta) + ")") + ")";
  }
  const std::optional<DType> to = l.t(o).desc.dtype == cube ? std::nullopt : std::optional<DType>(l.t(o).desc.dtype);
  l.step(n, "fused_elementwise", ops::FusedElementwiseCall{expr, l.t(o).desc.shape, to}, terms, {o});
}

// A positive int attribute of at most 2^20 as a dim of the call.
std::uint32_t dim_attr(const Lowerer& l, const Node& n, std::int64_t v, const char* attr) {
  if (v <= 0 || v > (1 << 20)) l.fail(n, std::string("the '") + attr + "' attribute has " + std::to_string(v));
  return static_cast<std::uint32_t>(v);
}

// Q, K, V are the buffers the pass found under the layout nodes, read with the per-tensor layouts (strides and
// offsets) it computed; O is written the same way into its final tensor.
void lower_attention(Lowerer& l, const Node& n) {
  const Attribute* shape = n.attr("shape");
  if (!shape || shape->ints.size() != 6) l.fail(n, "the 'shape' attribute (B, N, KVN, S, SK, D) is missing");
  int q = l.in(n, 0), k = l.in(n, 1), v = l.in(n, 2);
  const int o = l.out(n, 0);
  const DType dt = l.t(q).desc.dtype, cube = dt == DType::kFp32 ? DType::kFp16 : dt;
  ops::FlashAttentionCall call;
  std::uint32_t* dims[] = {&call.B, &call.N, &call.KVN, &call.S, &call.SK, &call.D};
  for (std::size_t i = 0; i < 6; ++i) *dims[i] = dim_attr(l, n, shape->ints[i], "shape");
  call.causal = n.attr_int("causal", 0) != 0;
  call.scale = n.attr_float("scale", 1.0f);
  for (auto [tn, strides] : {std::pair{"q", &call.q}, {"k", &call.k}, {"v", &call.v}, {"o", &call.o}}) {
    const Attribute* lay = n.attr(std::string(tn) + "_layout");
    if (!lay || lay->ints.size() != 4)
      l.fail(n, std::string("the '") + tn + "_layout' attribute (b, n, s strides, offset) is missing");
    for (auto x : lay->ints)
      if (x < 0) l.fail(n, std::string("the '") + tn + "_layout' attribute has a negative stride or offset");
    *strides =
        ops::AttentionStrides{static_cast<std::uint64_t>(lay->ints[0]), static_cast<std::uint64_t>(lay->ints[1]),
                              static_cast<std::uint64_t>(lay->ints[2]), static_cast<std::uint64_t>(lay->ints[3])};
  }
  q = l.to_half(n, q, cube, "q");
  k = l.to_half(n, k, cube, "k");
  v = l.to_half(n, v, cube, "v");
  std::vector<int> ins{q, k, v};
  if (n.inputs.size() > 3 && n.inputs[3] != kNoValue) {
    int m = l.in(n, 3);
    if (l.t(m).desc.dtype != cube) m = l.to_half(n, m, cube, "mask");
    ins.push_back(m);
    call.mask = true;
    if (const Attribute* ms = n.attr("mask_shape")) {
      if (ms->ints.size() != 3)
        l.fail(n, "the 'mask_shape' attribute (batch, head, row dims of the mask) is not three ints");
      std::vector<std::uint32_t> dims3;
      for (auto x : ms->ints) dims3.push_back(dim_attr(l, n, x, "mask_shape"));
      call.mask_shape = dims3;
    }
  }
  int result = o;
  if (l.t(o).desc.dtype != cube) result = l.temp(n.name + "/out_fp16", ops::TensorDesc{l.t(o).desc.shape, cube});
  l.step(n, "flash_attention", call, ins, {result});
  l.widen(n, result, o);
}

}  // namespace

void add_cube_ops(std::vector<OpInfo>& table) {
  table.push_back(OpInfo::onnx("MatMul", 2, 2)
                      .lowers(lower_matmul,
                              "`matmul` (`[..., M, K] x [K, N]` with the leading dims folded into M, or "
                              "equal leading batch dims)"));
  table.push_back(OpInfo::onnx("Gemm", 2, 3)
                      .reads({"transA", "transB", "alpha", "beta"})
                      .lowers(lower_matmul,
                              "`matmul` with `trans_a`, `trans_b` and a bias row of N in the Cube; other alpha, beta "
                              "and C (a scalar, a column, a matrix) as one `fused_elementwise` expression after it"));
  table.push_back(OpInfo::npusim("MatMulBias", 2, 3)
                      .reads({"act"})
                      .lowers(lower_matmul, "`matmul` with `bias` and `act` (none, relu, gelu, gelu_tanh)"));
  table.push_back(OpInfo::npusim("FlashAttention", 3, 4)
                      .reads({"shape", "causal", "scale", "q_layout", "k_layout", "v_layout", "o_layout", "mask_shape"})
                      .lowers(lower_attention, "`flash_attention` with per-tensor strides and the mask's shape"));
}

}  // namespace npusim::stack::graph::onnx_ops
