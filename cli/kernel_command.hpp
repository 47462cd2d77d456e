// `npusim kernel NAME`: run a built-in sample kernel on a chip config.
#pragma once

#include <string>
#include <vector>

namespace npusim::cli {

struct KernelOptions {
  std::string name;
  std::string config;
  std::vector<std::string> sets;
  std::vector<std::string> params;  // key=value
  bool json = false;
  bool check = false;       // functional mode + compare with the CPU reference
  bool functional = false;  // functional mode without the comparison
  std::string trace;
  std::string summary;
};

// Returns the process exit status: 0, or 3 when --check found a mismatch. Throws InputError for bad input.
int run_kernel_command(const KernelOptions& opts);
// The list of sample kernels with their parameters (for --help and `npusim kernel --list`).
std::string describe_kernels();

}  // namespace npusim::cli
