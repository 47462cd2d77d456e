// libFuzzer target: the ONNX importer (model bytes -> the graph engine's IR: parsing, external-data checks, opset
// adaptation, strict shape inference, constant folding) and TensorProto inputs (`npusim run --inputs DIR/x.pb`).
// The first byte chooses which: even, a ModelProto; odd, a TensorProto. Bad input must end in InputError.
#include <cstddef>
#include <cstdint>
#include <string>

#include "common/util/error.hpp"
#include "stack/framework/onnx_import.hpp"

// NOLINTNEXTLINE(readability-identifier-naming): libFuzzer's entry point
extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const std::string bytes(reinterpret_cast<const char*>(data) + 1, size - 1);
  try {
    if (data[0] % 2 == 0) {
      npusim::stack::framework::import_onnx_bytes(bytes, "fuzz.onnx");
    } else {
      npusim::stack::framework::parse_tensor_pb(bytes, "fuzz.pb");
    }
  } catch (const npusim::InputError&) {
  }
  return 0;
}
