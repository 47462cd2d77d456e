// Reading a whole file, for the loaders of user files (models, tensors): InputError naming the path when it fails.
#pragma once

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

}  // namespace npusim
