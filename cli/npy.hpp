// NumPy .npy files (format version 1.0/2.0, little-endian, C order) for `npusim run --inputs/--outputs`.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "hw/isa/dtype.hpp"
#include "stack/graph/graph.hpp"

namespace npusim::cli {

struct NpyArray {
  hw::isa::DType dtype = hw::isa::DType::kFp32;  // '<f4', '<f2', '<i4', '|i1'; bfloat16 is written as '<u2' bits
  std::vector<std::uint64_t> shape;
  std::vector<std::uint8_t> bytes;
  // int64 ('<i8') or bool ('|b1') data, which the device stores as int32 or int8 (graph::to_storage converts): the
  // bytes are then in this type, and dtype names the device's. Written also for int16, uint8 and int8 outputs.
  stack::graph::ElemType file_type = stack::graph::ElemType::kUndefined;
};

// Throws InputError naming the file for a file that is not a C-order .npy of float32, float16, int32, int8, int64,
// bool (or uint16 bits read as bfloat16).
NpyArray read_npy(const std::string& path);
// The same from the file's bytes; `name` names it in errors.
NpyArray parse_npy(const std::string& bytes, const std::string& name);
void write_npy(const std::string& path, const NpyArray& a);

}  // namespace npusim::cli
