#include "stack/framework/session.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>

#include "common/util/error.hpp"
#include "hw/isa/dtype.hpp"
#include "stack/framework/onnx_import.hpp"
#include "stack/graph/execute.hpp"
#include "stack/graph/passes/passes.hpp"
#include "stack/runtime/report.hpp"
#include "stack/runtime/run_outputs.hpp"

namespace npusim::stack::framework {

// ---------------------------------------------------------------------------------------------------------------
// Model

struct Model::Impl {
  std::string name;
  ImportedModel model;
  CompileOptions opts;
  std::size_t nodes_before = 0;
  std::vector<std::pair<std::string, int>> fired;
  std::vector<graph::passes::FusionNote> notes;  // what the fusion passes made of their candidates
  graph::Program program;
  std::unique_ptr<graph::Executor> executor;  // holds a reference to `program`: Impl never moves
};

namespace {

std::unique_ptr<Model::Impl> compile(ImportedModel imported, const std::string& name, const config::ChipConfig& chip,
                                     const CompileOptions& opts) {
  auto m = std::make_unique<Model::Impl>();
  m->name = name;
  m->model = std::move(imported);
  m->opts = opts;
  m->opts.values.clear();  // in the model now
  graph::Graph& g = m->model.graph;
  m->nodes_before = g.live_nodes();
  if (opts.fusion) {
    try {
      graph::passes::PassResults r = graph::passes::run_all(g);
      m->fired = std::move(r.fired);
      m->notes = std::move(r.notes);
    } catch (const graph::GraphError& e) {
      throw InputError(name + ": a pass left the graph invalid: " + e.what());
    }
  }
  const std::vector<std::string> unsupported = unsupported_nodes(g, graph::supported_op_types());
  if (!unsupported.empty()) {
    // Shape arithmetic over a dim left unbound cannot fold: that dim is the cause, not the Shape/Gather nodes.
    for (graph::ValueId in : g.inputs)
      if (const auto& shape = g.value(in).shape)
        for (const graph::Dim& d : *shape)
          if (!d.known() && !d.symbol.empty())
            throw InputError(name + ": input '" + g.value(in).name + "' has the unbound dim '" + d.symbol +
                             "' (use --dim " + d.symbol + "=SIZE); the shapes computed from it cannot be folded");
    std::string list;
    for (const auto& u : unsupported) list += (list.empty() ? "" : ", ") + u;
    throw InputError(name + ": " + std::to_string(unsupported.size()) + " node(s) with ops npusim does not run: " + list);
  }
  try {
    m->program = graph::lower(g);
    // Every step is planned (tiling, shapes) before anything is simulated.
    m->executor = std::make_unique<graph::Executor>(m->program, chip, opts.streams);
  } catch (const InputError& e) {
    throw InputError(name + ": " + e.what());
  }
  return m;
}

std::vector<TensorSpec> specs(const graph::Program& p, const std::vector<int>& ids) {
  std::vector<TensorSpec> out;
  for (int i : ids) {
    const graph::ProgramTensor& t = p.tensors[static_cast<std::size_t>(i)];
    out.push_back({t.name, t.desc, std::string(graph::elem_name(t.type))});
  }
  return out;
}

}  // namespace

Model::Model(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Model::Model(Model&&) noexcept = default;
Model& Model::operator=(Model&&) noexcept = default;
Model::~Model() = default;

Model Model::from_file(const std::string& path, const config::ChipConfig& chip, const CompileOptions& opts) {
  return Model(compile(import_onnx(path, {opts.dims, opts.values}), path, chip, opts));
}

Model Model::from_bytes(const std::string& bytes, const std::string& what, const config::ChipConfig& chip,
                        const CompileOptions& opts) {
  return Model(compile(import_onnx_bytes(bytes, what, {opts.dims, opts.values}), what, chip, opts));
}

const std::string& Model::name() const { return impl_->name; }
const graph::Graph& Model::graph() const { return impl_->model.graph; }
const graph::Program& Model::program() const { return impl_->program; }
std::vector<TensorSpec> Model::inputs() const { return specs(impl_->program, impl_->program.inputs); }
std::vector<TensorSpec> Model::outputs() const { return specs(impl_->program, impl_->program.outputs); }
const std::vector<std::pair<std::string, int>>& Model::passes_fired() const { return impl_->fired; }
const std::vector<graph::passes::FusionNote>& Model::fusion_notes() const {
  return impl_->notes;
}
std::size_t Model::nodes_before() const { return impl_->nodes_before; }
const std::vector<std::string>& Model::declared_inputs() const {
  return impl_->model.declared_inputs;
}

nlohmann::json Model::model_report() const {
  const ImportedModel& m = impl_->model;
  return {{"file", impl_->name},
          {"opset", m.opset},
          {"producer", m.producer},
          {"adapted_nodes", m.adapted},
          {"bound_inputs", m.bound}};
}

nlohmann::json Model::graph_report() const {
  nlohmann::json passes = nlohmann::json::object();
  for (const auto& [name, count] : impl_->fired) passes[name] = count;
  nlohmann::json unfused = nlohmann::json::array();
  for (const graph::passes::FusionNote& n : impl_->notes)
    if (n.fused_into.empty()) unfused.push_back({{"pass", n.pass}, {"node", n.node}, {"reason", n.reason}});
  return {{"folded", impl_->model.folded},
          {"nodes_before", impl_->nodes_before},
          {"nodes_after", impl_->model.graph.live_nodes()},
          {"fusion", impl_->opts.fusion},
          {"passes", passes},
          {"unfused", unfused},
          {"kernels", impl_->program.steps.size()}};
}

// ---------------------------------------------------------------------------------------------------------------
// Session

struct Session::Impl {
  config::LoadedConfig config;
  hw::core::Mode mode;
  runtime::RunOutputs outputs;
  std::unique_ptr<runtime::Device> dev;
  std::vector<runtime::Stream> streams;  // reused by every call
  bool begun = false, finished = false;
  double wall = 0;                      // host seconds spent simulating, all calls
  std::uint32_t last_first_task = 0;     // the last call's first task, for status()

  Impl(config::LoadedConfig c, hw::core::Mode m, const runtime::OutputPaths& paths)
      : config(std::move(c)), mode(m), outputs(paths, config.chip) {
    dev = std::make_unique<runtime::Device>(config.chip, mode, outputs.trace_factory());
  }

  // Runs `host` on the device as one call and returns its report window's report, `wall` its host seconds.
  nlohmann::json call(const std::function<void(runtime::Device&)>& host) {
    if (finished) throw InputError("the device has finished (its trace and summary are written): no more calls");
    if (!begun) {
      dev->begin();
      begun = true;
    }
    const traces::StatsRegistry::Snapshot stats = dev->chip().stats().snapshot();
    const runtime::ReportWindow window = runtime::window_from_now(*dev, stats);
    last_first_task = window.first_task;
    const auto t0 = std::chrono::steady_clock::now();
    dev->call(host);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    wall += seconds;
    nlohmann::json report = runtime::run_report(*dev, seconds, window);
    return report;
  }
};

Session::Session(config::LoadedConfig config, hw::core::Mode mode, const runtime::OutputPaths& outputs)
    : impl_(std::make_unique<Impl>(std::move(config), mode, outputs)) {}

Session::~Session() {
  // A session dropped without finish() (an error unwinding) ends quietly: its own error is the one to report.
  try {
    if (impl_->begun && !impl_->finished && !impl_->dev->stopped()) impl_->dev->end();
  } catch (...) {
  }
}

const config::ChipConfig& Session::chip() const { return impl_->config.chip; }
const config::LoadedConfig& Session::config() const { return impl_->config; }
hw::core::Mode Session::mode() const { return impl_->mode; }
runtime::Device& Session::device() { return *impl_->dev; }
bool Session::finished() const { return impl_->finished; }

void Session::on_progress(std::function<void(std::uint32_t, std::uint32_t, double)> f) {
  impl_->dev->on_progress(std::move(f));
}

RunResult Session::run(const Model& model, const std::vector<std::vector<std::uint8_t>>& inputs) {
  const Model::Impl& m = *model.impl_;
  const graph::Executor& executor = *m.executor;
  const bool functional = this->functional();
  executor.check_inputs(*impl_->dev, inputs);
  graph::Execution ex;
  const std::uint32_t first = impl_->dev->submitted();
  nlohmann::json report = impl_->call([&](runtime::Device& d) { ex = executor.enqueue(d, inputs, impl_->streams, true); });

  report["model"] = model.model_report();
  // The model's load (constants copied in) and one execution (inputs in, kernels, outputs out) as separate spans.
  double load_start = 1e300, load_end = 0, exec_start = 1e300, exec_end = 0;
  for (const auto& t : impl_->dev->tasks()) {
    if (t.task_id < first) continue;
    if (t.task_id < ex.first_execute_task) {
      load_start = std::min(load_start, t.fetched_ns);
      load_end = std::max(load_end, t.end_ns);
    } else {
      exec_start = std::min(exec_start, t.fetched_ns);
      exec_end = std::max(exec_end, t.end_ns);
    }
  }
  if (exec_end < exec_start) exec_start = exec_end = 0;
  // A first call's load counts from the device's start (as `npusim run` always has); a later one from its own start.
  if (first == 0 || load_end < load_start) load_start = 0;
  const double exec_ns = exec_end - exec_start;
  nlohmann::json g = model.graph_report();
  g["load_us"] = (load_end > 0 ? load_end - load_start : 0.0) / 1e3;
  g["execute_us"] = exec_ns / 1e3;
  g["execute_cycles"] = static_cast<std::uint64_t>(exec_ns * 1e-9 * chip().clock.core_hz);
  g["peak_device_bytes"] = ex.device_bytes;
  g["constant_bytes"] = ex.constant_bytes;
  g["arena_bytes"] = ex.arena_bytes;
  g["unplanned_device_bytes"] = ex.naive_bytes;
  g["streams"] = ex.streams;
  g["steps"] = ex.steps;
  report["graph"] = g;

  const graph::Program& program = m.program;
  if (functional) {
    nlohmann::json outs = nlohmann::json::array();
    for (std::size_t k = 0; k < program.outputs.size(); ++k) {
      const graph::ProgramTensor& t = program.tensors[static_cast<std::size_t>(program.outputs[k])];
      double sum = 0, max_abs = 0;
      const std::uint64_t n = ops::elements(t.desc.shape);
      bool finite = true;
      for (std::uint64_t i = 0; i < n; ++i) {
        const double v = hw::isa::load_float(&ex.outputs[k][i * hw::isa::dtype_bytes(t.desc.dtype)], t.desc.dtype);
        finite = finite && std::isfinite(v);
        sum += v;
        max_abs = std::max(max_abs, std::abs(v));
      }
      outs.push_back({{"name", t.name}, {"shape", ops::shape_string(t.desc.shape)},
                      {"dtype", std::string(hw::isa::dtype_name(t.desc.dtype))}, {"mean", n ? sum / static_cast<double>(n) : 0.0},
                      {"max_abs", max_abs}, {"finite", finite}});
    }
    report["outputs"] = outs;
  }
  return RunResult{functional ? std::move(ex.outputs) : std::vector<std::vector<std::uint8_t>>{}, std::move(report)};
}

namespace {

const ops::OpDef& find(const std::string& name) {
  const ops::OpDef* op = ops::find_op(name);
  if (!op) {
    std::string names;
    for (const auto& o : ops::all_ops()) names += (names.empty() ? "" : ", ") + o.name;
    throw InputError("no op named '" + name + "' (there are: " + names + ")");
  }
  return *op;
}

}  // namespace

nlohmann::json Session::call(const std::function<void(runtime::Device&)>& host) {
  return impl_->call(host);
}

ops::Call Session::op_call(const std::string& name, const ops::Params& params) { return ops::parse_call(find(name), params); }

std::vector<ops::TensorDesc> Session::op_inputs(const std::string& name, const ops::Params& params, hw::isa::DType dtype) {
  const ops::OpDef& op = find(name);
  (void)ops::parse_call(op, params);  // unknown keys and bad values are named first
  return op.inputs(params, dtype);
}

namespace {

// The `op` section of an op call's report: the call, its tiling, and its rates over the kernel's span.
nlohmann::json op_report(const std::string& name, const ops::Params& params, const std::vector<ops::TensorDesc>& inputs,
                         const ops::OpPlan& plan, double kernel_s, const config::ChipConfig& chip) {
  nlohmann::json shapes = nlohmann::json::array();
  for (const auto& t : inputs) shapes.push_back(ops::shape_string(t.shape));
  nlohmann::json o = {
      {"name", name},
      {"dtype", std::string(hw::isa::dtype_name(inputs.empty() ? plan.outputs[0].dtype : inputs[0].dtype))},
      {"params", params},
      {"block_dim", plan.block_dim},
      {"tiling", plan.tiling},
      {"inputs", shapes},
      {"output", ops::shape_string(plan.outputs[0].shape)},
      {"workspace_bytes", plan.workspace_bytes}};
  if (plan.flops > 0) {
    // Achieved rate over the kernel's own span (first block start to last block end), in 10^12 FLOP/s.
    o["flops"] = plan.flops;
    o["tflops"] = plan.flops / kernel_s / 1e12;
  }
  // The op's compulsory traffic (every input read once, every output written once, unless the op states less) over
  // the kernel's span: the
  // effective bandwidth, and it over the HBM peak.
  std::uint64_t op_bytes = 0;
  for (const auto& t : inputs) op_bytes += t.bytes();
  for (const auto& t : plan.outputs) op_bytes += t.bytes();
  if (plan.compulsory_bytes) op_bytes = *plan.compulsory_bytes;
  o["bytes"] = op_bytes;
  o["effective_GBps"] = static_cast<double>(op_bytes) / kernel_s / 1e9;
  o["hbm_peak_fraction"] = static_cast<double>(op_bytes) / kernel_s / chip.hbm.peak_bytes_per_second();
  nlohmann::json out_descs = nlohmann::json::array();
  for (const auto& t : plan.outputs)
    out_descs.push_back({{"shape", ops::shape_string(t.shape)}, {"dtype", std::string(hw::isa::dtype_name(t.dtype))}});
  o["outputs"] = out_descs;
  return o;
}

}  // namespace

RunResult Session::run_op(const std::string& name, const ops::Params& params, const std::vector<ops::TensorDesc>& inputs,
                          const std::vector<std::vector<std::uint8_t>>& values) {
  return run_op(name, op_call(name, params), inputs, values, params);
}

RunResult Session::run_op(const std::string& name, const ops::Call& call, const std::vector<ops::TensorDesc>& inputs,
                          const std::vector<std::vector<std::uint8_t>>& values, const ops::Params& params,
                          std::uint32_t warmup) {
  const ops::OpDef& op = find(name);
  if (warmup > kMaxWarmup)
    throw InputError("op " + name + ": warmup=" + std::to_string(warmup) + " is more than " +
                     std::to_string(kMaxWarmup) + " launches");
  const bool functional = this->functional();
  if (functional) {
    if (values.size() != inputs.size())
      throw InputError("op " + name + ": " + std::to_string(inputs.size()) + " inputs described, " +
                       std::to_string(values.size()) + " given");
    for (std::size_t i = 0; i < inputs.size(); ++i)
      if (values[i].size() != inputs[i].bytes())
        throw InputError("op " + name + ": input " + std::to_string(i) + " is " + ops::shape_string(inputs[i].shape) + " " +
                         std::string(hw::isa::dtype_name(inputs[i].dtype)) + " (" + std::to_string(inputs[i].bytes()) +
                         " bytes), " + std::to_string(values[i].size()) + " bytes given");
  }
  // Shapes and tiling are checked before anything is simulated.
  const ops::OpPlan plan = ops::plan_op(op, inputs, call, chip());
  std::vector<std::vector<std::uint8_t>> out(plan.outputs.size());
  std::vector<std::uint64_t> buffers;
  auto stream = [&](runtime::Device& d) {
    if (impl_->streams.empty()) impl_->streams.push_back(d.create_stream());
    return impl_->streams[0];
  };
  // Inputs allocated and copied in, outputs and workspace allocated.
  auto set_up = [&](runtime::Device& d, runtime::Stream s) {
    for (std::size_t i = 0; i < inputs.size(); ++i) {
      buffers.push_back(d.malloc(inputs[i].bytes()));
      d.memcpy_async(buffers.back(), functional ? values[i].data() : nullptr, inputs[i].bytes(), s);
    }
    for (std::size_t o = 0; o < plan.outputs.size(); ++o) {
      const int same = o < plan.in_place.size() ? plan.in_place[o] : -1;
      buffers.push_back(same >= 0 ? buffers.at(static_cast<std::size_t>(same)) : d.malloc(plan.outputs[o].bytes()));
    }
    if (plan.workspace_bytes) buffers.push_back(d.malloc(plan.workspace_bytes));
  };
  auto launch = [&](runtime::Device& d, runtime::Stream s) {
    d.launch(name, plan.type, plan.block_dim, plan.kernel(buffers), s);
  };
  auto copy_out_and_free = [&](runtime::Device& d, runtime::Stream s) {
    for (std::size_t i = 0; i < plan.outputs.size(); ++i) {
      if (functional) out[i].resize(plan.outputs[i].bytes());
      d.memcpy_async(functional ? out[i].data() : nullptr, buffers[inputs.size() + i], plan.outputs[i].bytes(), s);
    }
    d.synchronize();
    for (std::size_t b = 0; b < buffers.size(); ++b) {
      const std::size_t o = b - inputs.size();
      const bool shared = b >= inputs.size() && o < plan.in_place.size() && plan.in_place[o] >= 0;
      if (!shared) d.free(buffers[b]);
    }
  };
  nlohmann::json report;
  if (warmup == 0) {
    report = impl_->call([&](runtime::Device& d) {
      set_up(d, stream(d));
      launch(d, stream(d));
      copy_out_and_free(d, stream(d));
    });
  } else {
    // As a benchmark loop: the warm-up launches, then the measured launch alone (its report's host.span_us is its
    // enqueue to its completion), then the copies out outside the report.
    impl_->call([&](runtime::Device& d) {
      set_up(d, stream(d));
      for (std::uint32_t w = 0; w < warmup; ++w) launch(d, stream(d));
      d.synchronize();
    });
    report = impl_->call([&](runtime::Device& d) {
      launch(d, stream(d));
      d.synchronize();
    });
    impl_->call([&](runtime::Device& d) { copy_out_and_free(d, stream(d)); });
  }
  report["op"] = op_report(name, params, inputs, plan, report["kernel"]["time_us"].get<double>() * 1e-6, chip());
  return RunResult{functional ? std::move(out) : std::vector<std::vector<std::uint8_t>>{}, std::move(report)};
}

nlohmann::json Session::status() const {
  const config::ChipConfig& c = chip();
  const runtime::AllocatorStats m = impl_->dev->memory_stats();
  nlohmann::json s;
  s["device"] = 0;
  s["name"] = c.name;
  s["config"] = impl_->config.source;
  s["health"] = impl_->dev->stopped() && !impl_->finished ? "Alarm" : "OK";
  s["organisation"] = c.cores.organisation;
  const std::uint64_t cores = c.split() ? c.cores.aic + c.cores.aiv : c.cores.ai_cores + c.cores.vector_cores;
  s["ai_cores"] = cores;
  s["clock_MHz"] = c.clock.core_hz / 1e6;
  s["hbm_capacity_bytes"] = m.capacity;
  s["hbm_used_bytes"] = m.used;
  s["hbm_peak_used_bytes"] = m.peak_used;
  s["tasks"] = impl_->dev->submitted();
  s["device_time_us"] = impl_->dev->tasks().empty() ? 0.0 : impl_->dev->tasks().back().end_ns / 1e3;
  // AICore(%): over the last call's span (its first task's start to its last task's end), the share of core time
  // spent running blocks: block cycles summed over the blocks, over the span times the chip's AI cores (AIC + AIV).
  // Null before the first call.
  s["aicore_util"] = nullptr;
  double first = 1e300, last = 0, busy_cycles = 0;
  for (const auto& t : impl_->dev->tasks()) {
    if (t.task_id < impl_->last_first_task || !impl_->begun) continue;
    first = std::min(first, t.fetched_ns);
    last = std::max(last, t.end_ns);
    for (const auto& run : t.runs) busy_cycles += static_cast<double>(run.end - run.start);
  }
  if (last > first && cores > 0) s["aicore_util"] = busy_cycles / ((last - first) * 1e-9 * c.clock.core_hz * static_cast<double>(cores));
  return s;
}

nlohmann::json Session::report() const {
  if (!impl_->begun) return nlohmann::json::object();
  return runtime::run_report(*impl_->dev, impl_->wall);
}

void Session::finish(nlohmann::json* report) {
  if (impl_->finished) return;
  impl_->finished = true;
  if (impl_->begun) impl_->dev->end();
  nlohmann::json scratch;
  impl_->outputs.finish(*impl_->dev, report ? *report : scratch);
}

}  // namespace npusim::stack::framework
