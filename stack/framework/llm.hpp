// LLM serving on the simulated chip: a decoder-only transformer of the LLaMA family (LlamaForCausalLM,
// MistralForCausalLM, Qwen2ForCausalLM), as its HuggingFace config.json describes it, run the way a serving engine
// (vLLM-Ascend) runs it: one prefill of the prompts, then decode steps of one token per sequence, each step a
// sequence of library op launches on one stream with a paged KV cache in device memory (reshape_and_cache writes
// each step's keys and values, paged_attention reads them), greedy sampling on the host. docs/llm.md has the
// kernels of a layer, the cache layout and every reported metric.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "hw/isa/dtype.hpp"
#include "stack/framework/session.hpp"

namespace npusim::stack::framework {

struct LlmConfig {
  std::string architecture;  // e.g. LlamaForCausalLM
  std::string source;        // the config.json read
  std::string dir;           // its directory (where the *.safetensors are)
  std::uint32_t hidden = 0, intermediate = 0, layers = 0, heads = 0, kv_heads = 0, head_dim = 0, vocab = 0;
  std::uint32_t max_positions = 0;
  double rms_eps = 1e-6, rope_theta = 10000;
  bool tie_embeddings = false;
  bool qkv_bias = false;                         // Qwen2, or attention_bias: q, k and v projections with a bias
  hw::isa::DType dtype = hw::isa::DType::kFp16;  // the device's: fp16, or bf16 for a bfloat16 model

  // Reads `path`, a config.json or a directory holding one; throws InputError naming the file and key for a missing
  // or bad key, or an architecture or option (rope_scaling, sliding windows) the runner does not model.
  static LlmConfig from_file(const std::string& path);
  std::uint64_t parameters() const;  // weights, counted as HuggingFace does (a tied head once)
};

struct GenerateOptions {
  std::uint32_t batch = 1;
  std::uint32_t prompt_len = 128;
  std::uint32_t decode_steps = 16;  // tokens after the first (the prefill gives the first)
  std::uint32_t page = 128;         // KV cache rows per page (vLLM-Ascend's block size)
  // batch x prompt_len token ids (functional mode); empty: seeded random ids.
  std::vector<std::int32_t> prompt;
  // Functional mode: the directory whose *.safetensors hold the weights; none there: seeded random weights.
  std::string weights_dir;
  // Timing-only mode: layers from the third on replay the second's kernel times when the memory state allows it
  // (docs/llm.md, "Layer replay"); false simulates every layer.
  bool replay = true;
};

// NOLINTNEXTLINE(bugprone-exception-escape): clang-tidy sees a throw through nlohmann::json's implicit members
struct GenerateResult {
  // Functional mode: per sequence the decode_steps + 1 generated tokens, and per generated token the logits
  // (batch x vocab, fp32 from the device's dtype).
  std::vector<std::vector<std::int32_t>> tokens;
  std::vector<std::vector<float>> logits;
  // The run's report (the keys of `npusim run --json` over every call) with a `decode` section.
  nlohmann::json report;
};

// Loads the model (timing-only: weights allocated, not materialised), runs the prefill and the decode steps, each a
// call of `session`. Throws InputError for options the model cannot take (a prompt past its positions, a bad page).
GenerateResult generate(Session& session, const LlmConfig& cfg, const GenerateOptions& opts);

}  // namespace npusim::stack::framework
