// Where the running binary is: to start itself again (a sweep's runs) and to find what is installed beside it
// (PREFIX/bin/npusim -> PREFIX/include/npusim, PREFIX/share/npusim).
#pragma once

#include <filesystem>

namespace npusim {

// The running executable's path (/proc/self/exe), or an empty path when it cannot be read.
inline std::filesystem::path self_executable() {
  std::error_code ec;
  std::filesystem::path p = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? std::filesystem::path() : p;
}

}  // namespace npusim
