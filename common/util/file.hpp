// Reading a whole file, for the loaders of user files (models, tensors): InputError naming the path when it fails.
#pragma once

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "common/util/error.hpp"

namespace npusim {

inline std::string read_file(const std::string& path, const std::string& what = "cannot read") {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw InputError(path + ": " + what);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// An output file's directory must exist before a run starts: InputError "OPTION PATH: the directory 'D' does not
// exist" otherwise (a path without a directory is the current one).
inline void check_output_dir(const std::string& option, const std::string& path) {
  const std::filesystem::path dir = std::filesystem::path(path).parent_path();
  std::error_code ec;
  if (!dir.empty() && !std::filesystem::is_directory(dir, ec))
    throw InputError(option + " " + path + ": the directory '" + dir.string() + "' does not exist");
}

}  // namespace npusim
