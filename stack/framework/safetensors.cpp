#include "stack/framework/safetensors.hpp"

#include <cstring>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "common/util/error.hpp"
#include "hw/isa/dtype.hpp"

namespace npusim::stack::framework {

namespace {

constexpr std::uint64_t kMaxHeader = 100ull << 20;  // the format's own limit on the JSON header

std::string shape_text(const std::vector<std::uint64_t>& s) {
  std::string t = "[";
  for (std::size_t i = 0; i < s.size(); ++i) t += (i ? ", " : "") + std::to_string(s[i]);
  return t + "]";
}

std::uint64_t dtype_size(const std::string& d) {
  if (d == "F32") return 4;
  if (d == "F16" || d == "BF16") return 2;
  if (d == "F64") return 8;
  return 0;
}

}  // namespace

SafeTensors::SafeTensors(const std::string& dir) : dir_(dir) {
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec)) return;
  std::vector<std::string> files;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec))
    if (e.path().extension() == ".safetensors") files.push_back(e.path().string());
  for (const std::string& file : files) {
    std::ifstream in(file, std::ios::binary);
    std::uint8_t len_bytes[8] = {};
    if (!in.read(reinterpret_cast<char*>(len_bytes), 8))
      throw InputError(file + ": not a safetensors file (no header)");
    std::uint64_t len = 0;
    for (int i = 7; i >= 0; --i) len = (len << 8) | len_bytes[i];
    const std::uint64_t size = std::filesystem::file_size(file, ec);
    if (len == 0 || len > kMaxHeader || 8 + len > size)
      throw InputError(file + ": a safetensors header of " + std::to_string(len) + " bytes does not fit the file");
    std::string text(len, '\0');
    in.read(text.data(), static_cast<std::streamsize>(len));
    nlohmann::json header;
    try {
      header = nlohmann::json::parse(text);
    } catch (const nlohmann::json::exception& e) {
      throw InputError(file + ": the safetensors header is not JSON (" + e.what() + ")");
    }
    if (!header.is_object()) throw InputError(file + ": the safetensors header is not a JSON object");
    for (const auto& [name, t] : header.items()) {
      if (name == "__metadata__") continue;
      Entry e;
      e.file = file;
      try {
        e.dtype = t.at("dtype").get<std::string>();
        e.shape = t.at("shape").get<std::vector<std::uint64_t>>();
        const auto off = t.at("data_offsets").get<std::vector<std::uint64_t>>();
        if (off.size() != 2) throw InputError("data_offsets is not [begin, end]");
        if (off[0] > size || off[1] > size) throw InputError("data_offsets are past the file's end");
        e.begin = 8 + len + off[0];
        e.end = 8 + len + off[1];
      } catch (const std::exception& ex) {
        std::string what = file;
        what.append(": tensor '").append(name).append("': ").append(ex.what());
        throw InputError(what);
      }
      if (e.end < e.begin || e.end > size) {
        std::string what = file;
        what.append(": tensor '").append(name).append("': its bytes are outside the file");
        throw InputError(what);
      }
      index_[name] = e;
    }
  }
}

std::vector<float> SafeTensors::read(const std::string& name, const std::vector<std::uint64_t>& shape) const {
  const auto it = index_.find(name);
  if (it == index_.end()) throw InputError(dir_ + ": no tensor '" + name + "' in its safetensors files");
  const Entry& e = it->second;
  const std::string where = e.file + ": tensor '" + name + "'";
  if (e.shape != shape)
    throw InputError(where + " is " + shape_text(e.shape) + ", the model's config makes it " + shape_text(shape));
  const std::uint64_t es = dtype_size(e.dtype);
  if (!es) throw InputError(where + " has dtype " + e.dtype + " (F32, F16, BF16 or F64 are read)");
  std::uint64_t n = 1;
  for (auto d : shape) n *= d;
  if (n * es != e.end - e.begin)
    throw InputError(where + ": " + std::to_string(e.end - e.begin) + " bytes for " + std::to_string(n) + " elements");
  std::vector<std::uint8_t> bytes(e.end - e.begin);
  std::ifstream in(e.file, std::ios::binary);
  in.seekg(static_cast<std::streamoff>(e.begin));
  if (!in.read(reinterpret_cast<char*>(bytes.data()), static_cast<std::streamsize>(bytes.size())))
    throw InputError(where + ": cannot read its bytes");
  std::vector<float> out(n);
  for (std::uint64_t i = 0; i < n; ++i) {
    const std::uint8_t* p = bytes.data() + i * es;
    if (e.dtype == "F32") {
      std::memcpy(&out[i], p, 4);
    } else if (e.dtype == "F64") {
      double d = 0;
      std::memcpy(&d, p, 8);
      out[i] = static_cast<float>(d);
    } else {
      out[i] = hw::isa::load_float(p, e.dtype == "F16" ? hw::isa::DType::kFp16 : hw::isa::DType::kBf16);
    }
  }
  return out;
}

}  // namespace npusim::stack::framework
