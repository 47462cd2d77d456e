// `npusim kernel FILE.cpp|LIB.so`'s arguments: --arg NAME=SPEC (a .npy, random:/zeros:/out:DTYPE:SHAPE, tiling or a
// number) and the tiling struct from --tiling values and a --tiling-schema (docs/kernel-sdk.md).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "hw/isa/dtype.hpp"

namespace npusim::cli {

// One --arg, bound to the kernel parameter at its position.
struct KernelArg {
  enum Kind { kInput, kRandom, kZeros, kOutput, kTiling, kScalar } kind = kInput;
  std::string name, spec;
  hw::isa::DType dtype = hw::isa::DType::kFp16;
  std::vector<std::uint64_t> shape;
  std::uint64_t bytes = 0;
  std::vector<std::uint8_t> data;  // inputs (functional mode), the tiling struct
  std::uint64_t word = 0;          // scalars
  std::uint64_t addr = 0;          // device address once allocated
};

// `text` is one --arg, the kernel parameter at `index`; throws InputError naming the argument. A .npy is read.
KernelArg parse_kernel_arg(const std::string& text, std::size_t index);

// The tiling struct's bytes from the schema file and the values (k=v,... or a .json file), laid out as the C
// compiler lays out a struct of those members; throws InputError naming the field and the file.
std::vector<std::uint8_t> tiling_bytes(const std::string& schema_path, const std::string& values);
// The same from texts: the schema's JSON, and the values as k=v,... (values_file empty) or as the JSON of
// `values_file`.
std::vector<std::uint8_t> tiling_bytes_from(const std::string& schema_json, const std::string& schema_path,
                                            const std::string& values, const std::string& values_file);

}  // namespace npusim::cli
