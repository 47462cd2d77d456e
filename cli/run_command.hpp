// `npusim run MODEL.onnx`: a whole model through the stack: ONNX import, lowering to library ops, the runtime.
#pragma once

#include "stack/runtime/run_outputs.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace npusim::cli {

struct RunOptions {
  std::string model;
  std::string config;
  std::vector<std::string> sets;
  std::vector<std::string> dims;  // NAME=SIZE bindings of symbolic input dims
  bool functional = false;
  std::string inputs_dir, outputs_dir;  // .npy per graph input/output, named after it (functional mode)
  bool no_fusion = false;
  std::uint32_t streams = 4;  // at most this many streams (stream assignment)
  bool progress = false;      // progress lines on stderr even when it is not a terminal
  bool json = false;
  stack::runtime::OutputPaths files;  // --trace, --summary, --stats
};

int run_model_command(const RunOptions& opts);

}  // namespace npusim::cli
