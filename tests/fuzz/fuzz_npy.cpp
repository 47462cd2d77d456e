// libFuzzer target: the .npy reader (`npusim run --inputs`, `npusim kernel --arg x=in.npy`, `--check`). A file it
// takes must hold exactly the bytes its header promises; bad input must end in InputError.
#include <cstddef>
#include <cstdint>
#include <string>

#include "cli/npy.hpp"
#include "common/util/error.hpp"

// NOLINTNEXTLINE(readability-identifier-naming): libFuzzer's entry point
extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  try {
    const npusim::cli::NpyArray a =
        npusim::cli::parse_npy(std::string(reinterpret_cast<const char*>(data), size), "fuzz.npy");
    // What the reader promises: exactly the bytes the header's shape and type call for, never more than the file.
    std::uint64_t elements = 1;
    for (std::uint64_t d : a.shape) elements *= d;
    const std::uint64_t each = a.file_type != npusim::stack::graph::ElemType::kUndefined
                                   ? npusim::stack::graph::elem_bytes(a.file_type)
                                   : npusim::hw::isa::dtype_bytes(a.dtype);
    if (a.bytes.size() > size || a.bytes.size() != elements * each) __builtin_trap();
  } catch (const npusim::InputError&) {
  }
  return 0;
}
