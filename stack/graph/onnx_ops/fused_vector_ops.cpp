// The npusim-domain Vector ops the fusion passes make: RMSNormalization, Gelu, RoPE, AddLayerNorm and
// FusedElementwise (npusim.MatMulBias and npusim.FlashAttention are in cube_ops.cpp).
#include "stack/graph/onnx_ops/lowerer.hpp"
#include "stack/graph/onnx_ops/op_table.hpp"

namespace npusim::stack::graph::onnx_ops {

namespace {

void lower_rmsnorm(Lowerer& l, const Node& n) {
  const int x = l.in(n, 0);
  ops::NormCall call;
  call.eps = n.attr_float("epsilon", 1e-6f);
  l.step(n, "rmsnorm", call, {x, l.in(n, 1)}, {l.out(n, 0)});
}

void lower_gelu(Lowerer& l, const Node& n) {
  const int x = l.in(n, 0);
  const Attribute* approx = n.attr("approximate");
  l.step(n, approx && approx->s == "tanh" ? "gelu_tanh" : "gelu", ops::Operands{}, {x}, {l.out(n, 0)});
}

// The cos and sin tables are [S, D]: the sequence dim is third from the end in BSND, second in BNSD.
void lower_rope(Lowerer& l, const Node& n) {
  const int x = l.in(n, 0), c = l.in(n, 1), sn = l.in(n, 2);
  const ops::Shape s = l.t(x).desc.shape;
  const Attribute* layout = n.attr("layout");
  const bool bsnd = layout && layout->s == "bsnd";
  if (s.size() < (bsnd ? 3u : 2u)) l.fail(n, "the input " + ops::shape_string(s) + " has too few dims for the layout");
  const ops::Shape table{s[s.size() - (bsnd ? 3 : 2)], s.back()};
  l.step(n, "rope", ops::RopeCall{bsnd ? ops::RopeLayout::kBsnd : ops::RopeLayout::kBnsd}, {x, c, sn}, {l.out(n, 0)});
  l.program().steps.back().shapes = {s, table, table};
}

// The sum a + b as a second output when the graph uses it; no beta: zeros.
void lower_add_layernorm(Lowerer& l, const Node& n) {
  const int a = l.in(n, 0), b = l.in(n, 1);
  const ops::Shape s = l.t(a).desc.shape;
  const std::uint64_t h = s.back(), rows = ops::elements(s) / h;
  const int gamma = l.in(n, 2);
  const int beta = l.bias_or_zeros(n, 3, h, l.t(a).desc.dtype);
  std::vector<int> outs{l.out(n, 0)};
  const bool sum = n.outputs.size() > 1 && n.outputs[1] != kNoValue;
  if (sum) outs.push_back(l.out(n, 1));
  ops::NormCall call;
  call.eps = n.attr_float("epsilon", 1e-5f);
  call.sum = sum;
  l.step(n, "add_layernorm", call, {a, b, gamma, beta}, outs);
  l.program().steps.back().shapes = {{rows, h}, {rows, h}, {h}, {h}};
}

// A Where's bool condition (a constant) comes in as 0/1 in the data type.
void lower_fused_elementwise(Lowerer& l, const Node& n) {
  const int o = l.out(n, 0);
  const Attribute* expr = n.attr("expr");
  if (!expr) l.fail(n, "the 'expr' attribute is missing");
  std::vector<int> ins;
  for (std::size_t k = 0; k < n.inputs.size(); ++k) {
    const Value& v = l.graph().value(n.inputs[k]);
    int x = -1;
    if (v.constant && !device_dtype(v.type)) {
      x = l.temp(n.name + "/x" + std::to_string(k),
                 ops::TensorDesc{l.shape_of(v, "node '" + n.name + "'"), l.t(o).desc.dtype});
      l.t(x).constant = Lowerer::convert(*v.constant, l.t(o).desc.dtype);
    } else {
      x = l.in(n, k);
    }
    ins.push_back(x);
  }
  l.step(n, "fused_elementwise", ops::FusedElementwiseCall{expr->s, l.t(o).desc.shape, std::nullopt}, ins, {o});
  if (const Attribute* k = n.attr("kernel")) l.program().steps.back().kernel = k->s;
}

}  // namespace

void add_fused_vector_ops(std::vector<OpInfo>& table) {
  table.push_back(OpInfo::npusim("RMSNormalization", 2, 2).reads({"epsilon"}).lowers(lower_rmsnorm, "`rmsnorm`"));
  table.push_back(OpInfo::npusim("Gelu", 1, 1)
                      .reads({"approximate"})
                      .in_expressions_as("gelu")
                      .lowers(lower_gelu, "`gelu` / `gelu_tanh`"));
  table.push_back(OpInfo::npusim("RoPE", 3, 3).reads({"layout"}).lowers(lower_rope, "`rope` (bnsd or bsnd)"));
  table.push_back(OpInfo::npusim("AddLayerNorm", 3, 4)
                      .reads({"epsilon"})
                      .lowers(lower_add_layernorm, "`add_layernorm` (the sum a second output when used)"));
  table.push_back(OpInfo::npusim("FusedElementwise", 1, 8)
                      .reads({"expr", "kernel"})
                      .lowers(lower_fused_elementwise,
                              "`fused_elementwise` of the `expr` the pass wrote, the kernel named by `kernel`"));
}

}  // namespace npusim::stack::graph::onnx_ops
