#include "cli/run_command.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <map>
#include <random>
#include <sstream>

#include <unistd.h>

#include <nlohmann/json.hpp>

#include "cli/npy.hpp"
#include "cli/tensor_data.hpp"
#include "common/config/loader.hpp"
#include "common/util/error.hpp"
#include "common/util/strings.hpp"
#include "stack/framework/onnx_import.hpp"
#include "stack/framework/session.hpp"
#include "stack/graph/lower.hpp"

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
    if (!out.emplace(item.substr(0, eq), v).second) {
      throw InputError("--dim " + item.substr(0, eq) + " is given twice (" + std::to_string(out[item.substr(0, eq)]) +
                       " and " + std::to_string(v) + ")");
    }
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

// Present and not a directory: a device or a pipe is taken too, so that reading it names what it is.
bool exists(const std::string& path) {
  std::error_code ec;
  return std::filesystem::exists(path, ec) && !std::filesystem::is_directory(path, ec);
}

// The file each model input (`names`, in the graph's order) is read from: DIR/NAME.npy or DIR/NAME.pb (an ONNX
// TensorProto) when every input has one, else ONNX's test-data layout, DIR/input_K.pb for the K-th input (as ONNX's
// own runner takes test_data_set_N). Mixing the two is an error naming what is missing.
std::vector<std::string> input_files(const std::string& dir, const std::vector<std::string>& names) {
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec)) throw InputError("--inputs " + dir + ": not a directory");
  std::vector<std::string> by_name, by_position, missing;
  for (std::size_t k = 0; k < names.size(); ++k) {
    const std::string& name = names[k];
    const std::string npy = file_of(dir, name), pb = npy.substr(0, npy.size() - 4) + ".pb";
    by_name.push_back(exists(npy) ? npy : exists(pb) ? pb : "");
    by_position.push_back(dir + "/input_" + std::to_string(k) + ".pb");
    if (by_name.back().empty() && !exists(by_position.back())) {
      std::string what = "'" + name + "' (";
      what.append(npy).append(", ").append(pb).append(" or, by position, ").append(by_position.back()).append(")");
      missing.push_back(what);
    }
  }
  if (std::all_of(by_name.begin(), by_name.end(), [](const std::string& f) { return !f.empty(); })) return by_name;
  if (std::all_of(by_position.begin(), by_position.end(), exists)) return by_position;
  std::string list;
  for (const std::string& m : missing) list += (list.empty() ? "" : "; ") + m;
  if (missing.empty()) {  // each input has a file, but some only by name and others only by position
    throw InputError("--inputs " + dir + ": files are named after some inputs and numbered (input_K.pb) for others; " +
                     "use one layout for all " + std::to_string(names.size()) + " inputs");
  }
  throw InputError("--inputs " + dir + ": no file for input " + list);
}

// An input file (.npy or .pb) as a host tensor of the file's element type; a rank-0 .npy stays rank 0.
graph::Tensor read_input(const std::string& path) {
  if (path.size() > 4 && path.compare(path.size() - 4, 4, ".npy") == 0) {
    const NpyArray a = read_npy(path);
    graph::Tensor t;
    t.type = a.file_type != graph::ElemType::kUndefined ? a.file_type : graph::elem_type_of(a.dtype);
    for (auto d : a.shape) t.shape.push_back(static_cast<std::int64_t>(d));
    t.bytes = a.bytes;
    return t;
  }
  return stack::framework::read_tensor_pb(path).second;
}

// The bytes of program input `pt` from its file's tensor `t`, in the device's storage type; an error naming the
// input and the file when the type or shape differs from the model's.
std::vector<std::uint8_t> device_input(const graph::ProgramTensor& pt, graph::Tensor t, const std::string& path) {
  const std::string what = "input '" + pt.name + "' (" + path + ")";
  if (pt.type == graph::ElemType::kBool && t.type != graph::ElemType::kBool &&
      graph::storage_dtype(t.type) == hw::isa::DType::kInt32) {  // integers for a bool input: x != 0
    const std::vector<std::int64_t> v = t.as_ints();
    t.bytes.assign(v.size(), 0);
    for (std::size_t i = 0; i < v.size(); ++i) t.bytes[i] = v[i] != 0;
    t.type = graph::ElemType::kBool;
  }
  const auto dt = graph::storage_dtype(t.type);
  if (!dt) throw InputError(what + ": element type " + std::string(graph::elem_name(t.type)) + " has no device form");
  ops::Shape shape;
  for (auto d : t.shape) shape.push_back(static_cast<std::uint64_t>(d));
  if (shape.empty()) shape = {1};  // a rank-0 array: the program holds scalars as one element
  if (*dt != pt.desc.dtype || shape != pt.desc.shape) {
    const auto own = graph::device_dtype(t.type);  // the file's type as the device names it, else its own name
    throw InputError(what + ": expected " + ops::shape_string(pt.desc.shape) + " " +
                     std::string(hw::isa::dtype_name(pt.desc.dtype)) + ", got " + ops::shape_string(shape) + " " +
                     std::string(own ? hw::isa::dtype_name(*own) : graph::elem_name(t.type)));
  }
  return graph::to_storage(t.type, t.bytes, what);
}

