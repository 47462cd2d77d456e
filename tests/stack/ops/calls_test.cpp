// The typed calls between the graph engine and the op library (stack/ops/calls.hpp): the text form parses into
// them once, a typed call gets the same plan as its text, and a typed call is checked as strictly as the text.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "common/config/loader.hpp"
#include "common/util/error.hpp"
#include "stack/ops/op.hpp"

namespace npusim::stack::ops {
namespace {

using hw::isa::DType;

const OpDef& op(const std::string& name) {
  const OpDef* d = find_op(name);
  if (!d) throw std::logic_error("no op " + name);
  return *d;
}

const config::ChipConfig& chip() {
  static const config::LoadedConfig c = config::load_config("910b");
  return c.chip;
}

// The message of the InputError `f` throws ("" when it throws none).
template <class F>
std::string error_of(F f) {
  try {
    f();
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

TEST(OpCalls, TextParsesIntoTheTypedCallOfEachFamily) {
  const Call fa = parse_call(op("flash_attention"), {{"B", "2"}, {"N", "8"}, {"KVN", "2"}, {"S", "128"}, {"D", "64"},
                                                     {"causal", "1"}, {"layout", "bsnd"}, {"q_strides", "1,2,3"}, {"k_offset", "5"}});
  const auto& f = std::get<FlashAttentionCall>(fa);
  EXPECT_EQ(f.B, 2u);
  EXPECT_EQ(f.N, 8u);
  EXPECT_EQ(f.KVN, 2u);
  EXPECT_EQ(f.SK, 128u);  // the text's default: S
  EXPECT_TRUE(f.causal);
  EXPECT_FALSE(f.scale.has_value());
  EXPECT_EQ(f.layout, AttentionLayout::kBsnd);
  ASSERT_TRUE(f.q && f.k);
  EXPECT_EQ(f.q->row, 3u);
  // An offset alone keeps the layout's own strides: K is [B, SK, KVN, D] in BSND, its rows KVN * D apart.
  EXPECT_EQ(f.k->row, 2u * 64);
  EXPECT_EQ(f.k->head, 64u);
  EXPECT_EQ(f.k->offset, 5u);
  EXPECT_FALSE(f.v.has_value());

  const Call mm_call = parse_call(op("matmul"), {{"M", "16"}, {"N", "16"}, {"K", "16"}, {"trans_b", "1"}, {"act", "gelu_tanh"}});
  const auto& mm = std::get<MatMulCall>(mm_call);
  EXPECT_TRUE(mm.trans_b);
  EXPECT_FALSE(mm.trans_a);
  EXPECT_EQ(mm.act, MatMulAct::kGeluTanh);

  const Call ln_call = parse_call(op("layernorm"), {{"shape", "4x64"}, {"eps", "0.001"}, {"stats", "1"}});
  const auto& ln = std::get<NormCall>(ln_call);
  EXPECT_DOUBLE_EQ(ln.eps, 0.001);
  EXPECT_TRUE(ln.stats);
  EXPECT_FALSE(std::get<NormCall>(parse_call(op("add_layernorm"), {{"sum", "0"}})).sum);
  EXPECT_EQ(std::get<RopeCall>(parse_call(op("rope"), {{"layout", "bsnd"}})).layout, RopeLayout::kBsnd);
  EXPECT_EQ(std::get<CastCall>(parse_call(op("cast"), {{"to", "bf16"}})).to, DType::kBf16);
  EXPECT_EQ(std::get<ReduceCall>(parse_call(op("reduce_max"), {{"axis", "-2"}})).axis, -2);
  EXPECT_EQ(std::get<TransposeCall>(parse_call(op("transpose"), {{"perm", "0,2,1"}})).perm, (std::vector<std::size_t>{0, 2, 1}));
  const Call sl_call = parse_call(op("slice"), {{"starts", "0,-3"}, {"ends", "2,9"}});
  const auto& sl = std::get<SliceCall>(sl_call);
  EXPECT_EQ(sl.starts, (std::vector<std::int64_t>{0, -3}));
  EXPECT_TRUE(sl.steps.empty());
  EXPECT_EQ(std::get<SplitCall>(parse_call(op("split"), {{"axis", "1"}, {"sizes", "3,5"}})).sizes, (std::vector<std::int64_t>{3, 5}));
  EXPECT_EQ(std::get<ExpandCall>(parse_call(op("expand"), {{"to", "4x8"}})).to, (Shape{4, 8}));
  EXPECT_EQ(std::get<FusedElementwiseCall>(parse_call(op("fused_elementwise"), {{"expr", "mul(x0,x1)"}, {"shape", "8"}})).expr, "mul(x0,x1)");
  EXPECT_TRUE(std::holds_alternative<Operands>(parse_call(op("add"), {{"shape", "8"}})));
  EXPECT_TRUE(std::holds_alternative<SoftmaxCall>(parse_call(op("softmax"), {})));
}

TEST(OpCalls, TextErrorsNameTheKey) {
  EXPECT_NE(error_of([] { parse_call(op("layernorm"), {{"epsilon", "1e-5"}}); }).find("op layernorm has no parameter 'epsilon' (it takes: shape, chunk, eps, stats)"),
            std::string::npos);
  EXPECT_NE(error_of([] { parse_call(op("rope"), {{"layout", "sbh"}}); }).find("rope: layout='sbh' is not bnsd or bsnd"), std::string::npos);
  EXPECT_NE(error_of([] { parse_call(op("matmul"), {{"act", "tanh"}}); }).find("act='tanh' is not one of none, relu, gelu, gelu_tanh"), std::string::npos);
  EXPECT_NE(error_of([] { parse_call(op("fused_elementwise"), {{"expr", "mul(x0"}, {"shape", "8"}}); }).find("fused_elementwise"), std::string::npos);
  EXPECT_NE(error_of([] { parse_call(op("transpose"), {{"perm", "0,-1"}}); }).find("'-1' is not a dim"), std::string::npos);
}

// The plan's observable choices: outputs, launch and tiling.
void expect_same_plan(const OpPlan& a, const OpPlan& b) {
  ASSERT_EQ(a.outputs.size(), b.outputs.size());
  for (std::size_t i = 0; i < a.outputs.size(); ++i) {
    EXPECT_EQ(a.outputs[i].shape, b.outputs[i].shape);
    EXPECT_EQ(a.outputs[i].dtype, b.outputs[i].dtype);
  }
  EXPECT_EQ(a.type, b.type);
  EXPECT_EQ(a.block_dim, b.block_dim);
  EXPECT_EQ(a.tiling, b.tiling);
  EXPECT_EQ(a.workspace_bytes, b.workspace_bytes);
  EXPECT_EQ(a.flops, b.flops);
}

TEST(OpCalls, ATypedCallPlansAsItsText) {
  // FlashAttention with a head's rows inside a fused [B, S, 3 * N * D] QKV projection, as the graph engine calls it.
  const Params text{{"B", "2"}, {"N", "4"}, {"S", "256"}, {"D", "64"}, {"causal", "1"}, {"scale", "0.125"},
                    {"q_strides", "196608,64,768"}, {"k_strides", "196608,64,768"}, {"k_offset", "256"},
                    {"v_strides", "196608,64,768"}, {"v_offset", "512"}};
  FlashAttentionCall typed;
  typed.B = 2;
  typed.N = 4;
  typed.S = 256;
  typed.D = 64;
  typed.causal = true;
  typed.scale = 0.125;
  typed.q = AttentionStrides{196608, 64, 768, 0};
  typed.k = AttentionStrides{196608, 64, 768, 256};
  typed.v = AttentionStrides{196608, 64, 768, 512};
  const OpDef& fa = op("flash_attention");
  const std::vector<TensorDesc> in = fa.inputs(text, DType::kFp16);
  ASSERT_EQ(in.size(), 3u);
  EXPECT_EQ(in[2].shape, (Shape{2 * 256 * 768}));  // V's last row ends where the [2, 256, 768] QKV tensor does
  expect_same_plan(fa.plan(in, parse_call(fa, text), chip()), fa.plan(in, typed, chip()));

  const OpDef& ln = op("add_layernorm");
  NormCall norm;
  norm.eps = 1e-6;
  norm.sum = false;
  const std::vector<TensorDesc> lin = ln.inputs({{"shape", "64x1024"}}, DType::kBf16);
  const OpPlan lp = ln.plan(lin, norm, chip());
  EXPECT_EQ(lp.outputs.size(), 1u);  // no sum
  expect_same_plan(lp, ln.plan(lin, parse_call(ln, {{"eps", "1e-6"}, {"sum", "0"}}), chip()));
}

TEST(OpCalls, ATypedCallIsCheckedAsStrictlyAsText) {
  const std::vector<TensorDesc> qkv(3, TensorDesc{{1, 2, 16, 40}, DType::kFp16});
  FlashAttentionCall fa;
  fa.B = 1;
  fa.N = 2;
  fa.S = 16;
  fa.D = 40;
  EXPECT_NE(error_of([&] { op("flash_attention").plan(qkv, fa, chip()); }).find("D=40 must be a multiple of 16"), std::string::npos);
  fa.D = 64;
  fa.KVN = 3;
  EXPECT_NE(error_of([&] { op("flash_attention").plan(qkv, fa, chip()); }).find("N=2 query heads cannot be grouped over KVN=3"), std::string::npos);
  fa.KVN = 0;
  fa.scale = -1.0;
  EXPECT_NE(error_of([&] { op("flash_attention").plan(qkv, fa, chip()); }).find("scale=-1"), std::string::npos);
  fa.scale.reset();
  fa.mask_shape = std::vector<std::uint32_t>{1, 1, 16};
  EXPECT_NE(error_of([&] { op("flash_attention").plan(qkv, fa, chip()); }).find("mask_shape is given without mask=1"), std::string::npos);

  const std::vector<TensorDesc> x{{{4, 8, 2}, DType::kFp16}};
  EXPECT_NE(error_of([&] { op("transpose").plan(x, TransposeCall{{0, 0, 1}}, chip()); }).find("perm='0,0,1' is not a permutation of the 3 dims"),
            std::string::npos);
  EXPECT_NE(error_of([&] { op("reduce_sum").plan(x, ReduceCall{3}, chip()); }).find("reduce_sum: axis='3' is not an axis of shape 4x8x2"),
            std::string::npos);
  EXPECT_NE(error_of([&] { op("expand").plan(x, ExpandCall{{4, 0, 2}}, chip()); }).find("expand: the target shape 4x0x2 has a 0 dimension"),
            std::string::npos);
  NormCall bad;
  bad.eps = -1;
  EXPECT_NE(error_of([&] { op("rmsnorm").plan({{{4, 64}, DType::kFp16}, {{64}, DType::kFp16}}, bad, chip()); }).find("rmsnorm: eps="),
            std::string::npos);
  MatMulCall bias;
  bias.bias = true;
  EXPECT_NE(error_of([&] { op("matmul").plan({{{16, 32}, DType::kFp16}, {{32, 8}, DType::kFp16}}, bias, chip()); })
                .find("matmul: 3 operands (a, b, bias) expected, 2 given"),
            std::string::npos);
}

TEST(OpCalls, ACallOfAnotherKindIsRefusedNamingBoth) {
  const std::vector<TensorDesc> x{{{4, 64}, DType::kFp16}, {{64}, DType::kFp16}, {{64}, DType::kFp16}};
  EXPECT_EQ(error_of([&] { op("layernorm").plan(x, MatMulCall{}, chip()); }), "op layernorm takes a call of type NormCall, given MatMulCall");
  EXPECT_EQ(error_of([&] { op("relu").plan({x[0]}, CastCall{}, chip()); }), "op relu takes a call of type Operands, given CastCall");
}

}  // namespace
}  // namespace npusim::stack::ops
