// Tensors whose bytes live in a file beside the model (ONNX's external data: TensorProto.external_data holds
// `location`, `offset`, `length`). torch.onnx.export in PyTorch 2.x writes MODEL.onnx.data by default.
#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>

#include "common/util/error.hpp"
#include "stack/framework/onnx_model.hpp"

namespace npusim::stack::framework {

namespace fs = std::filesystem;

namespace {

std::uint64_t parse_size(const std::string& text, const std::string& where, const std::string& key) {
  std::size_t used = 0;
  unsigned long long v = 0;
  try {
    v = std::stoull(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used == 0 || used != text.size() || text[0] == '-') throw InputError(where + ": external data " + key + " '" + text + "' is not a size");
  return v;
}

class Loader {
 public:
  Loader(const std::string& model_dir, const std::string& what) : dir_(model_dir), what_(what) {}

  void load(onnx::TensorProto& t) {
    if (t.data_location() != onnx::TensorProto::EXTERNAL && t.external_data_size() == 0) return;
    const std::string where = what_ + ": tensor '" + t.name() + "'";
    std::string location;
    std::uint64_t offset = 0;
    std::optional<std::uint64_t> length;
    for (const auto& kv : t.external_data()) {
      if (kv.key() == "location") location = kv.value();
      else if (kv.key() == "offset") offset = parse_size(kv.value(), where, "offset");
      else if (kv.key() == "length") length = parse_size(kv.value(), where, "length");
    }
    if (location.empty()) throw InputError(where + ": external data without a location");
    if (dir_.empty()) throw InputError(where + ": keeps its data in '" + location + "', but the model was not read from a file");
    const graph::ElemType type = elem_type(t.data_type());
    if (type == graph::ElemType::kUndefined) throw InputError(where + ": unsupported element type (" + std::to_string(t.data_type()) + ") for external data");
    std::uint64_t bytes = graph::elem_bytes(type);
    for (auto d : t.dims()) {
      if (d < 0) throw InputError(where + ": negative dim " + std::to_string(d));
      if (d != 0 && bytes > UINT64_MAX / static_cast<std::uint64_t>(d)) throw InputError(where + ": its dims overflow a size");
      bytes *= static_cast<std::uint64_t>(d);
    }
    if (length && *length != bytes)
      throw InputError(where + ": external data length " + std::to_string(*length) + " B, but its dims and type need " + std::to_string(bytes) + " B");
    const fs::path file = confined(location, where);
    std::error_code ec;
    const std::uint64_t size = fs::file_size(file, ec);
    if (ec) throw InputError(where + ": cannot read its external data file '" + location + "' (" + ec.message() + ")");
    if (offset > size || bytes > size - offset)
      throw InputError(where + ": external data [" + std::to_string(offset) + ", " + std::to_string(offset + bytes) + ") lies past the end of '" +
                       location + "' (" + std::to_string(size) + " B)");
    std::ifstream& in = stream(file, where, location);
    std::string data(bytes, '\0');
    in.seekg(static_cast<std::streamoff>(offset));
    in.read(data.data(), static_cast<std::streamsize>(bytes));
    if (!in) throw InputError(where + ": cannot read " + std::to_string(bytes) + " B at offset " + std::to_string(offset) + " of '" + location + "'");
    t.clear_external_data();
    t.set_data_location(onnx::TensorProto::DEFAULT);
    t.set_raw_data(std::move(data));
  }

 private:
  // The location as a path inside the model's directory: relative, no "..", and not a link that leads out of it.
  fs::path confined(const std::string& location, const std::string& where) const {
    const fs::path rel(location);
    if (rel.is_absolute() || rel.has_root_name()) throw InputError(where + ": external data location '" + location + "' is absolute (it must be beside the model)");
    for (const auto& part : rel)
      if (part == "..") throw InputError(where + ": external data location '" + location + "' leaves the model's directory");
    std::error_code ec;
    const fs::path base = fs::weakly_canonical(fs::path(dir_), ec);
    const fs::path file = fs::weakly_canonical(fs::path(dir_) / rel, ec);
    const auto [b, f] = std::mismatch(base.begin(), base.end(), file.begin(), file.end());
    if (ec || b != base.end()) throw InputError(where + ": external data location '" + location + "' leads out of the model's directory");
    return file;
  }

  std::ifstream& stream(const fs::path& file, const std::string& where, const std::string& location) {
    auto it = files_.find(file.string());
    if (it == files_.end()) {
      it = files_.emplace(file.string(), std::ifstream(file, std::ios::binary)).first;
      if (!it->second) throw InputError(where + ": cannot open its external data file '" + location + "'");
    }
    it->second.clear();
    return it->second;
  }

  std::string dir_;
  const std::string& what_;
  std::map<std::string, std::ifstream> files_;
};

}  // namespace

void load_external_data(onnx::ModelProto& model, const std::string& model_dir, const std::string& what) {
  Loader loader(model_dir, what);
  onnx::GraphProto& g = *model.mutable_graph();
  for (auto& t : *g.mutable_initializer()) loader.load(t);
  for (auto& n : *g.mutable_node())
    for (auto& a : *n.mutable_attribute())
      if (a.has_t()) loader.load(*a.mutable_t());
}

}  // namespace npusim::stack::framework
