// The graph IR: producer/consumer maps through rewrites, topological order, and the verifier's errors, which name
// the node or value.
#include <gtest/gtest.h>

#include <cstring>

#include "stack/graph/graph.hpp"

namespace npusim::stack::graph {
namespace {

Node make(const std::string& name, const std::string& op, std::vector<ValueId> in, std::vector<ValueId> out) {
  Node n;
  n.name = name;
  n.op_type = op;
  n.inputs = std::move(in);
  n.outputs = std::move(out);
  return n;
}

// x -> MatMul(w) -> Add(b) -> y, with w and b constants.
struct Small {
  Graph g;
  ValueId x, w, b, t, y;
  NodeId mm, add;
  Small() {
    x = g.add_value("x", ElemType::kFloat16, Dims{Dim::sym("batch"), Dim::of(64)});
    Tensor wt{ElemType::kFloat32, {64, 32}, std::vector<std::uint8_t>(64 * 32 * 4, 0)};
    w = g.add_constant("w", wt);
    b = g.add_constant("b", Tensor{ElemType::kFloat32, {32}, std::vector<std::uint8_t>(32 * 4, 0)});
    t = g.add_value("t", ElemType::kFloat16);
    y = g.add_value("y", ElemType::kFloat16);
    mm = g.add_node(make("mm", "MatMul", {x, w}, {t}));
    add = g.add_node(make("add", "Add", {t, b}, {y}));
    g.inputs = {x};
    g.outputs = {y};
  }
};

// A pass removes what it fuses, then adds the fused node: the fused node stands for the removed nodes, through
// earlier fusions too; removals that fuse nothing (folding, dead code) are forgotten.
TEST(GraphIr, AFusedNodeStandsForTheNodesItReplaced) {
  Small s;
  EXPECT_EQ(s.g.node(s.mm).sources(), std::vector<std::string>{"MatMul mm"});
  s.g.remove_node(s.add);
  s.g.remove_node(s.mm);
  Node f = make("mmb", "MatMulBias", {s.x, s.w, s.b}, {s.y});
  f.domain = "npusim";
  const NodeId fused = s.g.add_node(f);
  EXPECT_EQ(s.g.node(fused).origin, (std::vector<std::string>{"Add add", "MatMul mm"}));
  s.g.remove_node(fused);
  const NodeId again = s.g.add_node(make("again", "Relu", {s.x}, {s.y}));
  EXPECT_EQ(s.g.node(again).sources(), (std::vector<std::string>{"Add add", "MatMul mm"}));
  const ValueId z = s.g.add_value("z", ElemType::kFloat16);
  const NodeId dead = s.g.add_node(make("dead", "Neg", {s.y}, {z}));
  EXPECT_EQ(s.g.node(dead).sources(), std::vector<std::string>{"Neg dead"});  // nothing removed before it
  s.g.remove_node(dead);
  s.g.forget_removed();
  const ValueId z2 = s.g.add_value("z2", ElemType::kFloat16);
  EXPECT_EQ(s.g.node(s.g.add_node(make("later", "Abs", {s.y}, {z2}))).sources(), std::vector<std::string>{"Abs later"});
}

TEST(GraphIr, MapsOrderAndVerify) {
  Small s;
  s.g.verify();
  EXPECT_EQ(s.g.value(s.t).producer, s.mm);
  EXPECT_EQ(s.g.value(s.t).consumers, std::vector<NodeId>{s.add});
  EXPECT_EQ(s.g.topo_order(), (std::vector<NodeId>{s.mm, s.add}));
  EXPECT_EQ(dims_string(*s.g.value(s.x).shape), "[batch,64]");
  EXPECT_EQ(s.g.find_value("w"), s.w);
  EXPECT_EQ(s.g.find_value("nope"), kNoValue);
  EXPECT_EQ(s.g.value(s.w).constant->elements(), 64 * 32);
}

TEST(GraphIr, RewritesKeepTheMapsConsistent) {
  Small s;
  // Replace MatMul + Add by one fused node.
  const ValueId y2 = s.g.add_value("y2", ElemType::kFloat16);
  s.g.add_node(make("fused", "MatMulBias", {s.x, s.w, s.b}, {y2}));
  s.g.replace_uses(s.y, y2);
  s.g.remove_node(s.add);
  s.g.remove_node(s.mm);
  EXPECT_EQ(s.g.outputs, std::vector<ValueId>{y2});
  EXPECT_TRUE(s.g.value(s.t).consumers.empty());
  EXPECT_EQ(s.g.value(s.t).producer, -1);
  s.g.compact();
  ASSERT_EQ(s.g.node_count(), 1u);
  EXPECT_EQ(s.g.node(0).op_type, "MatMulBias");
  EXPECT_EQ(s.g.value(y2).producer, 0);
  EXPECT_EQ(s.g.value(s.x).consumers, std::vector<NodeId>{0});
  s.g.verify();
}

TEST(GraphIr, TheVerifierNamesWhatIsWrong) {
  {
    Small s;
    const ValueId dangling = s.g.add_value("dangling", ElemType::kFloat16);
    const ValueId z = s.g.add_value("z", ElemType::kFloat16);
    s.g.add_node(make("bad", "Relu", {dangling}, {z}));
    try {
      s.g.verify();
      FAIL();
    } catch (const GraphError& e) {
      EXPECT_NE(std::string(e.what()).find("node 'bad' (Relu): input 'dangling' is produced by nothing"),
                std::string::npos)
          << e.what();
    }
  }
  {
    Small s;
    EXPECT_THROW(s.g.add_node(make("again", "Relu", {s.x}, {s.t})), GraphError);  // t has a producer
    EXPECT_THROW(s.g.add_value("x", ElemType::kFloat16), GraphError);             // names are unique
  }
  {
    Graph g;
    const ValueId a = g.add_value("a", ElemType::kFloat32), b = g.add_value("b", ElemType::kFloat32);
    g.add_node(make("n1", "Relu", {b}, {a}));
    g.add_node(make("n2", "Relu", {a}, {b}));
    g.outputs = {a};
    try {
      g.verify();
      FAIL();
    } catch (const GraphError& e) {
      EXPECT_NE(std::string(e.what()).find("cycle through node 'n1'"), std::string::npos) << e.what();
    }
  }
}

TEST(GraphIr, ConstantsDecodeToNumbers) {
  Tensor t{ElemType::kInt64, {3}, std::vector<std::uint8_t>(24)};
  const std::int64_t v[3] = {-1, 2, 1LL << 60};
  std::memcpy(t.bytes.data(), v, 24);
  EXPECT_EQ(t.as_ints(), (std::vector<std::int64_t>{-1, 2, 1LL << 60}));
  Tensor f{ElemType::kFloat32, {2}, std::vector<std::uint8_t>(8)};
  const float fv[2] = {0.5f, -3.0f};
  std::memcpy(f.bytes.data(), fv, 8);
  EXPECT_EQ(f.as_doubles(), (std::vector<double>{0.5, -3.0}));
}

}  // namespace
}  // namespace npusim::stack::graph

