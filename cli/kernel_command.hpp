// `npusim kernel NAME`: run a built-in sample kernel on a chip config; `npusim kernel FILE.cpp|LIB.so --entry E`:
// compile (or load) a user's kernel written against the kernel SDK and run it (cli/user_kernel_command.cpp).
#pragma once

#include "stack/runtime/run_outputs.hpp"

#include <cstdint>
#include <nlohmann/json.hpp>
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
  stack::runtime::OutputPaths files;    // --trace, --summary, --stats
  std::vector<std::string> check_refs;  // --check REF.npy | NAME=REF.npy (user kernels)
  // User kernels (a source file or a kernel library):
  std::string entry;
  std::uint32_t block_dim = 1;
  std::string type = "vector";
  std::vector<std::string> args;  // NAME=SPEC, in the kernel's parameter order
  std::string tiling;             // k=v,... or FILE.json
  std::string tiling_schema;      // FILE.json
  std::string outputs;            // directory for the out: arguments' .npy files
  std::vector<std::string> cxxflags;
  double atol = -1, rtol = -1;    // < 0: per-dtype defaults
};

// Whether the positional NAME of `npusim kernel` names a user's kernel (a source file or a library).
bool is_kernel_file(const std::string& name);
int run_user_kernel_command(const KernelOptions& opts);

// Returns the process exit status: 0, or 3 when --check found a mismatch. Throws InputError for bad input.
int run_kernel_command(const KernelOptions& opts);
// The text report's kernel lines (cycles, device time, efficiency, pipes, overlap, check) of a run_report.
void print_kernel_report(const nlohmann::json& report);
// A check's largest error for the text reports, to three significant digits ("3.7e-04"; a fixed format with three
// decimals printed that as 0.000).
std::string error_text(double v);
// "1 task", "3 tasks".
std::string count_text(std::size_t n, const std::string& noun);
// The list of sample kernels with their parameters (for --help and `npusim kernel --list`).
std::string describe_kernels();

}  // namespace npusim::cli
