// `npusim run MODEL.onnx`: a whole model through the stack: ONNX import, lowering to library ops, the runtime.
#pragma once

#include "stack/framework/session.hpp"
#include "stack/runtime/run_outputs.hpp"

#include <chrono>
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
  bool explain_fusion = false;  // say what each fusion candidate became, or why it did not fuse
  std::uint32_t streams = 4;  // at most this many streams (stream assignment)
  bool progress = false;      // progress lines on stderr even when it is not a terminal
  bool json = false;
  stack::runtime::OutputPaths files;  // --trace, --summary, --stats
  // An LLM from its HuggingFace config.json (cli/llm_command.cpp): decode steps after the prefill, the prompts.
  std::uint32_t decode = 0, prompt_len = 128, batch = 1, page = 128;
  bool llm_options = false;  // any of --decode, --prompt-len, --batch, --page given
  bool batch_given = false, prompt_len_given = false;
  bool no_replay = false;  // simulate every layer (no layer replay)
};

int run_model_command(const RunOptions& opts);

// An LLM rather than an ONNX model: a directory (holding config.json) or a .json file.
bool is_llm_model(const std::string& path);
int run_llm_command(const RunOptions& opts);

// Progress of a long run on stderr: on a terminal one line rewritten at most twice a second, with --progress
// elsewhere a line at most every second; done() ends it with the final state.
class Progress {
 public:
  Progress(stack::framework::Session& session, bool forced);
  void done();

 private:
  bool tty_ = false;
  double shown_at_ = -1;
  std::string line_, shown_;
  std::chrono::steady_clock::time_point t0_;
};

// --outputs DIR made if missing (as mkdir -p), before anything runs; InputError when it cannot be.
void prepare_outputs_dir(const std::string& dir);

}  // namespace npusim::cli