#include "stack/graph/memory_plan.hpp"

namespace npusim::stack::graph {
namespace {

// A chain x -> s0 -> a -> s1 -> b -> s2 -> c (output): a is dead once s1 ran, so c can take a's place; x (an input)
// lives until s0 only, but inputs are copied in before the first step, so b may reuse x's memory, not a's.
TEST(MemoryPlan, BuffersWithDisjointLifetimesShareMemory) {
  Program p;
  auto tensor = [&](const std::string& name, std::uint64_t n) {
    ProgramTensor t;
    t.name = name;
    t.desc = {ops::Shape{n}, hw::isa::DType::kFp32};
    p.tensors.push_back(t);
    return static_cast<int>(p.tensors.size() - 1);
  };
  const int x = tensor("x", 1024), a = tensor("a", 1024), b = tensor("b", 1024), c = tensor("c", 1024);
  p.inputs = {x};
  p.outputs = {c};
  p.steps = {Step{"n0", "relu", {}, {x}, {a}, {}, {}, {}}, Step{"n1", "relu", {}, {a}, {b}, {}, {}, {}},
             Step{"n2", "relu", {}, {b}, {c}, {}, {}, {}}};
  const MemoryPlan m = plan_memory(p, {0, 0, 0}, assign_streams(p, 1));
  EXPECT_EQ(m.naive_bytes, 4u * 4096);
  EXPECT_EQ(m.arena_bytes, 2u * 4096);  // never more than two live at once
  EXPECT_NE(m.offset[static_cast<std::size_t>(x)], m.offset[static_cast<std::size_t>(a)]);
  EXPECT_NE(m.offset[static_cast<std::size_t>(a)], m.offset[static_cast<std::size_t>(b)]);
  EXPECT_NE(m.offset[static_cast<std::size_t>(b)], m.offset[static_cast<std::size_t>(c)]);
  // A view shares its base's offset; a workspace lives for its step only.
  ProgramTensor v;
  v.name = "view";
  v.desc = {ops::Shape{32, 32}, hw::isa::DType::kFp32};
  v.alias = b;
  p.tensors.push_back(v);
  const MemoryPlan w = plan_memory(p, {0, 8192, 0}, assign_streams(p, 1));
  EXPECT_EQ(w.offset.back(), w.offset[static_cast<std::size_t>(b)]);
  EXPECT_EQ(w.arena_bytes, 2u * 4096 + 8192);  // step 1 holds a, b and its workspace
}

}  // namespace
}  // namespace npusim::stack::graph

