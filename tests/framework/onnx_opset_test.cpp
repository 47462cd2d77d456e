// Models at opsets 18..21 (what PyTorch 2.x's default exporter writes) import as their opset-17 forms: each rewrite
// of stack/framework/onnx_opset.cpp checked on a one-node model, against the shapes ONNX's operator definitions give
// (ONNX Operators.md for Split-18, ReduceMean-18, ReduceMax-18, Gelu-20).
#include <gtest/gtest.h>

#include <onnx/onnx_pb.h>

#include <string>
#include <vector>

#include "common/util/error.hpp"
#include "stack/framework/onnx_import.hpp"

namespace npusim::stack::framework {
namespace {

class Model {
 public:
  explicit Model(int opset) {
    m_.set_ir_version(9);
    auto* op = m_.add_opset_import();
    op->set_domain("");
    op->set_version(opset);
    m_.mutable_graph()->set_name("g");
  }

  Model& input(const std::string& name, std::vector<std::int64_t> dims, int type = onnx::TensorProto::FLOAT) {
    value(m_.mutable_graph()->add_input(), name, dims, type);
    return *this;
  }
  Model& output(const std::string& name, int type = onnx::TensorProto::FLOAT) {
    auto* o = m_.mutable_graph()->add_output();
    o->set_name(name);
    o->mutable_type()->mutable_tensor_type()->set_elem_type(type);
    return *this;
  }
  Model& ints(const std::string& name, std::vector<std::int64_t> v) {
    auto* t = m_.mutable_graph()->add_initializer();
    t->set_name(name);
    t->set_data_type(onnx::TensorProto::INT64);
    t->add_dims(static_cast<std::int64_t>(v.size()));
    for (auto x : v) t->add_int64_data(x);
    return *this;
  }
  onnx::NodeProto& node(const std::string& op, std::vector<std::string> in, std::vector<std::string> out) {
    auto* n = m_.mutable_graph()->add_node();
    n->set_name("n" + std::to_string(m_.graph().node_size()));
    n->set_op_type(op);
    for (auto& s : in) n->add_input(s);
    for (auto& s : out) n->add_output(s);
    return *n;
  }
  static void attr(onnx::NodeProto& n, const std::string& name, std::int64_t v) {
    auto* a = n.add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::INT);
    a->set_i(v);
  }
  static void attr(onnx::NodeProto& n, const std::string& name, const std::string& v) {
    auto* a = n.add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::STRING);
    a->set_s(v);
  }
  ImportedModel import() const {
    std::string bytes;
    m_.SerializeToString(&bytes);
    return import_onnx_bytes(bytes, "m.onnx");
  }
  std::string error() const {
    try {
      import();
    } catch (const InputError& e) {
      return e.what();
    }
    return "no error";
  }

 private:
  static void value(onnx::ValueInfoProto* vi, const std::string& name, const std::vector<std::int64_t>& dims, int type) {
    vi->set_name(name);
    auto* tt = vi->mutable_type()->mutable_tensor_type();
    tt->set_elem_type(type);
    for (auto d : dims) tt->mutable_shape()->add_dim()->set_dim_value(d);
  }
  onnx::ModelProto m_;
};

std::string shape_of(const ImportedModel& im, const std::string& value) {
  const auto& v = im.graph.value(im.graph.find_value(value));
  return v.shape ? graph::dims_string(*v.shape) : "unknown";
}

const graph::Node& only_node(const ImportedModel& im) {
  EXPECT_EQ(im.graph.live_nodes(), 1u);
  return im.graph.node(0);
}

TEST(OnnxOpset, ReductionAxesInputBecomesTheAttribute) {
  Model m(18);
  m.input("x", {2, 3, 4}).ints("axes", {-1}).output("y");
  m.node("ReduceMean", {"x", "axes"}, {"y"});
  const ImportedModel im = m.import();
  EXPECT_EQ(im.opset, 18);  // the file's opset is reported as written
  EXPECT_EQ(im.adapted, 1);
  const graph::Node& n = only_node(im);
  EXPECT_EQ(n.op_type, "ReduceMean");
  EXPECT_EQ(n.inputs.size(), 1u);
  ASSERT_NE(n.attr("axes"), nullptr);
  EXPECT_EQ(n.attr("axes")->ints, (std::vector<std::int64_t>{-1}));
  EXPECT_EQ(shape_of(im, "y"), "[2,3,1]");  // keepdims defaults to 1
}

TEST(OnnxOpset, ReductionAxesFromAConstantNode) {
  Model m(20);
  m.input("x", {2, 3, 4}).output("y");
  onnx::NodeProto& c = m.node("Constant", {}, {"axes"});
  auto* a = c.add_attribute();
  a->set_name("value_ints");
  a->set_type(onnx::AttributeProto::INTS);
  a->add_ints(1);
  onnx::NodeProto& r = m.node("ReduceMax", {"x", "axes"}, {"y"});
  Model::attr(r, "keepdims", 0);
  const ImportedModel im = m.import();
  EXPECT_EQ(shape_of(im, "y"), "[2,4]");
}

