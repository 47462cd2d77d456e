// `npusim op NAME`: one library op on seeded random inputs, through the runtime.
#pragma once

#include "stack/runtime/run_outputs.hpp"

#include <string>
#include <vector>

namespace npusim::cli {

struct OpOptions {
  std::string name;
  std::string config;
  std::vector<std::string> sets;
  std::vector<std::string> params;
  std::string dtype = "fp16";
  bool json = false;
  bool check = false;
  std::uint32_t warmup = 0;           // launches before the measured one (a warm L2)
  stack::runtime::OutputPaths files;  // --trace, --summary, --stats
};

int run_op_command(const OpOptions& opts);
std::string describe_ops();

}  // namespace npusim::cli