// The kernels in launch order: task id, kernel, device time, and the node after fusion with the imported nodes it
// stands for. At most 40 lines; --json's graph.steps and --summary have all.
void print_kernels(const nlohmann::json& report, std::ostream& out) {
  constexpr std::size_t max_lines = 40, max_sources = 4;
  std::map<std::uint64_t, double> dur;
  for (const auto& t : report["tasks"]) dur[t["id"].get<std::uint64_t>()] = t["dur_us"].get<double>();
  const auto& steps = report["graph"]["steps"];
  out << "  kernels     task, kernel, device time, graph node <- the imported nodes it runs:\n";
  std::size_t shown = 0;
  for (const auto& st : steps) {
    if (shown++ == max_lines) {
      out << "    ... and " << steps.size() - max_lines << " more (--json: graph.steps; --summary)\n";
      break;
    }
    const auto task = st["task"].get<std::uint64_t>();
    out << "    " << std::setw(5) << task << "  " << std::left << std::setw(18) << st["kernel"].get<std::string>()
        << std::right << std::setw(10) << dur[task] << " us  " << st["node"].get<std::string>();
    const auto& nodes = st["nodes"];
    const bool itself =
        nodes.size() == 1 && ends_with(nodes[0].get<std::string>(), " " + st["node"].get<std::string>());
    if (!itself) {
      out << " <-";
      for (std::size_t i = 0; i < nodes.size() && i < max_sources; ++i)
        out << (i ? ", " : " ") << nodes[i].get<std::string>();
      if (nodes.size() > max_sources) out << " (+" << nodes.size() - max_sources << " more)";
    }
    out << "\n";
  }
}

// --explain-fusion: each candidate the fusion passes looked at, one line each.
void explain_fusion(const stack::framework::Model& model, bool fusion, std::ostream& out) {
  if (!fusion) {
    out << "fusion: off (--no-fusion)\n";
    return;
  }
  const auto& notes = model.fusion_notes();
  if (notes.empty()) out << "fusion: no attention candidate (a Softmax feeding a MatMul) in the graph\n";
  for (const auto& n : notes) {
    out << n.pass << ": " << n.node << ": ";
    if (n.fused_into.empty())
      out << "not fused: " << n.reason << "\n";
    else
      out << "fused into " << n.fused_into << (n.causal ? " (causal)" : "") << "\n";
  }
}

}  // namespace

Progress::Progress(stack::framework::Session& session, bool forced)
    : tty_(isatty(STDERR_FILENO) != 0), t0_(std::chrono::steady_clock::now()) {
  if (!tty_ && !forced) return;
  session.on_progress([this](std::uint32_t done, std::uint32_t submitted, double device_ns) {
    const double now = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count();
    std::ostringstream os;
    os << std::fixed << std::setprecision(3) << "npusim run: " << done << "/" << submitted << " tasks done, "
       << device_ns / 1e6 << " ms simulated, " << std::setprecision(1) << now << " s";
    line_ = os.str();
    if (shown_at_ >= 0 && now - shown_at_ < (tty_ ? 0.5 : 1.0)) return;
    shown_at_ = now;
    shown_ = line_;
    std::cerr << (tty_ ? "\r" + line_ : line_ + "\n") << std::flush;
  });
}

void Progress::done() {
  if (!line_.empty()) std::cerr << (tty_ ? "\r" + line_ + "\n" : line_ == shown_ ? "" : line_ + "\n") << std::flush;
}

void prepare_outputs_dir(const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  std::error_code is_dir_ec;
  if (!std::filesystem::is_directory(dir, is_dir_ec))
    throw InputError("--outputs " + dir + ": not a directory and cannot be made one" +
                     (ec ? " (" + ec.message() + ")" : ""));
}

