// External data (ONNX's TensorProto.external_data, the NAME.onnx.data torch.onnx.export writes by default): read
// from beside the model at its offset, and refused, naming the tensor and the location, when it is missing, short,
// the wrong size, or outside the model's directory.
#include <gtest/gtest.h>

#include <onnx/onnx_pb.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "common/util/error.hpp"
#include "stack/framework/onnx_import.hpp"

namespace npusim::stack::framework {
namespace {

namespace fs = std::filesystem;

class ExternalData : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("npusim_external_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_ / "model");
  }
  void TearDown() override { fs::remove_all(dir_); }

  // y = x + W, W: [2, 3] float32 stored in `location` at `offset` (the file holds `file_bytes` of W's values).
  std::string write_model(const std::string& location, std::uint64_t offset, const std::string& length = "") {
    onnx::ModelProto m;
    m.set_ir_version(9);
    auto* op = m.add_opset_import();
    op->set_domain("");
    op->set_version(20);
    auto* g = m.mutable_graph();
    g->set_name("ext");
    auto* x = g->add_input();
    x->set_name("x");
    x->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::FLOAT);
    for (int d : {2, 3}) x->mutable_type()->mutable_tensor_type()->mutable_shape()->add_dim()->set_dim_value(d);
    auto* w = g->add_initializer();
    w->set_name("W");
    w->set_data_type(onnx::TensorProto::FLOAT);
    w->add_dims(2);
    w->add_dims(3);
    w->set_data_location(onnx::TensorProto::EXTERNAL);
    auto kv = [&](const std::string& k, const std::string& v) {
      auto* e = w->add_external_data();
      e->set_key(k);
      e->set_value(v);
    };
    kv("location", location);
    kv("offset", std::to_string(offset));
    if (!length.empty()) kv("length", length);
    auto* n = g->add_node();
    n->set_name("add");
    n->set_op_type("Add");
    n->add_input("x");
    n->add_input("W");
    n->add_output("y");
    g->add_output()->set_name("y");
    const fs::path path = dir_ / "model" / "m.onnx";
    std::ofstream(path, std::ios::binary) << m.SerializeAsString();
    return path.string();
  }

  void write_data(const fs::path& file, std::uint64_t offset, int values) {
    std::string bytes(offset, 'x');
    for (int i = 0; i < values; ++i) {
      const float v = 1.5f * i;
      bytes.append(reinterpret_cast<const char*>(&v), 4);
    }
    std::ofstream(file, std::ios::binary) << bytes;
  }

  std::string error(const std::string& path) {
    try {
      import_onnx(path);
    } catch (const InputError& e) {
      return e.what();
    }
    return "no error";
  }

  fs::path dir_;
};

TEST_F(ExternalData, ReadFromBesideTheModelAtItsOffset) {
  write_data(dir_ / "model" / "m.onnx.data", 64, 6);
  const ImportedModel im = import_onnx(write_model("m.onnx.data", 64, "24"));
  const graph::Value& w = im.graph.value(im.graph.find_value("W"));
  ASSERT_TRUE(w.constant);
  EXPECT_EQ(w.constant->as_doubles(), (std::vector<double>{0, 1.5, 3, 4.5, 6, 7.5}));
}

TEST_F(ExternalData, InASubdirectoryOfTheModel) {
  fs::create_directories(dir_ / "model" / "weights");
  write_data(dir_ / "model" / "weights" / "w.bin", 0, 6);
  const ImportedModel im = import_onnx(write_model("weights/w.bin", 0));
  EXPECT_EQ(im.graph.value(im.graph.find_value("W")).constant->as_doubles()[5], 7.5);
}

TEST_F(ExternalData, MissingShortOrWrongSizeAreClearErrors) {
  const std::string path = write_model("m.onnx.data", 0);
  EXPECT_NE(error(path).find("tensor 'W': cannot read its external data file 'm.onnx.data'"), std::string::npos) << error(path);
  write_data(dir_ / "model" / "m.onnx.data", 0, 5);  // 20 B for a 24 B tensor
  EXPECT_NE(error(path).find("external data [0, 24) lies past the end of 'm.onnx.data' (20 B)"), std::string::npos) << error(path);
  write_data(dir_ / "model" / "m.onnx.data", 0, 6);
  const std::string wrong = write_model("m.onnx.data", 0, "20");
  EXPECT_NE(error(wrong).find("external data length 20 B, but its dims and type need 24 B"), std::string::npos) << error(wrong);
  const std::string bad = write_model("m.onnx.data", 0, "twelve");
  EXPECT_NE(error(bad).find("external data length 'twelve' is not a size"), std::string::npos) << error(bad);
}

TEST_F(ExternalData, ConfinedToTheModelsDirectory) {
  write_data(dir_ / "outside.bin", 0, 6);
  const std::string up = write_model("../outside.bin", 0);
  EXPECT_NE(error(up).find("location '../outside.bin' leaves the model's directory"), std::string::npos) << error(up);
  const std::string abs = write_model((dir_ / "outside.bin").string(), 0);
  EXPECT_NE(error(abs).find("is absolute"), std::string::npos) << error(abs);
  fs::create_symlink(dir_ / "outside.bin", dir_ / "model" / "link.bin");
  const std::string link = write_model("link.bin", 0);
  EXPECT_NE(error(link).find("location 'link.bin' leads out of the model's directory"), std::string::npos) << error(link);
}

TEST_F(ExternalData, RefusedForAModelGivenAsBytes) {
  write_data(dir_ / "model" / "m.onnx.data", 0, 6);
  std::ifstream f(write_model("m.onnx.data", 0), std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  try {
    import_onnx_bytes(bytes, "bytes.onnx");
    FAIL() << "no error";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("bytes.onnx: tensor 'W': keeps its data in 'm.onnx.data', but the model was not read from a file"),
              std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace npusim::stack::framework
