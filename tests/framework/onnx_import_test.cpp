// ONNX import: models built here with the ONNX protobuf API (and ONNX node tests from Debian's libonnx-testdata)
// become graphs with the right values, constants, attributes and inferred shapes; bad models give errors naming
// the model and the tensor or node.
#include <gtest/gtest.h>

#include <onnx/onnx_pb.h>

#include <cstring>
#include <filesystem>

#include "common/util/error.hpp"
#include "stack/framework/onnx_import.hpp"

namespace npusim::stack::framework {
namespace {

using graph::ElemType;

void set_tensor_type(onnx::ValueInfoProto* vi, const std::string& name, int elem, const std::vector<std::string>& dims) {
  vi->set_name(name);
  auto* tt = vi->mutable_type()->mutable_tensor_type();
  tt->set_elem_type(elem);
  for (const auto& d : dims) {
    auto* dim = tt->mutable_shape()->add_dim();
    if (std::isdigit(static_cast<unsigned char>(d[0]))) dim->set_dim_value(std::stoll(d));
    else dim->set_dim_param(d);
  }
}

// y = Relu(x @ W + b) with x: [batch, 4], W: [4, 3] (raw data), b: [3] (float_data); y's shape left to inference.
onnx::ModelProto small_model() {
  onnx::ModelProto m;
  m.set_ir_version(8);
  m.set_producer_name("npusim-test");
  auto* op = m.add_opset_import();
  op->set_domain("");
  op->set_version(17);
  auto* g = m.mutable_graph();
  g->set_name("small");
  set_tensor_type(g->add_input(), "x", onnx::TensorProto::FLOAT, {"batch", "4"});
  auto* w = g->add_initializer();
  w->set_name("W");
  w->set_data_type(onnx::TensorProto::FLOAT);
  w->add_dims(4);
  w->add_dims(3);
  std::vector<float> wv(12);
  for (int i = 0; i < 12; ++i) wv[i] = 0.5f * i;
  w->set_raw_data(std::string(reinterpret_cast<const char*>(wv.data()), 48));
  auto* b = g->add_initializer();
  b->set_name("b");
  b->set_data_type(onnx::TensorProto::FLOAT);
  b->add_dims(3);
  for (float v : {1.0f, 2.0f, 3.0f}) b->add_float_data(v);
  auto add_node = [&](const std::string& name, const std::string& type, std::vector<std::string> in, std::vector<std::string> out) {
    auto* n = g->add_node();
    n->set_name(name);
    n->set_op_type(type);
    for (auto& s : in) n->add_input(s);
    for (auto& s : out) n->add_output(s);
    return n;
  };
  add_node("mm", "MatMul", {"x", "W"}, {"t"});
  add_node("add", "Add", {"t", "b"}, {"u"});
  auto* relu = add_node("act", "LeakyRelu", {"u"}, {"y"});
  auto* alpha = relu->add_attribute();
  alpha->set_name("alpha");
  alpha->set_type(onnx::AttributeProto::FLOAT);
  alpha->set_f(0.25f);
  auto* out = g->add_output();
  out->set_name("y");
  out->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::FLOAT);
  return m;
}

std::string bytes_of(const onnx::ModelProto& m) {
  std::string s;
  m.SerializeToString(&s);
  return s;
}

TEST(OnnxImport, ValuesConstantsAttributesAndInferredShapes) {
  const ImportedModel im = import_onnx_bytes(bytes_of(small_model()), "small.onnx");
  const graph::Graph& g = im.graph;
  EXPECT_EQ(im.opset, 17);
  EXPECT_EQ(im.producer, "npusim-test");
  ASSERT_EQ(g.live_nodes(), 3u);
  ASSERT_EQ(g.inputs.size(), 1u);  // initializers are not graph inputs
  EXPECT_EQ(graph::dims_string(*g.value(g.inputs[0]).shape), "[batch,4]");
  const graph::Value& w = g.value(g.find_value("W"));
  ASSERT_TRUE(w.constant);
  EXPECT_EQ(w.constant->as_doubles()[11], 5.5);
  EXPECT_EQ(g.value(g.find_value("b")).constant->as_doubles(), (std::vector<double>{1, 2, 3}));
  // ONNX shape inference: t and y are [batch, 3] in float32.
  const graph::Value& y = g.value(g.outputs[0]);
  ASSERT_TRUE(y.shape);
  EXPECT_EQ(graph::dims_string(*y.shape), "[batch,3]");
  EXPECT_EQ(y.type, ElemType::kFloat32);
  const graph::Node& act = g.node(g.value(g.outputs[0]).producer);
  EXPECT_EQ(act.op_type, "LeakyRelu");
  EXPECT_FLOAT_EQ(act.attr_float("alpha", 0), 0.25f);
  EXPECT_EQ(unsupported_nodes(g, {"MatMul", "Add"}), std::vector<std::string>{"act (LeakyRelu)"});
}

TEST(OnnxImport, BadModelsAreClearErrors) {
  auto message = [](const std::string& bytes) {
    try {
      import_onnx_bytes(bytes, "m.onnx");
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message("this is not a protobuf").find("m.onnx: not an ONNX model"), std::string::npos);
  EXPECT_NE(message("").find("not an ONNX model"), std::string::npos);
  {
    onnx::ModelProto m = small_model();
    auto* w = m.mutable_graph()->mutable_initializer(0);
    w->clear_raw_data();
    w->set_data_location(onnx::TensorProto::EXTERNAL);
    EXPECT_NE(message(bytes_of(m)).find("tensor 'W': external data without a location"), std::string::npos) << message(bytes_of(m));
  }
  {
    onnx::ModelProto m = small_model();
    m.mutable_graph()->mutable_initializer(1)->add_float_data(4.0f);  // 4 values for 3 elements
    EXPECT_NE(message(bytes_of(m)).find("tensor 'b' has 4 values for 3 elements"), std::string::npos) << message(bytes_of(m));
  }
  {
    onnx::ModelProto m = small_model();
    m.mutable_graph()->mutable_node(1)->set_input(0, "missing");  // Add reads a value nothing produces
    const std::string e = message(bytes_of(m));
    EXPECT_NE(e.find("node 'add' (Add): input 'missing' is produced by nothing"), std::string::npos) << e;
  }
  EXPECT_THROW(import_onnx("/nonexistent/model.onnx"), InputError);
}

// An ONNX node test from Debian's libonnx-testdata imports with its shapes.
TEST(OnnxImport, NodeTestsFromLibonnxTestdata) {
  const std::string path = "/usr/share/libonnx-testdata/data/node/test_layer_normalization_2d_axis0/model.onnx";
  ASSERT_TRUE(std::filesystem::exists(path)) << "libonnx-testdata is installed by scripts/setup.sh";
  const ImportedModel im = import_onnx(path);
  ASSERT_EQ(im.graph.live_nodes(), 1u);
  const graph::Node& n = im.graph.node(0);
  EXPECT_EQ(n.op_type, "LayerNormalization");
  EXPECT_EQ(n.attr_int("axis", -1), 0);
  EXPECT_TRUE(im.graph.value(im.graph.inputs[0]).shape.has_value());
}

}  // namespace
}  // namespace npusim::stack::framework
