// `npusim run MODEL_DIR --decode N`: an LLM from its HuggingFace config.json through the LLM runner
// (stack/framework/llm.hpp): the prompts' prefill, then N decode steps; TTFT, TPOT and the HBM bandwidth of the
// decode steps' weight reads.
#include <cstring>
#include <filesystem>
#include <iomanip>
#include <iostream>

#include <nlohmann/json.hpp>

#include "cli/npy.hpp"
#include "cli/run_command.hpp"
#include "common/config/loader.hpp"
#include "common/util/error.hpp"
#include "stack/framework/llm.hpp"

namespace npusim::cli {

namespace fw = stack::framework;

bool is_llm_model(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) return true;
  return path.size() > 5 && path.compare(path.size() - 5, 5, ".json") == 0;
}

int run_llm_command(const RunOptions& opts) {
  if (!opts.dims.empty()) throw InputError("--dim binds dims of an ONNX model; an LLM takes --batch and --prompt-len");
  if (!opts.functional && (!opts.inputs_dir.empty() || !opts.outputs_dir.empty()))
    throw InputError("--inputs and --outputs need --functional");
  const fw::LlmConfig cfg = fw::LlmConfig::from_file(opts.model);
  fw::GenerateOptions g;
  g.batch = opts.batch;
  g.prompt_len = opts.prompt_len;
  g.decode_steps = opts.decode;
  g.page = opts.page;
  g.replay = !opts.no_replay;
  g.weights_dir = cfg.dir;
  if (!opts.inputs_dir.empty()) {
    // The prompts: DIR/input_ids.npy, [batch, prompt length] of int64 or int32 token ids.
    const std::string path = opts.inputs_dir + "/input_ids.npy";
    NpyArray a = read_npy(path);
    if (a.file_type != stack::graph::ElemType::kUndefined)
      a.bytes = stack::graph::to_storage(a.file_type, a.bytes, path);
    if (a.dtype != hw::isa::DType::kInt32 || a.shape.size() != 2)
      throw InputError(path + ": the prompts must be [batch, prompt length] token ids (int64 or int32)");
    if ((opts.batch_given && a.shape[0] != opts.batch) || (opts.prompt_len_given && a.shape[1] != opts.prompt_len))
      throw InputError(path + " holds " + std::to_string(a.shape[0]) + " x " + std::to_string(a.shape[1]) +
                       " tokens; --batch and --prompt-len say otherwise");
    g.batch = static_cast<std::uint32_t>(a.shape[0]);
    g.prompt_len = static_cast<std::uint32_t>(a.shape[1]);
    g.prompt.resize(a.bytes.size() / 4);
    std::memcpy(g.prompt.data(), a.bytes.data(), a.bytes.size());
  }
  if (!opts.outputs_dir.empty()) prepare_outputs_dir(opts.outputs_dir);
  const config::LoadedConfig loaded = config::load_config(opts.config, opts.sets);
  const hw::core::Mode mode = opts.functional ? hw::core::Mode::kFunctional : hw::core::Mode::kTimingOnly;
  fw::Session session(loaded, mode, opts.files);
  Progress progress(session, opts.progress);
  fw::GenerateResult r = fw::generate(session, cfg, g);
  progress.done();
  nlohmann::json& report = r.report;
  if (!opts.outputs_dir.empty()) {
    // tokens.npy: [batch, steps + 1] int64 (the first from the prefill); logits.npy: [steps + 1, batch, vocab] fp32.
    const std::uint64_t n = r.tokens.empty() ? 0 : r.tokens[0].size();
    std::vector<std::uint8_t> tok;
    for (const auto& seq : r.tokens)
      for (std::int32_t t : seq)
        tok.insert(tok.end(), reinterpret_cast<const std::uint8_t*>(&t), reinterpret_cast<const std::uint8_t*>(&t) + 4);
    write_npy(opts.outputs_dir + "/tokens.npy",
              NpyArray{hw::isa::DType::kInt32,
                       {g.batch, n},
                       stack::graph::from_storage(stack::graph::ElemType::kInt64, tok),
                       stack::graph::ElemType::kInt64});
    std::vector<std::uint8_t> lg;
    for (const auto& step : r.logits)
      lg.insert(lg.end(), reinterpret_cast<const std::uint8_t*>(step.data()),
                reinterpret_cast<const std::uint8_t*>(step.data() + step.size()));
    write_npy(opts.outputs_dir + "/logits.npy",
              NpyArray{hw::isa::DType::kFp32, {r.logits.size(), g.batch, cfg.vocab}, lg});
  }
  session.finish(&report);
  if (opts.json) {
    std::cout << report.dump(2) << "\n";
    return 0;
  }
  const nlohmann::json& d = report["decode"];
  auto launches = [](const nlohmann::json& phase) {
    std::uint64_t n = 0;
    for (const auto& [name, k] : phase["kernels"].items()) n += k["count"].get<std::uint64_t>();
    return n;
  };
  std::cout << std::fixed << std::setprecision(3) << "run " << opts.model << " (" << cfg.architecture << ", "
            << cfg.layers << " layers, " << std::setprecision(cfg.parameters() < 1000000000 ? 1 : 2)
            << static_cast<double>(cfg.parameters()) / (cfg.parameters() < 1000000000 ? 1e6 : 1e9)
            << (cfg.parameters() < 1000000000 ? " M" : " B") << " parameters, " << std::setprecision(3)
            << d["model"]["dtype"].get<std::string>() << ") on " << loaded.chip.name << ": batch " << g.batch
            << ", prompt " << g.prompt_len << ", " << g.decode_steps << " decode steps\n";
  std::cout << "  prefill     TTFT " << d["ttft_us"].get<double>() << " us, " << launches(d["prefill"]) << " kernels\n";
  if (d.contains("tpot_us")) {
    std::cout << "  decode      TPOT " << d["tpot_us"].get<double>() << " us (mean of " << g.decode_steps << " steps), "
              << launches(d["decode_steps"][0]) << " kernels a step, the device busy " << std::setprecision(1)
              << d["decode_device_busy_fraction"].get<double>() * 100 << " % of it\n";
    std::cout << std::setprecision(3) << "  weights     " << d["weight_bytes_per_step"].get<std::uint64_t>()
              << " B read a step: " << d["decode_weight_GBps"].get<double>() << " GB/s, " << std::setprecision(1)
              << d["decode_weight_hbm_fraction"].get<double>() * 100 << " % of the HBM peak";
    if (d["decode_hbm_read_fraction"].is_number())
      std::cout << " (HBM reads measured: " << d["decode_hbm_read_fraction"].get<double>() * 100 << " %)";
    std::cout << "\n";
  }
  if (d["layers_replayed"].get<std::uint32_t>() > 0) {
    std::cout << "  replay      layers 2.." << d["model"]["layers"].get<std::uint32_t>() - 1
              << " took layer 1's kernel times in each pass (--no-replay simulates them; docs/llm.md)\n";
  }
  std::cout << "  kv cache    " << d["kv_cache_bytes"].get<std::uint64_t>() << " B in pages of " << g.page << " rows\n";
  if (opts.functional) {
    for (std::size_t b = 0; b < r.tokens.size(); ++b) {
      std::cout << "  tokens[" << b << "]  ";
      for (std::int32_t t : r.tokens[b]) std::cout << " " << t;
      std::cout << "\n";
    }
  }
  if (report.contains("trace")) std::cout << "  trace       " << opts.files.trace << "\n";
  return 0;
}

}  // namespace npusim::cli
