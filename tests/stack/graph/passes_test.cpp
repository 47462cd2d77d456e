// The graph passes on small graphs built here: constant folding, strided views, each fusion pass (what it matches,
// what it leaves), stream assignment and stream-aware memory planning. The values the fused graphs compute are
// checked end to end against NumPy and PyTorch in tests/framework/*.py.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "stack/graph/graph.hpp"
#include "stack/graph/lower.hpp"
#include "stack/graph/memory_plan.hpp"
#include "stack/graph/passes/passes.hpp"
#include "stack/graph/passes/views.hpp"
#include "stack/graph/streams.hpp"
#include "support/graph_builder.hpp"

namespace npusim::stack::graph {
namespace {

using test::Builder;
using test::Shape;

std::vector<std::string> live_ops(const Graph& g) {
  std::vector<std::string> out;
  for (NodeId id : g.topo_order())
    out.push_back((g.node(id).domain.empty() ? "" : g.node(id).domain + ".") + g.node(id).op_type);
  return out;
}

// --- Constant folding ----------------------------------------------------------------------------------------------

TEST(FoldConstants, ShapeArithmeticFoldsAndTheReshapeKeepsItsData) {
  Builder b;
  const ValueId x = b.input("x", {8, 4, 16});
  const ValueId shape = b.op("Shape", {x}, {3}, {}, ElemType::kInt64);
  const ValueId d0 = b.op("Gather", {shape, b.ints({0})}, {1}, {{"axis", Attribute::of_int(0)}}, ElemType::kInt64);
  const ValueId cat = b.op("Concat", {d0, b.ints({-1})}, {2}, {{"axis", Attribute::of_int(0)}}, ElemType::kInt64);
  const ValueId y = b.op("Reshape", {x, cat}, {8, 64});
  b.g.outputs = {y};
  EXPECT_EQ(passes::fold_constants(b.g), 3);  // Shape, Gather, Concat; the Reshape reads x
  passes::remove_dead_nodes(b.g);
  EXPECT_EQ(live_ops(b.g), std::vector<std::string>{"Reshape"});
  EXPECT_EQ(b.g.value(cat).constant->as_ints(), (std::vector<std::int64_t>{8, -1}));
  b.g.verify();
}

TEST(FoldConstants, IntegersStayExactAndVariadicMaxIsNotHalfFolded) {
  Builder b;
  const ValueId cast = b.op("Cast", {b.ints({std::numeric_limits<std::int64_t>::max()})}, {1},
                            {{"to", Attribute::of_int(7)}}, ElemType::kInt64);
  const ValueId mx = b.op("Max", {b.floats({1.0f}), b.floats({2.0f}), b.floats({3.0f})}, {});
  b.g.outputs = {cast, mx};
  EXPECT_EQ(passes::fold_constants(b.g), 1);
  EXPECT_EQ(b.g.value(cast).constant->as_ints(), std::vector<std::int64_t>{std::numeric_limits<std::int64_t>::max()});
  EXPECT_FALSE(b.g.value(mx).constant.has_value());  // three inputs: left to the device rather than folded wrong
}

// ONNX Mod: fmod = 0 takes the divisor's sign (Python's %), fmod = 1 the dividend's (C's fmod); an integer
// division by zero is left to run.
TEST(FoldConstants, ModFoldsWithTheSignOfItsFmodAttribute) {
  Builder b;
  const ValueId a = b.ints({7, -7, 7, -7}), d = b.ints({3, 3, -3, -3});
  const ValueId py = b.op("Mod", {a, d}, {4}, {}, ElemType::kInt64);
  const ValueId c = b.op("Mod", {a, d}, {4}, {{"fmod", Attribute::of_int(1)}}, ElemType::kInt64);
  const ValueId f =
      b.op("Mod", {b.floats({5.5f, -5.5f}, {2}), b.floats({2.0f, 2.0f}, {2})}, {2}, {{"fmod", Attribute::of_int(1)}});
  const ValueId zero = b.op("Mod", {b.ints({1}), b.ints({0})}, {1}, {}, ElemType::kInt64);
  b.g.outputs = {py, c, f, zero};
  EXPECT_EQ(passes::fold_constants(b.g), 3);
  EXPECT_EQ(b.g.value(py).constant->as_ints(), (std::vector<std::int64_t>{1, 2, -2, -1}));
  EXPECT_EQ(b.g.value(c).constant->as_ints(), (std::vector<std::int64_t>{1, -1, 1, -1}));
  EXPECT_EQ(b.g.value(f).constant->as_doubles(), (std::vector<double>{1.5, -1.5}));
  EXPECT_FALSE(b.g.value(zero).constant.has_value());
  // Floats need fmod = 1 (ONNX); uint64 is not folded (values past 2^63).
  Builder c2;
  const ValueId ff = c2.op("Mod", {c2.floats({5.5f}, {1}), c2.floats({2.0f}, {1})}, {1});
  c2.g.outputs = {ff};
  EXPECT_EQ(passes::fold_constants(c2.g), 0);
}

TEST(FoldConstants, MaskArithmeticFoldsExactlyAndLargeResultsStayNodes) {
  Builder b;
  // Where(Equal(ConstantOfShape([2]) * -1, -1), 1, 0) over two elements, and a Slice with INT64_MAX as its end.
  Attribute one;
  one.kind = Attribute::Kind::kTensor;
  one.t = Tensor{ElemType::kInt64, {1}, std::vector<std::uint8_t>(8)};
  const std::int64_t v1 = 1;
  std::memcpy(one.t.bytes.data(), &v1, 8);
  const ValueId cs = b.op("ConstantOfShape", {b.ints({2})}, {2}, {{"value", one}}, ElemType::kInt64);
  const ValueId neg = b.op("Mul", {cs, b.ints({-1})}, {2}, {}, ElemType::kInt64);
  const ValueId eq = b.op("Equal", {neg, b.ints({-1})}, {2}, {}, ElemType::kBool);
  const ValueId wh = b.op("Where", {eq, b.ints({7}), b.ints({3})}, {2}, {}, ElemType::kInt64);
  const ValueId sl =
      b.op("Slice", {b.ints({10, 11, 12, 13}), b.ints({1}), b.ints({std::numeric_limits<std::int64_t>::max()})}, {3},
           {}, ElemType::kInt64);
  const ValueId big = b.op("Expand", {b.floats({1.0f}, {1}), b.ints({4097, 4096})}, {4097, 4096});
  b.g.outputs = {wh, sl, big};
  EXPECT_EQ(passes::fold_constants(b.g), 5);
  EXPECT_EQ(b.g.value(wh).constant->as_ints(), (std::vector<std::int64_t>{7, 7}));
  EXPECT_EQ(b.g.value(sl).constant->as_ints(), (std::vector<std::int64_t>{11, 12, 13}));
  EXPECT_FALSE(b.g.value(big).constant.has_value());  // 16.8 M elements: above the folding limit
  EXPECT_EQ(live_ops(b.g), std::vector<std::string>{"Expand"});
}

// --- Strided views -------------------------------------------------------------------------------------------------

TEST(Views, RepeatKvIsAGroupedHeadDim) {
  // [B=2, S=16, KVH=2, D=64] -> heads transpose -> Unsqueeze -> Expand x4 -> Reshape to 8 heads.
  passes::View v = passes::View::contiguous({2, 16, 2, 64});
  ASSERT_TRUE(v.transpose({0, 2, 1, 3}));
  ASSERT_TRUE(v.reshape({2, 2, 1, 16, 64}));
  ASSERT_TRUE(v.expand({2, 2, 4, 16, 64}));
  ASSERT_TRUE(v.reshape({2, 8, 16, 64}));
  ASSERT_EQ(v.atoms(1).size(), 2u);
  EXPECT_EQ(v.atoms(1)[0].size, 2);
  EXPECT_EQ(v.atoms(1)[0].stride, 64);
  EXPECT_EQ(v.atoms(1)[1].size, 4);
  EXPECT_EQ(v.atoms(1)[1].stride, 0);
  EXPECT_EQ(v.simple_stride(2), 128);
  EXPECT_EQ(v.simple_stride(3), 1);
  EXPECT_EQ(v.simple_stride(0), 16 * 128);
}

TEST(Views, SplitOfAFusedProjectionAndWhatCannotBeAView) {
  passes::View v = passes::View::contiguous({2, 16, 3 * 256});
  ASSERT_TRUE(v.slice(2, 256, 256, 1));  // the K third
  ASSERT_TRUE(v.reshape({2, 16, 4, 64}));
  ASSERT_TRUE(v.transpose({0, 2, 1, 3}));
  EXPECT_EQ(v.offset(), 256);
  EXPECT_EQ(v.shape(), (Shape{2, 4, 16, 64}));
  EXPECT_EQ(v.simple_stride(2), 768);
  EXPECT_EQ(v.simple_stride(1), 64);
  // Merging two dims that are not contiguous into one of a size they do not factor: not a strided view.
  passes::View w = passes::View::contiguous({4, 3});
  ASSERT_TRUE(w.transpose({1, 0}));
  EXPECT_FALSE(w.reshape({2, 6}));
}

// nn.MultiheadAttention's packed projection: [S, B, 3E] -> [S, B, 3, E] -> ... -> [3, S, B, E], then Gather(0) for
// Q (PyTorch's select) is a view at offset 0 of the projection, Gather(-1) for V one at offset 2E; with an index
// outside the dim, or one that is not constant, the Gather's output is the base.
TEST(Views, AGatherOfOneConstantIndexIsASelect) {
  Builder b;
  const ValueId proj = b.input("proj", {16, 2, 3 * 64});
  const ValueId r = b.op("Reshape", {proj, b.ints({16, 2, 3, 64})}, {16, 2, 3, 64});
  const ValueId t = b.op("Transpose", {r}, {3, 16, 2, 64}, {{"perm", Attribute::of_ints({2, 0, 1, 3})}});
  const ValueId q = b.op("Gather", {t, b.scalar_int(0)}, {16, 2, 64}, {{"axis", Attribute::of_int(0)}});
  const ValueId v = b.op("Gather", {t, b.scalar_int(-1)}, {16, 2, 64}, {{"axis", Attribute::of_int(0)}});
  const ValueId bad = b.op("Gather", {t, b.scalar_int(3)}, {16, 2, 64}, {{"axis", Attribute::of_int(0)}});
  const ValueId dyn =
      b.op("Gather", {t, b.input("i", {}, ElemType::kInt64)}, {16, 2, 64}, {{"axis", Attribute::of_int(0)}});
  ValueId base = kNoValue;
  std::vector<NodeId> nodes;
  const auto qv = passes::view_of(b.g, q, &base, &nodes);
  ASSERT_TRUE(qv.has_value());
  EXPECT_EQ(base, proj);
  EXPECT_EQ(nodes.size(), 3u);
  EXPECT_EQ(qv->shape(), (Shape{16, 2, 64}));
  EXPECT_EQ(qv->offset(), 0);
  EXPECT_EQ(qv->simple_stride(0), 2 * 192);
  EXPECT_EQ(qv->simple_stride(1), 192);
  const auto vv = passes::view_of(b.g, v, &base, &nodes);
  ASSERT_TRUE(vv.has_value());
  EXPECT_EQ(vv->offset(), 128);
  // Out of range: no view of the projection; the Gather's output is a buffer of its own and the walk starts there.
  const auto bv = passes::view_of(b.g, bad, &base, &nodes);
  ASSERT_TRUE(bv.has_value());
  EXPECT_EQ(base, bad);
  const auto dv = passes::view_of(b.g, dyn, &base, &nodes);  // the Gather itself is the base
  ASSERT_TRUE(dv.has_value());
  EXPECT_EQ(base, dyn);
}

// --- Attention -----------------------------------------------------------------------------------------------------

// A LLaMA-style attention: q [1, 16, 256], k and v [1, 16, 128] projections; 4 query heads, 2 KV heads of D = 64;
// repeat_kv; causal mask as Where(upper triangle, -inf, x); output back to [1, 16, 256].
Builder gqa_attention() {
  Builder b;
  const ValueId q = b.input("q", {2, 16, 256}), k = b.input("k", {2, 16, 128}), v = b.input("v", {2, 16, 128});
  auto heads = [&](ValueId x, std::int64_t n) {
    const ValueId r = b.op("Reshape", {x, b.ints({2, 16, n, 64})}, {2, 16, n, 64});
    return b.op("Transpose", {r}, {2, n, 16, 64}, {{"perm", Attribute::of_ints({0, 2, 1, 3})}});
  };
  auto repeat = [&](ValueId x) {
    const ValueId u = b.op("Unsqueeze", {x, b.ints({2})}, {2, 2, 1, 16, 64});
    const ValueId e = b.op("Expand", {u, b.ints({2, 2, 2, 16, 64})}, {2, 2, 2, 16, 64});
    return b.op("Reshape", {e, b.ints({2, 4, 16, 64})}, {2, 4, 16, 64});
  };
  const ValueId qh = heads(q, 4), kr = repeat(heads(k, 2)), vr = repeat(heads(v, 2));
  const ValueId kt = b.op("Transpose", {kr}, {2, 4, 64, 16}, {{"perm", Attribute::of_ints({0, 1, 3, 2})}});
  const ValueId s = b.op("MatMul", {qh, kt}, {2, 4, 16, 16});
  const ValueId sc = b.op("Div", {s, b.floats({8.0f})}, {2, 4, 16, 16});
  std::vector<bool> upper(16 * 16);
  for (std::size_t i = 0; i < 16; ++i)
    for (std::size_t j = 0; j < 16; ++j) upper[i * 16 + j] = j > i;
  const ValueId m = b.op("Where", {b.bools(upper, {16, 16}), b.floats({-INFINITY}), sc}, {2, 4, 16, 16});
  const ValueId p = b.op("Softmax", {m}, {2, 4, 16, 16}, {{"axis", Attribute::of_int(-1)}});
  const ValueId o = b.op("MatMul", {p, vr}, {2, 4, 16, 64});
  const ValueId ot = b.op("Transpose", {o}, {2, 16, 4, 64}, {{"perm", Attribute::of_ints({0, 2, 1, 3})}});
  b.g.outputs = {b.op("Reshape", {ot, b.ints({2, 16, 256})}, {2, 16, 256})};
  return b;
}

TEST(FuseAttention, GroupedQueryAttentionThroughLayoutNodesIsOneNode) {
  Builder b = gqa_attention();
  EXPECT_EQ(passes::fuse_attention(b.g), 1);
  b.g.compact();
  b.g.verify();
  ASSERT_EQ(live_ops(b.g), std::vector<std::string>{"npusim.FlashAttention"});  // every layout node absorbed
  const Node& fa = b.g.node(0);
  EXPECT_EQ(b.g.value(fa.inputs[0]).name, "q");
  EXPECT_EQ(b.g.value(fa.inputs[1]).name, "k");
  EXPECT_EQ(b.g.value(fa.inputs[2]).name, "v");
  EXPECT_EQ(fa.attr_int("causal", 0), 1);
  EXPECT_FLOAT_EQ(fa.attr_float("scale", 0), 0.125f);
  EXPECT_EQ(fa.attr("shape")->ints, (Shape{2, 4, 2, 16, 16, 64}));      // B, N, KVN, S, SK, D
  EXPECT_EQ(fa.attr("q_layout")->ints, (Shape{16 * 256, 64, 256, 0}));  // b, n, s strides, offset
  EXPECT_EQ(fa.attr("k_layout")->ints, (Shape{16 * 128, 64, 128, 0}));
  EXPECT_EQ(fa.attr("o_layout")->ints, (Shape{16 * 256, 64, 256, 0}));
  EXPECT_EQ(b.g.outputs[0], fa.outputs[0]);
}

// The fused node lowers to one typed FlashAttention call carrying the pass's shape, scale and per-tensor layouts.
TEST(Lowering, TheFusedAttentionIsOneTypedCall) {
  Builder b = gqa_attention();
  ASSERT_EQ(passes::fuse_attention(b.g), 1);
  b.g.compact();
  const Program p = lower(b.g);
  const Step* fa = nullptr;
  for (const Step& s : p.steps)
    if (s.op == "flash_attention") fa = &s;
  ASSERT_NE(fa, nullptr);
  const auto& c = std::get<ops::FlashAttentionCall>(fa->call);
  EXPECT_EQ((std::vector<std::uint32_t>{c.B, c.N, c.KVN, c.S, c.SK, c.D}),
            (std::vector<std::uint32_t>{2, 4, 2, 16, 16, 64}));
  EXPECT_TRUE(c.causal);
  EXPECT_FALSE(c.mask);
  ASSERT_TRUE(c.scale.has_value());
  EXPECT_DOUBLE_EQ(*c.scale, 0.125);
  ASSERT_TRUE(c.q && c.k && c.v && c.o);
  EXPECT_EQ((std::vector<std::uint64_t>{c.k->batch, c.k->head, c.k->row, c.k->offset}),
            (std::vector<std::uint64_t>{16 * 128, 64, 128, 0}));
  EXPECT_EQ(c.o->row, 256u);
}

TEST(Lowering, NodeAttributesBecomeTheCallsFields) {
  Builder b;
  const ValueId x = b.input("x", {6, 32});
  const ValueId n = b.op("LayerNormalization", {x, b.floats(std::vector<float>(32, 1.0f), {32})}, {6, 32},
                         {{"epsilon", Attribute::of_float(1e-3f)}});
  const ValueId t = b.op("Transpose", {n}, {32, 6}, {{"perm", Attribute::of_ints({1, 0})}});
  b.g.outputs = {
      b.op("ReduceMax", {t}, {32}, {{"axes", Attribute::of_ints({-1})}, {"keepdims", Attribute::of_int(0)}})};
  const Program p = lower(b.g);
  ASSERT_EQ(p.steps.size(), 3u);
  EXPECT_EQ(p.steps[0].op, "layernorm");
  const auto& norm = std::get<ops::NormCall>(p.steps[0].call);
  EXPECT_EQ(static_cast<float>(norm.eps), 1e-3f);
  EXPECT_FALSE(norm.stats);  // Mean and InvStdDev are not outputs
  EXPECT_EQ(std::get<ops::TransposeCall>(p.steps[1].call).perm, (std::vector<std::size_t>{1, 0}));
  EXPECT_EQ(std::get<ops::ReduceCall>(p.steps[2].call).axis, 1);  // -1 of a 2-d tensor
}

TEST(FuseAttention, AMaskThatIsNotCausalBecomesAnAdditiveMask) {
  Builder b;
  const ValueId q = b.input("q", {2, 4, 16, 32}), k = b.input("k", {2, 4, 16, 32}), v = b.input("v", {2, 4, 16, 32});
  const ValueId kt = b.op("Transpose", {k}, {2, 4, 32, 16}, {{"perm", Attribute::of_ints({0, 1, 3, 2})}});
  const ValueId s = b.op("MatMul", {q, kt}, {2, 4, 16, 16});
  std::vector<bool> band(256);
  for (std::size_t i = 0; i < 16; ++i)
    for (std::size_t j = 0; j < 16; ++j) band[i * 16 + j] = (i > j ? i - j : j - i) <= 2;
  const ValueId m = b.op("Where", {b.bools(band, {1, 1, 16, 16}), s, b.floats({-3.0e38f})}, {2, 4, 16, 16});
  const ValueId p = b.op("Softmax", {m}, {2, 4, 16, 16}, {{"axis", Attribute::of_int(-1)}});
  b.g.outputs = {b.op("MatMul", {p, v}, {2, 4, 16, 32})};
  EXPECT_EQ(passes::fuse_attention(b.g), 1);
  b.g.compact();
  const Node& fa = b.g.node(0);
  ASSERT_EQ(fa.inputs.size(), 4u);
  EXPECT_EQ(fa.attr_int("causal", 1), 0);
  const std::vector<double> mask = b.g.value(fa.inputs[3]).constant->as_doubles();
  EXPECT_EQ(mask[0 * 16 + 2], 0.0);
  EXPECT_EQ(mask[0 * 16 + 3], -65504.0);  // the fill, clamped to what fp16 holds
}

// scores [8, 2, 8, 8] + `mask`: the fused node keeps the mask as it is and records how it broadcasts (batch, head,
// row dims), or the pattern stays unfused when the mask does not broadcast dim by dim.
Builder masked_attention(const Shape& mask) {
  Builder b;
  const ValueId q = b.input("q", {8, 2, 8, 32}), k = b.input("k", {8, 2, 8, 32}), v = b.input("v", {8, 2, 8, 32});
  const ValueId kt = b.op("Transpose", {k}, {8, 2, 32, 8}, {{"perm", Attribute::of_ints({0, 1, 3, 2})}});
  const ValueId s = b.op("Add", {b.op("MatMul", {q, kt}, {8, 2, 8, 8}), b.input("mask", mask)}, {8, 2, 8, 8});
  const ValueId p = b.op("Softmax", {s}, {8, 2, 8, 8}, {{"axis", Attribute::of_int(-1)}});
  b.g.outputs = {b.op("MatMul", {p, v}, {8, 2, 8, 32})};
  return b;
}

TEST(FuseAttention, MasksThatBroadcastPerBatchHeadOrRowAreKeptWithTheirShape) {
  const std::pair<Shape, Shape> cases[] = {
      {{8, 1, 1, 8}, {8, 1, 1}},  // a key-padding row per batch (BERT's extended attention mask)
      {{8, 2, 8, 8}, {8, 2, 8}},  // one table per batch and head
      {{2, 8, 8}, {1, 2, 8}},     // per head, the batch dim left out
      {{8, 8}, {1, 1, 8}},        // one S x SK table
      {{8}, {1, 1, 1}},           // one key row for all
  };
  for (const auto& [mask, dims] : cases) {
    Builder b = masked_attention(mask);
    ASSERT_EQ(passes::fuse_attention(b.g), 1) << ::testing::PrintToString(mask);
    b.g.compact();
    const Node& fa = b.g.node(0);
    ASSERT_EQ(fa.inputs.size(), 4u);
    EXPECT_EQ(b.g.value(fa.inputs[3]).name, "mask");
    EXPECT_EQ(fa.attr("mask_shape")->ints, dims) << ::testing::PrintToString(mask);
  }
  for (const Shape& bad : {Shape{4, 1, 1, 8}, Shape{8, 1, 2, 8}, Shape{1, 8, 1, 1, 8}}) {
    Builder b = masked_attention(bad);  // 4 of 8 batches, 2 of 8 rows, more dims than the scores
    EXPECT_EQ(passes::fuse_attention(b.g), 0) << ::testing::PrintToString(bad);
  }
}

TEST(FuseAttention, HeadDimsTheKernelCannotTakeStayUnfused) {
  Builder b;  // D = 24 is not a multiple of 16
  const ValueId q = b.input("q", {1, 2, 16, 24}), k = b.input("k", {1, 2, 16, 24}), v = b.input("v", {1, 2, 16, 24});
  const ValueId kt = b.op("Transpose", {k}, {1, 2, 24, 16}, {{"perm", Attribute::of_ints({0, 1, 3, 2})}});
  const ValueId p =
      b.op("Softmax", {b.op("MatMul", {q, kt}, {1, 2, 16, 16})}, {1, 2, 16, 16}, {{"axis", Attribute::of_int(-1)}});
  b.g.outputs = {b.op("MatMul", {p, v}, {1, 2, 16, 24})};
  EXPECT_EQ(passes::fuse_attention(b.g), 0);
  EXPECT_EQ(b.g.live_nodes(), 4u);
}

TEST(FuseAttention, TheHeadDimReasonIsNotedPerCandidate) {
  Builder b;  // the graph of the test above, with the pass asked for its notes
  const ValueId q = b.input("q", {1, 2, 16, 24}), k = b.input("k", {1, 2, 16, 24}), v = b.input("v", {1, 2, 16, 24});
  const ValueId kt = b.op("Transpose", {k}, {1, 2, 24, 16}, {{"perm", Attribute::of_ints({0, 1, 3, 2})}});
  const ValueId p =
      b.op("Softmax", {b.op("MatMul", {q, kt}, {1, 2, 16, 16})}, {1, 2, 16, 16}, {{"axis", Attribute::of_int(-1)}});
  b.g.outputs = {b.op("MatMul", {p, v}, {1, 2, 16, 24})};
  std::vector<passes::FusionNote> notes;
  EXPECT_EQ(passes::fuse_attention(b.g, &notes), 0);
  ASSERT_EQ(notes.size(), 1u);
  EXPECT_EQ(notes[0].node, b.g.node(b.g.value(b.g.outputs[0]).producer).name);
  EXPECT_TRUE(notes[0].fused_into.empty());
  EXPECT_EQ(notes[0].reason, "Q has head dim D=24 (the kernel takes multiples of 16 up to 256)");
}

TEST(FuseAttention, ProbabilitiesReturnedAsWeightsKeepTheGraphAndSayWhy) {
  Builder b;
  const ValueId q = b.input("q", {1, 2, 16, 32}), k = b.input("k", {1, 2, 16, 32}), v = b.input("v", {1, 2, 16, 32});
  const ValueId kt = b.op("Transpose", {k}, {1, 2, 32, 16}, {{"perm", Attribute::of_ints({0, 1, 3, 2})}});
  const ValueId p =
      b.op("Softmax", {b.op("MatMul", {q, kt}, {1, 2, 16, 16})}, {1, 2, 16, 16}, {{"axis", Attribute::of_int(-1)}});
  b.g.outputs = {b.op("MatMul", {p, v}, {1, 2, 16, 32}), p};
  std::vector<passes::FusionNote> notes;
  EXPECT_EQ(passes::fuse_attention(b.g, &notes), 0);
  ASSERT_EQ(notes.size(), 1u);
  EXPECT_NE(notes[0].reason.find("are used elsewhere too"), std::string::npos) << notes[0].reason;
}

// HF's softmax(dtype=float32).to(dtype): the Cast between Softmax and the P V MatMul is named, not skipped silently;
// a mask input written first in the Add (Add(mask, scores), both computed) is still the mask.
TEST(FuseAttention, ACastAfterTheSoftmaxIsNamedAndAMaskWrittenFirstIsTheMask) {
  for (const bool cast : {true, false}) {
    Builder b;
    const ValueId q = b.input("q", {1, 2, 16, 32}), k = b.input("k", {1, 2, 16, 32}), v = b.input("v", {1, 2, 16, 32});
    const ValueId kt = b.op("Transpose", {k}, {1, 2, 32, 16}, {{"perm", Attribute::of_ints({0, 1, 3, 2})}});
    const ValueId mask = b.op("Relu", {b.input("m", {1, 1, 16, 16})}, {1, 1, 16, 16});  // computed, not constant
    const ValueId s = b.op("Add", {mask, b.op("MatMul", {q, kt}, {1, 2, 16, 16})}, {1, 2, 16, 16});
    ValueId p = b.op("Softmax", {s}, {1, 2, 16, 16}, {{"axis", Attribute::of_int(-1)}});
    if (cast) p = b.op("Cast", {p}, {1, 2, 16, 16}, {{"to", Attribute::of_int(1)}});
    b.g.outputs = {b.op("MatMul", {p, v}, {1, 2, 16, 32})};
    std::vector<passes::FusionNote> notes;
    EXPECT_EQ(passes::fuse_attention(b.g, &notes), cast ? 0 : 1);
    ASSERT_EQ(notes.size(), 1u);
    if (cast) {
      EXPECT_NE(notes[0].reason.find("the Cast 'Cast_"), std::string::npos) << notes[0].reason;
      continue;
    }
    b.g.compact();
    for (NodeId id : b.g.topo_order()) {
      if (b.g.node(id).op_type == "FlashAttention") {
        EXPECT_EQ(b.g.node(id).inputs[3], mask);
      }
    }
  }
}

// An additive constant that is 0 on and below the diagonal and -inf (or <= -1e4) above it is the kernel's causal
// flag (block skipping), not an S x S table; one entry off the pattern keeps it a table.
TEST(FuseAttention, AConstantAdditiveCausalMaskBecomesTheCausalFlag) {
  for (const bool exact : {true, false}) {
    Builder b;
    const ValueId q = b.input("q", {1, 2, 16, 32}), k = b.input("k", {1, 2, 16, 32}), v = b.input("v", {1, 2, 16, 32});
    const ValueId kt = b.op("Transpose", {k}, {1, 2, 32, 16}, {{"perm", Attribute::of_ints({0, 1, 3, 2})}});
    std::vector<float> mask(256);
    for (std::size_t i = 0; i < 16; ++i)
      for (std::size_t j = 0; j < 16; ++j) mask[i * 16 + j] = j <= i ? 0.0f : (j == i + 1 ? -1e9f : -INFINITY);
    if (!exact) mask[5 * 16 + 5] = -1.0f;  // a diagonal entry the causal kernel would not add
    const ValueId s = b.op("Add", {b.op("MatMul", {q, kt}, {1, 2, 16, 16}), b.floats(mask, {16, 16})}, {1, 2, 16, 16});
    const ValueId p = b.op("Softmax", {s}, {1, 2, 16, 16}, {{"axis", Attribute::of_int(-1)}});
    b.g.outputs = {b.op("MatMul", {p, v}, {1, 2, 16, 32})};
    std::vector<passes::FusionNote> notes;
    ASSERT_EQ(passes::fuse_attention(b.g, &notes), 1);
    b.g.compact();
    const Node& fa = b.g.node(0);
    EXPECT_EQ(fa.attr_int("causal", -1), exact ? 1 : 0);
    EXPECT_EQ(fa.inputs.size(), exact ? 3u : 4u);  // no mask input when it is the flag
    ASSERT_EQ(notes.size(), 1u);
    EXPECT_EQ(notes[0].fused_into, fa.name);
    EXPECT_EQ(notes[0].causal, exact);
  }
}

// BART/OPT-style attention: heads folded into the batch ([B*H, S, D]) after a transpose, so the batch dim is
// (B, S*H*D) x (H, D) in each input's buffer. The operands are read as [B, H, S, D] and the mask per [B*H] batch is one
// per batch and head.
TEST(FuseAttention, BatchedMatmulsOnHeadsFoldedIntoTheBatchAreSplitBack) {
  Builder b;
  auto heads = [&](const char* name) {  // [B, S, H, D] -> [B, H, S, D] -> [B*H, S, D]
    const ValueId t = b.op("Transpose", {b.input(name, {2, 16, 4, 32})}, {2, 4, 16, 32},
                           {{"perm", Attribute::of_ints({0, 2, 1, 3})}});
    return b.op("Reshape", {t, b.ints({8, 16, 32})}, {8, 16, 32});
  };
  const ValueId q = heads("q"), k = heads("k"), v = heads("v");
  const ValueId kt = b.op("Transpose", {k}, {8, 32, 16}, {{"perm", Attribute::of_ints({0, 2, 1})}});
  const ValueId s = b.op("Add", {b.op("MatMul", {q, kt}, {8, 16, 16}), b.input("mask", {8, 16, 16})}, {8, 16, 16});
  const ValueId p = b.op("Softmax", {s}, {8, 16, 16}, {{"axis", Attribute::of_int(-1)}});
  const ValueId o = b.op("MatMul", {p, v}, {8, 16, 32});
  b.g.outputs = {b.op("Reshape", {o, b.ints({2, 4, 16, 32})}, {2, 4, 16, 32})};
  ASSERT_EQ(passes::fuse_attention(b.g), 1);
  b.g.compact();
  const Node* fa = nullptr;
  for (NodeId id : b.g.topo_order())
    if (b.g.node(id).op_type == "FlashAttention") fa = &b.g.node(id);
  ASSERT_NE(fa, nullptr);
  EXPECT_EQ(fa->attr("shape")->ints, (Shape{2, 4, 4, 16, 16, 32}));  // B, N, KVN, S, SK, D
  EXPECT_EQ(fa->attr("mask_shape")->ints, (Shape{2, 4, 16}));
  // Q is read from its [B, S, H, D] input: batch stride S*H*D, head stride D, row stride H*D.
  EXPECT_EQ(fa->attr("q_layout")->ints, (Shape{16 * 128, 32, 128, 0}));
  EXPECT_EQ(fa->attr("o_layout")->ints, (Shape{4 * 16 * 32, 16 * 32, 32, 0}));
}

// --- RoPE, norms, GELU, Softmax, Add+LayerNorm, elementwise chains --------------------------------------------------

TEST(FuseRope, RotateHalfBecomesRopeInBsndWithTheTransposeAfterIt) {
  Builder b;
  const ValueId x = b.input("x", {1, 16, 4, 64});
  const ValueId q = b.op("Transpose", {x}, {1, 4, 16, 64}, {{"perm", Attribute::of_ints({0, 2, 1, 3})}});
  const ValueId cos = b.input("cos", {16, 64}), sin = b.input("sin", {16, 64});
  const ValueId x2 = b.op("Slice", {q, b.ints({32}), b.ints({64}), b.ints({-1})}, {1, 4, 16, 32});
  const ValueId x1 = b.op("Slice", {q, b.ints({0}), b.ints({32}), b.ints({-1})}, {1, 4, 16, 32});
  const ValueId cat =
      b.op("Concat", {b.op("Neg", {x2}, {1, 4, 16, 32}), x1}, {1, 4, 16, 64}, {{"axis", Attribute::of_int(-1)}});
  const ValueId y =
      b.op("Add", {b.op("Mul", {q, cos}, {1, 4, 16, 64}), b.op("Mul", {cat, sin}, {1, 4, 16, 64})}, {1, 4, 16, 64});
  b.g.outputs = {y};
  EXPECT_EQ(passes::fuse_rope(b.g), 1);
  b.g.compact();
  b.g.verify();
  EXPECT_EQ(live_ops(b.g), (std::vector<std::string>{"npusim.RoPE", "Transpose"}));
  const Node& rope = b.g.node(b.g.topo_order()[0]);
  EXPECT_EQ(rope.inputs[0], x);
  EXPECT_EQ(rope.attr("layout")->s, "bsnd");
}

TEST(FuseRope, HalvesThatDoNotMatchStay) {
  Builder b;
  const ValueId q = b.input("q", {1, 4, 16, 64});
  const ValueId cos = b.input("cos", {16, 64}), sin = b.input("sin", {16, 64});
  const ValueId x2 = b.op("Slice", {q, b.ints({30}), b.ints({64}), b.ints({-1})}, {1, 4, 16, 34});  // not the half
  const ValueId x1 = b.op("Slice", {q, b.ints({0}), b.ints({30}), b.ints({-1})}, {1, 4, 16, 30});
  const ValueId cat =
      b.op("Concat", {b.op("Neg", {x2}, {1, 4, 16, 34}), x1}, {1, 4, 16, 64}, {{"axis", Attribute::of_int(-1)}});
  b.g.outputs = {
      b.op("Add", {b.op("Mul", {q, cos}, {1, 4, 16, 64}), b.op("Mul", {cat, sin}, {1, 4, 16, 64})}, {1, 4, 16, 64})};
  EXPECT_EQ(passes::fuse_rope(b.g), 0);
}

TEST(FuseLayerNorm, OnnxFunctionBodyWithMeanAndInvStdDevOutputs) {
  // ONNX 17's LayerNormalization body: E[x^2] - mean^2, Reciprocal(std) and the mean as outputs.
  Builder b;
  const ValueId x = b.input("x", {6, 32});
  const ValueId mean = b.op("ReduceMean", {x}, {6, 1}, {{"axes", Attribute::of_ints({1})}});
  const ValueId msq = b.op("ReduceMean", {b.op("Mul", {x, x}, {6, 32})}, {6, 1}, {{"axes", Attribute::of_ints({1})}});
  const ValueId var = b.op("Sub", {msq, b.op("Mul", {mean, mean}, {6, 1})}, {6, 1});
  const ValueId sd = b.op("Sqrt", {b.op("Add", {var, b.floats({1e-5f})}, {6, 1})}, {6, 1});
  const ValueId n = b.op("Div", {b.op("Sub", {x, mean}, {6, 32}), sd}, {6, 32});
  const ValueId y = b.op("Add", {b.op("Mul", {n, b.input("w", {1, 32})}, {6, 32}), b.input("bias", {1, 32})}, {6, 32});
  const ValueId inv = b.op("Reciprocal", {sd}, {6, 1});
  b.g.outputs = {y, mean, inv};
  EXPECT_EQ(passes::fuse_layernorm(b.g), 1);
  b.g.compact();
  b.g.verify();
  ASSERT_EQ(live_ops(b.g), std::vector<std::string>{"LayerNormalization"});
  EXPECT_EQ(b.g.node(0).outputs, (std::vector<ValueId>{y, mean, inv}));
  EXPECT_FLOAT_EQ(b.g.node(0).attr_float("epsilon", 0), 1e-5f);
}

TEST(FuseLayerNorm, OnlyInvStdDevUsedKeepsItInTheThirdPlace) {
  Builder b;
  const ValueId x = b.input("x", {6, 32});
  const ValueId mean = b.op("ReduceMean", {x}, {6, 1}, {{"axes", Attribute::of_ints({1})}});
  const ValueId dev = b.op("Sub", {x, mean}, {6, 32});
  const ValueId var =
      b.op("ReduceMean", {b.op("Pow", {dev, b.floats({2.0f})}, {6, 32})}, {6, 1}, {{"axes", Attribute::of_ints({1})}});
  const ValueId sd = b.op("Sqrt", {b.op("Add", {var, b.floats({1e-5f})}, {6, 1})}, {6, 1});
  const ValueId y = b.op("Mul", {b.op("Div", {dev, sd}, {6, 32}), b.input("w", {32})}, {6, 32});
  const ValueId inv = b.op("Reciprocal", {sd}, {6, 1});
  b.g.outputs = {y, inv};
  EXPECT_EQ(passes::fuse_layernorm(b.g), 1);
  b.g.compact();
  b.g.verify();
  ASSERT_EQ(b.g.node(0).outputs.size(), 3u);
  EXPECT_EQ(b.g.node(0).outputs[2], inv);
  EXPECT_TRUE(b.g.value(b.g.node(0).outputs[1]).consumers.empty());  // the unused Mean
}

TEST(FuseGelu, TheTanhFormOfGpt2) {
  // 0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x^3))), with x * 0.5 computed first as PyTorch exports it.
  Builder b;
  const ValueId x = b.input("x", {4, 64});
  const ValueId half = b.op("Mul", {x, b.floats({0.5f})}, {4, 64});
  const ValueId cube = b.op("Mul", {b.op("Pow", {x, b.floats({3.0f})}, {4, 64}), b.floats({0.044715f})}, {4, 64});
  const ValueId inner =
      b.op("Mul", {b.op("Add", {x, cube}, {4, 64}), b.floats({static_cast<float>(std::sqrt(2.0 / M_PI))})}, {4, 64});
  const ValueId t1 = b.op("Add", {b.floats({1.0f}), b.op("Tanh", {inner}, {4, 64})}, {4, 64});
  b.g.outputs = {b.op("Mul", {half, t1}, {4, 64})};
  EXPECT_EQ(passes::fuse_gelu(b.g), 1);
  b.g.compact();
  ASSERT_EQ(live_ops(b.g), std::vector<std::string>{"npusim.Gelu"});
  EXPECT_EQ(b.g.node(0).attr("approximate")->s, "tanh");
}

TEST(FuseSoftmax, TheFunctionBodyOnAnInnerAxis) {
  Builder b;
  const ValueId x = b.input("x", {3, 4, 5});
  const ValueId mx =
      b.op("ReduceMax", {x}, {3, 1, 5}, {{"axes", Attribute::of_ints({1})}, {"keepdims", Attribute::of_int(1)}});
  const ValueId e = b.op("Exp", {b.op("Sub", {x, mx}, {3, 4, 5})}, {3, 4, 5});
  const ValueId s = b.op("ReduceSum", {e, b.ints({1})}, {3, 1, 5}, {{"keepdims", Attribute::of_int(1)}});
  b.g.outputs = {b.op("Div", {e, s}, {3, 4, 5})};
  EXPECT_EQ(passes::fuse_softmax(b.g), 1);
  b.g.compact();
  ASSERT_EQ(live_ops(b.g), std::vector<std::string>{"Softmax"});
  EXPECT_EQ(b.g.node(0).attr_int("axis", -1), 1);
}

// ONNX's LogSoftmax function body: s = x - ReduceMax(x); s - Log(ReduceSum(Exp(s))). Also without the max (x is
// then s itself), and not when s is used outside the pattern.
TEST(FuseLogSoftmax, TheFunctionBodyAndTheFormWithoutTheMax) {
  for (const bool with_max : {true, false}) {
    Builder b;
    const ValueId x = b.input("x", {3, 4, 5});
    ValueId s = x;
    if (with_max) {
      const ValueId mx =
          b.op("ReduceMax", {x}, {3, 4, 1}, {{"axes", Attribute::of_ints({2})}, {"keepdims", Attribute::of_int(1)}});
      s = b.op("Sub", {x, mx}, {3, 4, 5});
    }
    const ValueId sum =
        b.op("ReduceSum", {b.op("Exp", {s}, {3, 4, 5}), b.ints({-1})}, {3, 4, 1}, {{"keepdims", Attribute::of_int(1)}});
    b.g.outputs = {b.op("Sub", {s, b.op("Log", {sum}, {3, 4, 1})}, {3, 4, 5})};
    EXPECT_EQ(passes::fuse_log_softmax(b.g), 1) << with_max;
    b.g.compact();
    b.g.verify();
    ASSERT_EQ(live_ops(b.g), std::vector<std::string>{"LogSoftmax"}) << with_max;
    EXPECT_EQ(b.g.node(0).inputs[0], x);
    EXPECT_EQ(b.g.node(0).attr_int("axis", -1), 2);
  }
  {
    Builder b;  // x - max is also an output: it stays, and the LogSoftmax reads it
    const ValueId x = b.input("x", {3, 5});
    const ValueId s = b.op("Sub", {x, b.op("ReduceMax", {x}, {3, 1}, {{"axes", Attribute::of_ints({1})}})}, {3, 5});
    const ValueId sum = b.op("ReduceSum", {b.op("Exp", {s}, {3, 5}), b.ints({1})}, {3, 1});
    b.g.outputs = {b.op("Sub", {s, b.op("Log", {sum}, {3, 1})}, {3, 5}), s};
    EXPECT_EQ(passes::fuse_log_softmax(b.g), 1);
    b.g.compact();
    EXPECT_EQ(live_ops(b.g), (std::vector<std::string>{"ReduceMax", "Sub", "LogSoftmax"}));
  }
  Builder b;  // the exponentials are also an output: nothing fuses
  const ValueId x = b.input("x", {3, 5});
  const ValueId e = b.op("Exp", {x}, {3, 5});
  const ValueId sum = b.op("ReduceSum", {e, b.ints({1})}, {3, 1});
  b.g.outputs = {b.op("Sub", {x, b.op("Log", {sum}, {3, 1})}, {3, 5}), e};
  EXPECT_EQ(passes::fuse_log_softmax(b.g), 0);
}

TEST(FuseAddLayerNorm, TheResidualSumStaysAnOutputWhenUsedAgain) {
  Builder b;
  const ValueId x = b.input("x", {8, 64}), r = b.input("r", {8, 64});
  const ValueId h = b.op("Add", {x, r}, {8, 64});
  const ValueId ln = b.op("LayerNormalization", {h, b.input("gamma", {64}), b.input("beta", {64})}, {8, 64},
                          {{"axis", Attribute::of_int(-1)}});
  b.g.outputs = {b.op("Add", {h, ln}, {8, 64})};  // the pre-LN block's next residual reads h
  EXPECT_EQ(passes::fuse_add_layernorm(b.g), 1);
  b.g.compact();
  b.g.verify();
  EXPECT_EQ(live_ops(b.g), (std::vector<std::string>{"npusim.AddLayerNorm", "Add"}));
  EXPECT_EQ(b.g.node(b.g.topo_order()[0]).outputs, (std::vector<ValueId>{ln, h}));
}

TEST(FuseElementwise, SwigluIsOneExpressionAndSharedValuesStayOutside) {
  Builder b;
  const ValueId gate = b.input("gate", {16, 4096}), up = b.input("up", {16, 4096});
  const ValueId sig = b.op("Sigmoid", {gate}, {16, 4096});
  const ValueId silu = b.op("Mul", {gate, sig}, {16, 4096});
  const ValueId y = b.op("Mul", {silu, up}, {16, 4096});
  const ValueId z = b.op("Add", {b.op("Exp", {y}, {16, 4096}), b.floats({1.0f})}, {16, 4096});
  b.g.outputs = {z, y};  // y is also an output: the Exp/Add chain cannot absorb it
  EXPECT_EQ(passes::fuse_elementwise(b.g), 2);
  b.g.compact();
  b.g.verify();
  std::vector<std::string> exprs;
  for (NodeId id : b.g.topo_order()) exprs.push_back(b.g.node(id).attr("expr")->s);
  EXPECT_EQ(exprs, (std::vector<std::string>{"mul(silu(x0),x1)", "add(exp(x0),1)"}));
}

// An activation with attributes joins a chain as its expression: (x + r) -> LeakyRelu(0.2) -> * 2.
TEST(FuseElementwise, ActivationsWithAttributesJoinAsTheirExpressions) {
  Builder b;
  const ValueId x = b.input("x", {8, 4096}), r = b.input("r", {8, 4096});
  const ValueId act =
      b.op("LeakyRelu", {b.op("Add", {x, r}, {8, 4096})}, {8, 4096}, {{"alpha", Attribute::of_float(0.25f)}});
  b.g.outputs = {b.op("Mul", {act, b.floats({2.0f})}, {8, 4096})};
  EXPECT_EQ(passes::fuse_elementwise(b.g), 1);
  b.g.compact();
  ASSERT_EQ(live_ops(b.g), std::vector<std::string>{"npusim.FusedElementwise"});
  EXPECT_EQ(b.g.node(0).attr("expr")->s, "mul(add(relu(add(x0,x1)),mul(min(add(x0,x1),0),0.25)),2)");
}

// A chain as long as a group may be (a Horner polynomial): each operand's expression is built once, so the pass
// takes linear time (building it twice per node would take 2^31 steps here and time the test out).
TEST(FuseElementwise, ALongChainIsBuiltOnce) {
  Builder b;
  ValueId v = b.input("x", {4, 4096});
  for (int i = 0; i < 31; ++i)
    v = b.op(i % 2 ? "Add" : "Mul", {v, b.floats({0.5f + static_cast<float>(i)})}, {4, 4096});
  b.g.outputs = {v};
  EXPECT_EQ(passes::fuse_elementwise(b.g), 1);
  b.g.compact();
  EXPECT_EQ(live_ops(b.g), std::vector<std::string>{"npusim.FusedElementwise"});
}

// --- Streams and memory --------------------------------------------------------------------------------------------

// x -> s0 -> a; x -> s1 -> b; (a, b) -> s2 -> c: s0 and s1 are independent branches.
Program diamond() {
  Program p;
  auto tensor = [&](const std::string& name) {
    ProgramTensor t;
    t.name = name;
    t.desc = {ops::Shape{1024}, hw::isa::DType::kFp32};
    p.tensors.push_back(t);
    return static_cast<int>(p.tensors.size() - 1);
  };
  const int x = tensor("x"), a = tensor("a"), b = tensor("b"), c = tensor("c");
  p.inputs = {x};
  p.outputs = {c};
  p.steps = {Step{"s0", "relu", {}, {x}, {a}, {}, {}, {}}, Step{"s1", "relu", {}, {x}, {b}, {}, {}, {}},
             Step{"s2", "add", {}, {a, b}, {c}, {}, {}, {}}};
  return p;
}

TEST(Streams, IndependentBranchesGetStreamsAndMeetThroughAnEvent) {
  const Program p = diamond();
  const StreamPlan two = assign_streams(p, 2);
  EXPECT_EQ(two.streams, 2u);
  EXPECT_EQ(two.stream, (std::vector<std::uint32_t>{0, 1, 0}));
  ASSERT_EQ(two.waits[2].size(), 1u);  // s2 waits for s1's event
  EXPECT_EQ(two.waits[2][0], two.event_of[1]);
  EXPECT_EQ(two.event_of[0], -1);  // same stream: no event needed
  EXPECT_FALSE(two.before(0, 1));
  EXPECT_FALSE(two.before(1, 0));
  EXPECT_TRUE(two.before(0, 2));
  EXPECT_TRUE(two.before(1, 2));
  const StreamPlan one = assign_streams(p, 1);
  EXPECT_EQ(one.streams, 1u);
  EXPECT_TRUE(one.before(0, 1));
  EXPECT_TRUE(one.waits[2].empty());
}

TEST(MemoryPlan, BuffersOfConcurrentBranchesNeverShare) {
  // x -> s0 -> a -> s1 -> c and x -> s2 -> b -> s3 -> d. On one stream a is dead before s2 writes b, so they share;
  // on two streams the branches run concurrently and must not.
  Program p;
  for (const char* name : {"x", "a", "b", "c", "d"}) {
    ProgramTensor t;
    t.name = name;
    t.desc = {ops::Shape{1024}, hw::isa::DType::kFp32};
    p.tensors.push_back(t);
  }
  p.inputs = {0};
  p.outputs = {3, 4};
  p.steps = {Step{"s0", "relu", {}, {0}, {1}, {}, {}, {}}, Step{"s1", "relu", {}, {1}, {3}, {}, {}, {}},
             Step{"s2", "relu", {}, {0}, {2}, {}, {}, {}}, Step{"s3", "relu", {}, {2}, {4}, {}, {}, {}}};
  const MemoryPlan one = plan_memory(p, {0, 0, 0, 0}, assign_streams(p, 1));
  const MemoryPlan two = plan_memory(p, {0, 0, 0, 0}, assign_streams(p, 2));
  EXPECT_EQ(one.offset[1], one.offset[2]);
  EXPECT_NE(two.offset[1], two.offset[2]);
  EXPECT_GT(two.arena_bytes, one.arena_bytes);
  // Constants live in their own region, never in the arena.
  ProgramTensor w;
  w.name = "w";
  w.desc = {ops::Shape{256}, hw::isa::DType::kFp32};
  w.constant.assign(1024, 0);
  p.tensors.push_back(w);
  p.steps[3].inputs.push_back(5);
  const MemoryPlan m = plan_memory(p, {0, 0, 0, 0}, assign_streams(p, 1));
  EXPECT_TRUE(m.constant[5]);
  EXPECT_EQ(m.constant_bytes, 1024u);
  EXPECT_EQ(m.arena_bytes, one.arena_bytes);
  EXPECT_EQ(m.peak_bytes(), m.constant_bytes + m.arena_bytes);
}

}  // namespace
}  // namespace npusim::stack::graph
