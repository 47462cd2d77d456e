// Reading HuggingFace weights in the safetensors format (what `save_pretrained` writes): per file an 8-byte
// little-endian header length, a JSON header naming each tensor's dtype, shape and byte range, then the bytes. A
// model directory holds one `model.safetensors` or several shards (`model-00001-of-00002.safetensors`...); every
// *.safetensors file in it is indexed.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace npusim::stack::framework {

class SafeTensors {
 public:
  // Indexes every *.safetensors file of `dir`; throws InputError naming the file for a malformed header. No file:
  // an empty index (empty() is true).
  explicit SafeTensors(const std::string& dir);
  bool empty() const { return index_.empty(); }
  bool has(const std::string& name) const { return index_.count(name) > 0; }
  // The tensor as fp32 values (F32, F16, BF16 and F64 are read), checked against `shape`; throws InputError naming
  // the tensor and file when it is missing, of another shape or type, or its bytes are outside the file.
  std::vector<float> read(const std::string& name, const std::vector<std::uint64_t>& shape) const;

 private:
  struct Entry {
    std::string file, dtype;
    std::vector<std::uint64_t> shape;
    std::uint64_t begin = 0, end = 0;  // bytes from the file's start
  };
  std::map<std::string, Entry> index_;
  std::string dir_;
};

}  // namespace npusim::stack::framework
