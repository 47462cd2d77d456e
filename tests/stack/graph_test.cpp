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
      EXPECT_NE(std::string(e.what()).find("node 'bad' (Relu): input 'dangling' is produced by nothing"), std::string::npos) << e.what();
    }
  }
  {
    Small s;
    EXPECT_THROW(s.g.add_node(make("again", "Relu", {s.x}, {s.t})), GraphError);  // t has a producer
    EXPECT_THROW(s.g.add_value("x", ElemType::kFloat16), GraphError);           // names are unique
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
  p.steps = {Step{"n0", "relu", {}, {x}, {a}, {}}, Step{"n1", "relu", {}, {a}, {b}, {}}, Step{"n2", "relu", {}, {b}, {c}, {}}};
  const MemoryPlan m = plan_memory(p, {0, 0, 0});
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
  const MemoryPlan w = plan_memory(p, {0, 8192, 0});
  EXPECT_EQ(w.offset.back(), w.offset[static_cast<std::size_t>(b)]);
  EXPECT_EQ(w.arena_bytes, 2u * 4096 + 8192);  // step 1 holds a, b and its workspace
}

}  // namespace
}  // namespace npusim::stack::graph
