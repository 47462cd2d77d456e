// The stack's one pipeline, shared by every host program above the runtime: the CLI's `run` and `op`, the Python
// module, the tests (docs/python.md, "One pipeline").
//
// A Model is an ONNX model (a file or a ModelProto's bytes) imported, fused, lowered to library op calls and planned
// for a chip: everything that can be refused is refused before anything is simulated. A Session is the simulated
// device of the process (SystemC elaborates one chip per process), kept running across calls: each call (a model
// run, one library op) submits its tasks, waits for them and returns its outputs with its own report, the keys of
// `npusim run --json` or `npusim op --json` over that call's tasks; the device timeline goes on from call to call.
// finish() ends the device and writes the trace and op summary of everything it ran.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/config/loader.hpp"
#include "stack/graph/graph.hpp"
#include "stack/graph/lower.hpp"
#include "stack/graph/passes/passes.hpp"
#include "stack/ops/op.hpp"
#include "stack/runtime/run_outputs.hpp"
#include "stack/runtime/runtime.hpp"

namespace npusim::stack::framework {

struct CompileOptions {
  std::map<std::string, std::int64_t> dims;  // bindings of symbolic input dims
  bool fusion = true;                        // run the fusion passes
  std::uint32_t streams = 4;                 // at most this many streams (stream assignment)
  // Input values, for the inputs whose values decide shapes (framework::ImportOptions::values): those become
  // constants of the model and leave its inputs (model.bound_inputs in the report).
  std::map<std::string, graph::Tensor> values;
};

// A tensor a model takes or gives.
struct TensorSpec {
  std::string name;
  ops::TensorDesc desc;
  std::string type;  // the model's element type ("float32", "int64", "bool"...): int64 is stored as int32, bool as int8
};

class Model {
 public:
  // Throws InputError naming the model (and node) for anything it cannot import, lower or plan.
  static Model from_file(const std::string& path, const config::ChipConfig& chip, const CompileOptions& opts = {});
  // `what` names the bytes in errors (e.g. "torch.compile graph"); external data is refused.
  static Model from_bytes(const std::string& bytes, const std::string& what, const config::ChipConfig& chip,
                          const CompileOptions& opts = {});
  Model(Model&&) noexcept;
  Model& operator=(Model&&) noexcept;
  ~Model();

  const std::string& name() const;
  const graph::Graph& graph() const;      // after the passes
  const graph::Program& program() const;  // the lowered steps
  std::vector<TensorSpec> inputs() const;
  std::vector<TensorSpec> outputs() const;
  // The report's `model` object and the compile-time keys of `graph` (nodes before and after fusion, passes, kernels,
  // nodes: the ONNX nodes left after fusion).
  nlohmann::json model_report() const;
  nlohmann::json graph_report() const;
  const std::vector<std::pair<std::string, int>>& passes_fired() const;
  // Each candidate the fusion passes looked at: what it became, or why it stayed as it was.
  const std::vector<graph::passes::FusionNote>& fusion_notes() const;
  std::size_t nodes_before() const;
  // The ONNX graph's inputs (initializers left out) in its order, those bound to values at compile time included:
  // the positions of ONNX's test-data layout (input_K.pb).
  const std::vector<std::string>& declared_inputs() const;

  struct Impl;

 private:
  friend class Session;
  explicit Model(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// NOLINTNEXTLINE(bugprone-exception-escape): clang-tidy sees a throw through nlohmann::json's implicit members
struct RunResult {
  std::vector<std::vector<std::uint8_t>> outputs;  // functional mode: each output's bytes; timing-only: empty
  nlohmann::json report;
};

class Session {
 public:
  // Opens the trace file now (a bad path is an error before anything is simulated); empty paths: no output.
  Session(config::LoadedConfig config, hw::core::Mode mode, const runtime::OutputPaths& outputs = {});
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  const config::ChipConfig& chip() const;
  const config::LoadedConfig& config() const;
  hw::core::Mode mode() const;
  bool functional() const { return mode() == hw::core::Mode::kFunctional; }
  // See runtime::Device::on_progress; set before the first call.
  void on_progress(std::function<void(std::uint32_t, std::uint32_t, double)> f);

  // One execution of a model: the inputs' bytes (functional mode; ignored in timing-only mode) in the order of
  // model.inputs(). The report carries `model` and `graph` as `npusim run --json` does, and in functional mode
  // `outputs` (per output: name, shape, dtype, mean, max_abs, finite).
  RunResult run(const Model& model, const std::vector<std::vector<std::uint8_t>>& inputs);

  // One library op call: `inputs` describe the tensors the op takes (their shapes and dtypes), `call` the op's typed
  // call (stack/ops/calls.hpp). The report carries `op` as `npusim op --json` does, with `text` (the call as the
  // user wrote it, if any) under op.params. Throws InputError naming the op and what it refuses, before anything
  // runs. With `warmup` > 0 the op is first launched that many times on the same buffers (the inputs copied in
  // once, the device synchronised), as a benchmark loop does, and the report covers only the last launch and the
  // copies out: the caches are warm. More than kMaxWarmup is refused (InputError).
  static constexpr std::uint32_t kMaxWarmup = 100;
  RunResult run_op(const std::string& op, const ops::Call& call, const std::vector<ops::TensorDesc>& inputs,
                   const std::vector<std::vector<std::uint8_t>>& values, const ops::Params& text = {},
                   std::uint32_t warmup = 0);
  // The same with the call as text (the parameters of `npusim op NAME -p`), parsed once into the typed call.
  RunResult run_op(const std::string& op, const ops::Params& params, const std::vector<ops::TensorDesc>& inputs,
                   const std::vector<std::vector<std::uint8_t>>& values);
  // The typed call of `npusim op NAME -p ...`: unknown keys and bad values refused, naming them.
  static ops::Call op_call(const std::string& op, const ops::Params& params);
  // The input descriptions `npusim op NAME -p ... --dtype` gives an op (from its shape parameters).
  static std::vector<ops::TensorDesc> op_inputs(const std::string& op, const ops::Params& params, hw::isa::DType dtype);

  // A host program of the caller's (runtime API calls on the device): its tasks are submitted and waited for, and the
  // report covers them, as for run() and run_op(). The LLM runner (llm.hpp) runs its prefill and decode steps so.
  nlohmann::json call(const std::function<void(runtime::Device&)>& host);

  // What `npu-smi info` shows for the simulated device: name, cores, device memory in use and its capacity, and
  // the AI cores' utilisation over the last call (docs/python.md defines each).
  nlohmann::json status() const;
  // The report of everything the device ran so far (all calls).
  nlohmann::json report() const;

  // Ends the device: the end-of-run checks (a device error, unfinished tasks), then the trace and op summary of
  // everything it ran; their paths go into `report` when given. Later calls are errors. Idempotent.
  void finish(nlohmann::json* report = nullptr);
  bool finished() const;

  runtime::Device& device();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace npusim::stack::framework