#include "stack/graph/passes/passes.hpp"

namespace npusim::stack::graph {
namespace {

// q, k, v [1, 2, 16, 64] -> Transpose(k) -> MatMul -> Div(8) -> Softmax -> MatMul(v).
Graph attention_graph(bool scores_also_output) {
  Graph g;
  const Dims shape{Dim::of(1), Dim::of(2), Dim::of(16), Dim::of(64)};
  const Dims kt_shape{Dim::of(1), Dim::of(2), Dim::of(64), Dim::of(16)};
  const Dims s_shape{Dim::of(1), Dim::of(2), Dim::of(16), Dim::of(16)};
  const ValueId q = g.add_value("q", ElemType::kFloat16, shape), k = g.add_value("k", ElemType::kFloat16, shape),
                v = g.add_value("v", ElemType::kFloat16, shape);
  Tensor eight{ElemType::kFloat32, {}, std::vector<std::uint8_t>(4)};
  const float e = 8.0f;
  std::memcpy(eight.bytes.data(), &e, 4);
  const ValueId c = g.add_constant("eight", eight);
  const ValueId kt = g.add_value("kt", ElemType::kFloat16, kt_shape), s = g.add_value("s", ElemType::kFloat16, s_shape),
                x = g.add_value("x", ElemType::kFloat16, s_shape), p = g.add_value("p", ElemType::kFloat16, s_shape),
                y = g.add_value("y", ElemType::kFloat16, shape);
  Node tr = make("tr", "Transpose", {k}, {kt});
  Attribute perm;
  perm.kind = Attribute::Kind::kInts;
  perm.ints = {0, 1, 3, 2};
  tr.attrs["perm"] = perm;
  g.add_node(tr);
  g.add_node(make("qk", "MatMul", {q, kt}, {s}));
  g.add_node(make("scale", "Div", {s, c}, {x}));
  g.add_node(make("softmax", "Softmax", {x}, {p}));
  g.add_node(make("pv", "MatMul", {p, v}, {y}));
  g.inputs = {q, k, v};
  g.outputs = {y};
  if (scores_also_output) g.outputs.push_back(s);
  return g;
}

TEST(FuseAttention, TheChainBecomesOneNodeWithItsScale) {
  Graph g = attention_graph(false);
  EXPECT_EQ(passes::fuse_attention(g), 1);
  g.compact();
  g.verify();
  ASSERT_EQ(g.live_nodes(), 1u);
  const Node& fa = g.node(0);
  EXPECT_EQ(fa.op_type, "FlashAttention");
  EXPECT_EQ(fa.domain, "npusim");
  EXPECT_FLOAT_EQ(fa.attr_float("scale", 0), 0.125f);
  EXPECT_EQ(fa.attr_int("causal", -1), 0);
  EXPECT_EQ(g.value(fa.inputs[1]).name, "k");  // the Transpose is absorbed
  EXPECT_EQ(g.value(fa.outputs[0]).name, "y");
}

TEST(FuseAttention, AnIntermediateUsedElsewhereKeepsTheChain) {
  Graph g = attention_graph(true);  // the scores are also a graph output
  EXPECT_EQ(passes::fuse_attention(g), 0);
  EXPECT_EQ(g.live_nodes(), 5u);
}

}  // namespace
}  // namespace npusim::stack::graph