TEST(OnnxOpset, NoAxesWithNoopIsTheIdentityAndWithoutReducesEverything) {
  {
    Model m(18);
    m.input("x", {2, 3}).output("y");
    Model::attr(m.node("ReduceMax", {"x"}, {"y"}), "noop_with_empty_axes", 1);
    const ImportedModel im = m.import();
    EXPECT_EQ(only_node(im).op_type, "Identity");
    EXPECT_EQ(shape_of(im, "y"), "[2,3]");
  }
  {
    Model m(18);
    m.input("x", {2, 3}).output("y");
    m.node("ReduceMean", {"x"}, {"y"});
    const ImportedModel im = m.import();
    EXPECT_EQ(only_node(im).op_type, "ReduceMean");
    EXPECT_EQ(shape_of(im, "y"), "[1,1]");
  }
}

TEST(OnnxOpset, ReductionOverComputedAxesIsRefusedByName) {
  Model m(18);
  m.input("x", {2, 3}).input("axes", {1}, onnx::TensorProto::INT64).output("y");
  m.node("ReduceMean", {"x", "axes"}, {"y"});
  const std::string e = m.error();
  EXPECT_NE(e.find("node 'n1' (ReduceMean): its axes ('axes') must be a constant"), std::string::npos) << e;
}

TEST(OnnxOpset, SplitNumOutputs) {
  {  // 7 into 3: ceil(7 / 3) = 3, 3, and the rest 1 (Split-18)
    Model m(18);
    m.input("x", {7, 2}).output("a").output("b").output("c");
    Model::attr(m.node("Split", {"x"}, {"a", "b", "c"}), "num_outputs", 3);
    const ImportedModel im = m.import();
    EXPECT_EQ(shape_of(im, "a"), "[3,2]");
    EXPECT_EQ(shape_of(im, "b"), "[3,2]");
    EXPECT_EQ(shape_of(im, "c"), "[1,2]");
    EXPECT_EQ(only_node(im).attr("num_outputs"), nullptr);
  }
  {  // 6 into 3 along the last axis: the even split of opset 13, no sizes needed
    Model m(18);
    m.input("x", {2, 6}).output("a").output("b").output("c");
    onnx::NodeProto& n = m.node("Split", {"x"}, {"a", "b", "c"});
    Model::attr(n, "num_outputs", 3);
    Model::attr(n, "axis", -1);
    const ImportedModel im = m.import();
    EXPECT_EQ(only_node(im).inputs.size(), 1u);
    EXPECT_EQ(shape_of(im, "c"), "[2,2]");
  }
}

TEST(OnnxOpset, GeluBecomesTheEnginesGeluWithItsShape) {
  Model m(20);
  m.input("x", {4, 8}).output("y");
  Model::attr(m.node("Gelu", {"x"}, {"g"}), "approximate", std::string("tanh"));
  m.node("Relu", {"g"}, {"y"});  // downstream inference needs Gelu's output shape
  const ImportedModel im = m.import();
  const graph::Node& gelu = im.graph.node(0);
  EXPECT_EQ(gelu.domain, "npusim");
  EXPECT_EQ(gelu.op_type, "Gelu");
  EXPECT_EQ(gelu.attr("approximate")->s, "tanh");
  EXPECT_EQ(shape_of(im, "g"), "[4,8]");
  EXPECT_EQ(shape_of(im, "y"), "[4,8]");
}

TEST(OnnxOpset, CastDropsSaturate) {
  Model m(19);
  m.input("x", {3}).output("y", onnx::TensorProto::FLOAT16);
  onnx::NodeProto& n = m.node("Cast", {"x"}, {"y"});
  Model::attr(n, "to", static_cast<std::int64_t>(onnx::TensorProto::FLOAT16));
  Model::attr(n, "saturate", 1);
  const ImportedModel im = m.import();
  EXPECT_EQ(only_node(im).attr("saturate"), nullptr);
  EXPECT_EQ(im.graph.value(im.graph.find_value("y")).type, graph::ElemType::kFloat16);
}

TEST(OnnxOpset, Opset17AndOlderAreLeftAlone) {
  Model m(17);
  m.input("x", {2, 3}).output("y");
  onnx::NodeProto& n = m.node("ReduceMean", {"x"}, {"y"});
  auto* a = n.add_attribute();
  a->set_name("axes");
  a->set_type(onnx::AttributeProto::INTS);
  a->add_ints(0);
  const ImportedModel im = m.import();
  EXPECT_EQ(im.adapted, 0);
  EXPECT_EQ(shape_of(im, "y"), "[1,3]");
}

TEST(OnnxOpset, NewerThanTwentyOneIsRefused) {
  Model m(22);
  m.input("x", {3}).output("y");
  m.node("Relu", {"x"}, {"y"});
  const std::string e = m.error();
  EXPECT_NE(e.find("m.onnx: opset 22 is newer than npusim reads (up to 21"), std::string::npos) << e;
}

}  // namespace
}  // namespace npusim::stack::framework