int run_model_command(const RunOptions& opts) {
  if (is_llm_model(opts.model)) return run_llm_command(opts);
  if (opts.llm_options)
    throw InputError(
        "--decode, --prompt-len, --batch and --page run an LLM from its HuggingFace config.json (give "
        "its directory or the file), not " +
        opts.model);
  const config::LoadedConfig loaded = config::load_config(opts.config, opts.sets);
  if ((!opts.inputs_dir.empty() || !opts.outputs_dir.empty()) && !opts.functional)
    throw InputError("--inputs and --outputs need --functional");
  stack::framework::CompileOptions copts;
  copts.dims = parse_dims(opts.dims);
  copts.fusion = !opts.no_fusion;
  copts.streams = opts.streams;
  // The given inputs are read before compiling: those whose values decide shapes are bound into the model.
  std::map<std::string, std::string> files;  // input name -> its file; the values are in copts.values
  if (!opts.inputs_dir.empty()) {
    const std::vector<std::string> names = stack::framework::onnx_input_names(opts.model);
    const std::vector<std::string> paths = input_files(opts.inputs_dir, names);
    for (std::size_t k = 0; k < names.size(); ++k) {
      files[names[k]] = paths[k];
      copts.values[names[k]] = read_input(paths[k]);
    }
  }
  const stack::framework::Model model = stack::framework::Model::from_file(opts.model, loaded.chip, copts);
  const graph::Program& program = model.program();
  if (opts.explain_fusion) explain_fusion(model, copts.fusion, opts.json ? std::cerr : std::cout);
  const hw::core::Mode mode = opts.functional ? hw::core::Mode::kFunctional : hw::core::Mode::kTimingOnly;
  if (!opts.outputs_dir.empty()) prepare_outputs_dir(opts.outputs_dir);
  std::vector<std::vector<std::uint8_t>> inputs;
  if (opts.functional) {
    std::mt19937_64 rng(2026);
    for (std::size_t k = 0; k < program.inputs.size(); ++k) {
      const graph::ProgramTensor& pt = program.tensors[static_cast<std::size_t>(program.inputs[k])];
      if (const auto it = files.find(pt.name); it != files.end()) {
        inputs.push_back(device_input(pt, copts.values.at(pt.name), it->second));
        continue;
      }
      std::vector<std::uint8_t> bytes;
      ops::HostTensor values;
      random_tensor(pt.desc, {-1.0f, 1.0f}, rng, bytes, values);
      inputs.push_back(std::move(bytes));
    }
  }
  stack::framework::Session session(loaded, mode, opts.files);
  Progress progress(session, opts.progress);
  stack::framework::RunResult result = session.run(model, inputs);
  progress.done();
  nlohmann::json& report = result.report;
  if (!opts.outputs_dir.empty()) {
    // Each output as DIR/NAME.npy and DIR/NAME.pb, and by position as DIR/output_K.pb (ONNX's test-data layout).
    for (std::size_t k = 0; k < program.outputs.size(); ++k) {
      const graph::ProgramTensor& t = program.tensors[static_cast<std::size_t>(program.outputs[k])];
      const std::string npy = file_of(opts.outputs_dir, t.name);
      // int64 and bool outputs in their own types (the device holds them as int32 and int8).
      // Integer and bool outputs the device stores in another type (int32, int8) go back to the model's type.
      const bool wide = t.type != graph::ElemType::kUndefined && !graph::device_dtype(t.type) &&
                        graph::elem_type_of(t.desc.dtype) != t.type;
      const std::vector<std::uint8_t> bytes = wide ? graph::from_storage(t.type, result.outputs[k]) : result.outputs[k];
      const ops::Shape shape = t.rank0 ? ops::Shape{} : t.desc.shape;  // a rank-0 output keeps its rank
      write_npy(npy, NpyArray{t.desc.dtype, shape, bytes, wide ? t.type : graph::ElemType::kUndefined});
      graph::Tensor pb;
      pb.type = wide ? t.type : graph::elem_type_of(t.desc.dtype);
      for (auto d : shape) pb.shape.push_back(static_cast<std::int64_t>(d));
      pb.bytes = bytes;
      // NAME.pb, unless NAME is output_J, another output's positional file (ONNX's test data names outputs so).
      bool positional = false;
      for (std::size_t j = 0; j < program.outputs.size(); ++j)
        positional = positional || std::filesystem::path(npy).stem() == "output_" + std::to_string(j);
      if (!positional) stack::framework::write_tensor_pb(npy.substr(0, npy.size() - 4) + ".pb", t.name, pb);
      stack::framework::write_tensor_pb(opts.outputs_dir + "/output_" + std::to_string(k) + ".pb", t.name, pb);
    }
  }
  session.finish(&report);
  if (opts.json) {
    std::cout << report.dump(2) << "\n";
    return 0;
  }
  const nlohmann::json& g = report["graph"];
  std::cout << std::fixed << std::setprecision(3) << "run " << opts.model << " on " << loaded.chip.name << ": "
            << model.nodes_before() << " nodes (" << g["folded"].get<std::int64_t>() << " more folded at import) -> "
            << g["nodes_after"].get<std::size_t>() << " after fusion -> " << program.steps.size() << " kernels\n";
  for (const auto& [name, count] : model.passes_fired()) std::cout << "  pass        " << name << " fired " << count << " time(s)\n";
  print_kernels(report, std::cout);
  std::cout << "  execute     " << g["execute_cycles"].get<std::uint64_t>() << " cycles, " << g["execute_us"].get<double>()
            << " us on " << g["streams"].get<std::uint32_t>() << " stream(s) (inputs in, kernels, outputs out)\n";
  std::cout << "  device      " << report["cycles"].get<std::uint64_t>() << " cycles, " << report["time_us"].get<double>()
            << " us in all, with the model's load (constants in: " << g["load_us"].get<double>() << " us)\n";
  std::cout << "  memory      " << g["peak_device_bytes"].get<std::uint64_t>() << " B of device memory at the peak ("
            << g["constant_bytes"].get<std::uint64_t>() << " B constants + " << g["arena_bytes"].get<std::uint64_t>()
            << " B activation arena; " << g["unplanned_device_bytes"].get<std::uint64_t>() << " B without reuse)\n";
  if (report.contains("trace")) std::cout << "  trace       " << opts.files.trace << "\n";
  return 0;
}

}  // namespace npusim::cli
