#include "cli/run_command.hpp"

#include <chrono>
#include <fstream>
#include <cmath>
#include <filesystem>
#include <iomanip>
#include <iostream>
#include <map>
#include <random>
#include <sstream>

#include <unistd.h>

#include <nlohmann/json.hpp>

#include "cli/npy.hpp"
#include "cli/run_outputs.hpp"
#include "cli/tensor_data.hpp"
#include "common/config/loader.hpp"
#include "common/util/error.hpp"
#include "stack/framework/onnx_import.hpp"
#include "stack/graph/execute.hpp"
#include "stack/graph/lower.hpp"
#include "stack/graph/passes/passes.hpp"
#include "stack/runtime/timeline.hpp"

namespace npusim::cli {

namespace graph = stack::graph;
namespace ops = stack::ops;

namespace {

std::map<std::string, std::int64_t> parse_dims(const std::vector<std::string>& items) {
  std::map<std::string, std::int64_t> out;
  for (const std::string& item : items) {
    const auto eq = item.find('=');
    std::size_t pos = 0;
    long long v = 0;
    try {
      if (eq != std::string::npos) v = std::stoll(item.substr(eq + 1), &pos);
    } catch (const std::exception&) {
      pos = 0;
    }
    if (eq == std::string::npos || eq == 0 || pos == 0 || pos != item.size() - eq - 1 || v <= 0)
      throw InputError("--dim '" + item + "' is not NAME=SIZE with a positive SIZE");
    out[item.substr(0, eq)] = v;
  }
  return out;
}

// A value's file name: its name with path separators replaced.
std::string file_of(const std::string& dir, const std::string& name) {
  std::string n = name;
  for (char& c : n)
    if (c == '/' || c == '\\' || c == ':') c = '_';
  return dir + "/" + n + ".npy";
}

}  // namespace

int run_model_command(const RunOptions& opts) {
  const config::LoadedConfig loaded = config::load_config(opts.config, opts.sets);
  stack::framework::ImportedModel model = stack::framework::import_onnx(opts.model, parse_dims(opts.dims));
  graph::Graph& g = model.graph;
  const std::size_t nodes_before = g.live_nodes();
  std::vector<std::pair<std::string, int>> fired;
  if (!opts.no_fusion) {
    try {
      fired = graph::passes::run_all(g);
    } catch (const graph::GraphError& e) {
      throw InputError(opts.model + ": a pass left the graph invalid: " + e.what());
    }
  }
  const std::vector<std::string> unsupported = stack::framework::unsupported_nodes(g, graph::supported_op_types());
  if (!unsupported.empty()) {
    std::string list;
    for (const auto& u : unsupported) list += (list.empty() ? "" : ", ") + u;
    throw InputError(opts.model + ": " + std::to_string(unsupported.size()) + " node(s) with ops npusim does not run: " + list);
  }
  graph::Program program;
  try {
    program = graph::lower(g);
  } catch (const InputError& e) {
    throw InputError(opts.model + ": " + e.what());
  }
  // Every step is planned (tiling, shapes) before anything is simulated.
  const graph::Executor executor(program, loaded.chip, opts.streams);
  const hw::core::Mode mode = opts.functional ? hw::core::Mode::kFunctional : hw::core::Mode::kTimingOnly;

  if ((!opts.inputs_dir.empty() || !opts.outputs_dir.empty()) && !opts.functional)
    throw InputError("--inputs and --outputs need --functional");
  if (!opts.outputs_dir.empty()) {  // made if missing, as `mkdir -p` would, before anything runs
    std::error_code ec;
    std::filesystem::create_directories(opts.outputs_dir, ec);
    std::error_code is_dir_ec;
    if (!std::filesystem::is_directory(opts.outputs_dir, is_dir_ec))
      throw InputError("--outputs " + opts.outputs_dir + ": not a directory and cannot be made one" + (ec ? " (" + ec.message() + ")" : ""));
  }
  std::vector<std::vector<std::uint8_t>> inputs;
  if (opts.functional) {
    std::mt19937_64 rng(2026);
    for (int t : program.inputs) {
      const graph::ProgramTensor& pt = program.tensors[static_cast<std::size_t>(t)];
      if (!opts.inputs_dir.empty()) {
        // DIR/NAME.npy, or else DIR/NAME.pb (an ONNX TensorProto).
        std::string path = file_of(opts.inputs_dir, pt.name);
        NpyArray a;
        if (std::ifstream(path).good()) {
          a = read_npy(path);
          if (a.shape.empty()) a.shape = {1};  // a rank-0 array: the program holds scalars as one element
        } else {
          path = path.substr(0, path.size() - 4) + ".pb";
          if (!std::ifstream(path).good())
            throw InputError("input '" + pt.name + "': neither " + path.substr(0, path.size() - 3) + ".npy nor " + path + " exists");
          const graph::Tensor t = stack::framework::read_tensor_pb(path).second;
          const auto dt = graph::device_dtype(t.type);
          if (!dt) throw InputError("input '" + pt.name + "' (" + path + "): element type " + std::string(graph::elem_name(t.type)) + " is not float");
          a.dtype = *dt;
          for (auto d : t.shape) a.shape.push_back(static_cast<std::uint64_t>(d));
          if (a.shape.empty()) a.shape = {1};
          a.bytes = t.bytes;
        }
        if (a.dtype != pt.desc.dtype || a.shape != pt.desc.shape)
          throw InputError("input '" + pt.name + "' (" + path + "): expected " + ops::shape_string(pt.desc.shape) + " " +
                           std::string(hw::isa::dtype_name(pt.desc.dtype)) + ", got " + ops::shape_string(a.shape) + " " +
                           std::string(hw::isa::dtype_name(a.dtype)));
        inputs.push_back(a.bytes);
        continue;
      }
      std::vector<std::uint8_t> bytes;
      ops::HostTensor values;
      random_tensor(pt.desc, {-1.0f, 1.0f}, rng, bytes, values);
      inputs.push_back(std::move(bytes));
    }
  }
  RunOutputs outputs(opts.trace, opts.summary, loaded.chip.clock.core_hz);
  stack::runtime::Device dev(loaded.chip, mode, outputs.trace_factory());
  const auto t0 = std::chrono::steady_clock::now();
  // Progress on stderr: on a terminal one line rewritten at most twice a second, with --progress elsewhere a line
  // at most every second; the final state always ends the report.
  const bool tty = isatty(STDERR_FILENO) != 0, progress = tty || opts.progress;
  double shown_at = -1;
  std::string line, shown;
  if (progress) {
    dev.on_progress([&](std::uint32_t done, std::uint32_t submitted, double device_ns) {
      const double now = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      std::ostringstream os;
      os << std::fixed << std::setprecision(3) << "npusim run: " << done << "/" << submitted << " tasks done, "
         << device_ns / 1e6 << " ms simulated, " << std::setprecision(1) << now << " s";
      line = os.str();
      if (shown_at >= 0 && now - shown_at < (tty ? 0.5 : 1.0)) return;
      shown_at = now;
      shown = line;
      std::cerr << (tty ? "\r" + line : line + "\n") << std::flush;
    });
  }
  const graph::Execution ex = executor.run(dev, inputs);
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (progress && !line.empty()) std::cerr << (tty ? "\r" + line + "\n" : line == shown ? "" : line + "\n") << std::flush;

  nlohmann::json report = stack::runtime::run_report(dev, wall);
  nlohmann::json passes_json = nlohmann::json::object();
  for (const auto& [name, count] : fired) passes_json[name] = count;
  report["model"] = {{"file", opts.model}, {"opset", model.opset}, {"producer", model.producer}, {"adapted_nodes", model.adapted}};
  // The model's load (constants copied in) and one execution (inputs in, kernels, outputs out) as separate spans.
  double load_end = 0, exec_start = 1e300, exec_end = 0;
  for (const auto& t : dev.tasks()) {
    if (t.task_id < ex.first_execute_task) {
      load_end = std::max(load_end, t.end_ns);
    } else {
      exec_start = std::min(exec_start, t.fetched_ns);
      exec_end = std::max(exec_end, t.end_ns);
    }
  }
  if (exec_end < exec_start) exec_start = exec_end = 0;
  const double exec_ns = exec_end - exec_start;
  report["graph"] = {{"folded", model.folded},
                     {"load_us", load_end / 1e3},
                     {"execute_us", exec_ns / 1e3},
                     {"execute_cycles", static_cast<std::uint64_t>(exec_ns * 1e-9 * loaded.chip.clock.core_hz)},
                     {"nodes_before", nodes_before},
                     {"nodes_after", g.live_nodes()},
                     {"fusion", !opts.no_fusion},
                     {"passes", passes_json},
                     {"kernels", program.steps.size()},
                     {"peak_device_bytes", ex.device_bytes},
                     {"constant_bytes", ex.constant_bytes},
                     {"arena_bytes", ex.arena_bytes},
                     {"unplanned_device_bytes", ex.naive_bytes},
                     {"streams", ex.streams},
                     {"steps", ex.steps}};
  if (opts.functional) {
    nlohmann::json outs = nlohmann::json::array();
    for (std::size_t k = 0; k < program.outputs.size(); ++k) {
      const graph::ProgramTensor& t = program.tensors[static_cast<std::size_t>(program.outputs[k])];
      double sum = 0, max_abs = 0;
      const std::uint64_t n = ops::elements(t.desc.shape);
      bool finite = true;
      for (std::uint64_t i = 0; i < n; ++i) {
        const double v = element(ex.outputs[k], t.desc.dtype, i);
        finite = finite && std::isfinite(v);
        sum += v;
        max_abs = std::max(max_abs, std::abs(v));
      }
      outs.push_back({{"name", t.name}, {"shape", ops::shape_string(t.desc.shape)},
                      {"dtype", std::string(hw::isa::dtype_name(t.desc.dtype))}, {"mean", n ? sum / static_cast<double>(n) : 0.0},
                      {"max_abs", max_abs}, {"finite", finite}});
    }
    report["outputs"] = outs;
    if (!opts.outputs_dir.empty()) {
      for (std::size_t k = 0; k < program.outputs.size(); ++k) {
        const graph::ProgramTensor& t = program.tensors[static_cast<std::size_t>(program.outputs[k])];
        const std::string npy = file_of(opts.outputs_dir, t.name);
        write_npy(npy, NpyArray{t.desc.dtype, t.desc.shape, ex.outputs[k]});
        graph::Tensor pb;
        pb.type = graph::elem_type_of(t.desc.dtype);
        for (auto d : t.desc.shape) pb.shape.push_back(static_cast<std::int64_t>(d));
        pb.bytes = ex.outputs[k];
        stack::framework::write_tensor_pb(npy.substr(0, npy.size() - 4) + ".pb", t.name, pb);
      }
    }
  }
  outputs.finish(dev, report);
  if (opts.json) {
    std::cout << report.dump(2) << "\n";
    return 0;
  }
  std::cout << std::fixed << std::setprecision(3) << "run " << opts.model << " on " << loaded.chip.name << ": "
            << nodes_before << " nodes (" << model.folded << " more folded at import) -> " << g.live_nodes() << " after fusion -> "
            << program.steps.size() << " kernels\n";
  for (const auto& [name, count] : fired) std::cout << "  pass        " << name << " fired " << count << " time(s)\n";
  std::cout << "  execute     " << report["graph"]["execute_cycles"].get<std::uint64_t>() << " cycles, " << exec_ns / 1e3
            << " us on " << ex.streams << " stream(s) (inputs in, kernels, outputs out)\n";
  std::cout << "  device      " << report["cycles"].get<std::uint64_t>() << " cycles, " << report["time_us"].get<double>()
            << " us in all, with the model's load (constants in: " << load_end / 1e3 << " us)\n";
  std::cout << "  memory      " << ex.device_bytes << " B of device memory at the peak (" << ex.constant_bytes
            << " B constants + " << ex.arena_bytes << " B activation arena; " << ex.naive_bytes << " B without reuse)\n";
  if (outputs.tracing()) std::cout << "  trace       " << opts.trace << "\n";
  return 0;
}

}  // namespace npusim::cli
