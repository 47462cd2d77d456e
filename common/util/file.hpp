// Reading a whole user file (models, tensors, specs, configs) with a size limit, and checking output directories.
#pragma once

#include <cstddef>
#include <filesystem>
#include <string>

namespace npusim {

// The most any user input file may have: protobuf's own limit for a serialized message (an ONNX model), and far
// above what a simulated tensor can hold in a run's time. Configs have their own, smaller limit.
inline constexpr std::size_t kMaxInputFileBytes = std::size_t{2} << 30;

enum class ReadStatus {
  kOk,
  kNotAFile,    // a directory or a character/block device (/dev/zero would never end)
  kCannotOpen,  // missing or unreadable (also when a read fails part way)
  kTooLarge,    // more than max_bytes (pipes are read up to the limit and refused past it)
};

// Reads `path` into `out` without ever holding more than max_bytes + one chunk.
ReadStatus read_bounded(const std::filesystem::path& path, std::size_t max_bytes, std::string& out);

// read_bounded with InputError "PATH: WHAT" when the file cannot be opened, "PATH: is a directory or a device, not a
// file", or "PATH: is larger than N bytes, the most an input file may have".
std::string read_file(const std::string& path, const std::string& what = "cannot read",
                      std::size_t max_bytes = kMaxInputFileBytes);

// An output file's directory must exist before a run starts: InputError "OPTION PATH: the directory 'D' does not
// exist" otherwise (a path without a directory is the current one).
void check_output_dir(const std::string& option, const std::string& path);

}  // namespace npusim
