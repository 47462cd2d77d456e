// `npusim kernel FILE.cpp|LIB.so`: a user's kernel written against the kernel SDK, compiled (or loaded), its
// arguments bound from --arg and --tiling, launched through the runtime like the samples.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <map>
#include <random>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "cli/kernel_args.hpp"
#include "cli/kernel_command.hpp"
#include "cli/npy.hpp"
#include "cli/run_outputs.hpp"
#include "cli/tensor_data.hpp"
#include "common/config/loader.hpp"
#include "common/util/error.hpp"
#include "common/util/file.hpp"
#include "common/util/strings.hpp"
#include "stack/ops/op.hpp"
#include "stack/runtime/kernel_library.hpp"
#include "stack/runtime/report.hpp"

namespace npusim::cli {

namespace fs = std::filesystem;
namespace rt = stack::runtime;
using hw::isa::DType;

namespace {

bool is_source(const std::string& p) {
  for (const char* e : {".cpp", ".cc", ".cxx", ".C", ".c++"})
    if (ends_with(p, e)) return true;
  return false;
}
bool is_library(const std::string& p) { return ends_with(p, ".so") || p.find(".so.") != std::string::npos; }

std::string kinds_text(const rt::KernelEntry& e) {
  std::string s;
  for (std::size_t i = 0; i < e.kinds.size(); ++i) s += (i ? ", " : "") + rt::arg_kind_name(e.kinds[i]);
  return s;
}

}  // namespace

bool is_kernel_file(const std::string& name) {
  return is_source(name) || is_library(name) || name.find('/') != std::string::npos;
}

int run_user_kernel_command(const KernelOptions& opts) {
  if (!opts.params.empty()) throw InputError("-p applies to sample kernels; your kernel takes --arg and --tiling");
  if (!fs::is_regular_file(opts.name)) throw InputError(opts.name + ": no such file");

  // The library: loaded as given, or compiled from the source with the entry (cached).
  std::string entry_name = opts.entry;
  std::string library = opts.name;
  if (is_source(opts.name)) {
    const std::vector<std::string> globals = rt::global_functions(opts.name);
    std::string list;
    for (const auto& g : globals) list += (list.empty() ? "" : ", ") + g;
    if (entry_name.empty()) {
      if (globals.size() != 1) {
        throw InputError(opts.name + ": " + (globals.empty() ? std::string("declares no __global__ function")
                                                             : "declares several __global__ functions (" + list + ")") +
                         ": name the kernel with --entry");
      }
      entry_name = globals.front();
    } else if (!globals.empty() && std::find(globals.begin(), globals.end(), entry_name) == globals.end()) {
      throw InputError(opts.name + ": no __global__ function '" + entry_name + "' (it declares: " + list + ")");
    }
    rt::CompileOptions copts;
    copts.flags = opts.cxxflags;
    library = rt::compile_kernel(opts.name, {entry_name}, copts);
  } else if (!opts.cxxflags.empty()) {
    throw InputError("--cxxflags applies to a kernel source, not to the library " + opts.name);
  }
  const rt::KernelLibrary lib = rt::KernelLibrary::open(library);
  if (entry_name.empty()) {
    if (lib.entries().size() != 1) {
      std::string names;
      for (const auto& e : lib.entries()) names += (names.empty() ? "" : ", ") + e.name;
      throw InputError(opts.name + ": holds several kernels (" + names + "): name one with --entry");
    }
    entry_name = lib.entries().front().name;
  }
  const rt::KernelEntry& entry = lib.entry(entry_name);

  // The arguments, in the kernel's parameter order; the tiling struct last unless an argument is `tiling`.
  std::vector<KernelArg> args;
  std::set<std::string> names;
  for (std::size_t i = 0; i < opts.args.size(); ++i) {
    args.push_back(parse_kernel_arg(opts.args[i], i));
    if (!names.insert(args.back().name).second) throw InputError("--arg " + args.back().name + " is given twice");
  }
  const bool has_tiling_arg =
      std::any_of(args.begin(), args.end(), [](const KernelArg& a) { return a.kind == KernelArg::kTiling; });
  if (!opts.tiling.empty() && !has_tiling_arg) {
    KernelArg t;
    t.kind = KernelArg::kTiling;
    t.name = "tiling";
    args.push_back(t);
  }
  if (has_tiling_arg && opts.tiling.empty()) throw InputError("an argument is the tiling struct, but --tiling gives no values");
  if (args.size() != entry.kinds.size()) {
    std::string given;
    for (const KernelArg& a : args) given += (given.empty() ? "" : ", ") + a.name;
    throw InputError("kernel " + entry.name + " takes " + std::to_string(entry.kinds.size()) + " argument(s) (" +
                     kinds_text(entry) + "); " + std::to_string(args.size()) + " given (" +
                     (given.empty() ? "none" : given) + ")");
  }
  for (std::size_t i = 0; i < args.size(); ++i) {
    KernelArg& a = args[i];
    const rt::ArgKind k = entry.kinds[i];
    const std::string where = "--arg " + a.name + " (argument " + std::to_string(i) + " of " + entry.name + ", a " +
                              rt::arg_kind_name(k) + ")";
    if ((k == rt::ArgKind::kPointer) != (a.kind != KernelArg::kScalar)) {
      throw InputError(where + ": '" + a.spec + "' " +
                       (k == rt::ArgKind::kPointer ? "is a number; the parameter takes a tensor" : "is a tensor; the parameter takes a number"));
    }
    if (a.kind == KernelArg::kScalar) {
      double v;
      std::memcpy(&v, &a.word, sizeof v);
      if (k != rt::ArgKind::kFloat) {
        if (std::floor(v) != v) throw InputError(where + ": " + a.spec + " is not an integer");
        if (k == rt::ArgKind::kUnsigned && v < 0) throw InputError(where + ": " + a.spec + " is negative");
        a.word = k == rt::ArgKind::kSigned ? static_cast<std::uint64_t>(static_cast<std::int64_t>(v)) : static_cast<std::uint64_t>(v);
      }
    }
  }
  const bool functional = opts.functional || !opts.check_refs.empty() || !opts.outputs.empty();
  const hw::core::Mode mode = functional ? hw::core::Mode::kFunctional : hw::core::Mode::kTimingOnly;
  for (KernelArg& a : args) {
    if (a.kind == KernelArg::kTiling) {
      a.data = tiling_bytes(opts.tiling_schema, opts.tiling);
      a.bytes = a.data.size();
    }
  }
  if (opts.tiling.empty() && !opts.tiling_schema.empty()) throw InputError("--tiling-schema needs --tiling with the values");

  // --check: each reference names an out: argument (the only one when no name is given).
  std::vector<std::pair<std::size_t, NpyArray>> refs;
  for (const std::string& c : opts.check_refs) {
    std::string name, path = c;
    if (const auto eq = c.find('='); eq != std::string::npos) {
      name = c.substr(0, eq);
      path = c.substr(eq + 1);
    }
    std::vector<std::size_t> outs;
    for (std::size_t i = 0; i < args.size(); ++i)
      if (args[i].kind == KernelArg::kOutput && (name.empty() || args[i].name == name)) outs.push_back(i);
    if (outs.size() != 1) {
      throw InputError("--check " + c + ": " + (name.empty() ? std::string("several out: arguments; write NAME=REF.npy")
                                                             : "no out: argument named '" + name + "'"));
    }
    NpyArray ref = read_npy(path);
    if (ref.file_type != stack::graph::ElemType::kUndefined) {
      std::string what = "--check " + c;
      what += ": " + path + " holds ";
      what += stack::graph::elem_name(ref.file_type);
      throw InputError(what + " values; references are fp16, bf16, fp32, int32 or int8 arrays");
    }
    const KernelArg& o = args[outs.front()];
    if (stack::ops::elements(ref.shape) != stack::ops::elements(o.shape)) {
      throw InputError("--check " + c + ": " + std::to_string(stack::ops::elements(ref.shape)) + " elements, the output " +
                       o.name + " has " + std::to_string(stack::ops::elements(o.shape)));
    }
    refs.emplace_back(outs.front(), std::move(ref));
  }
  if (opts.check_refs.empty() && (opts.atol >= 0 || opts.rtol >= 0)) throw InputError("--atol/--rtol apply to --check");

  const config::LoadedConfig loaded = config::load_config(opts.config, opts.sets);
  const fw::kernel::KernelType type = opts.type == "cube"  ? fw::kernel::KernelType::kCube
                                      : opts.type == "mix" ? fw::kernel::KernelType::kMix
                                                           : fw::kernel::KernelType::kVector;
  if (functional) {
    for (std::size_t i = 0; i < args.size(); ++i) {
      KernelArg& a = args[i];
      if (a.kind != KernelArg::kRandom) continue;
      // Seeded per argument: values in [-1, 1) for floats, [-100, 100] for integers, rounded to the dtype.
      std::mt19937_64 rng(1234 + i);
      const std::uint64_t n = stack::ops::elements(a.shape);
      const std::uint32_t es = hw::isa::dtype_bytes(a.dtype);
      a.data.resize(a.bytes);
      const bool integer = a.dtype == DType::kInt32 || a.dtype == DType::kInt8;
      std::uniform_real_distribution<float> d(-1.0f, 1.0f);
      std::uniform_int_distribution<int> di(-100, 100);
      for (std::uint64_t e = 0; e < n; ++e) {
        hw::isa::store_float(&a.data[e * es], a.dtype, integer ? static_cast<float>(di(rng)) : d(rng));
      }
    }
  }

  RunOutputs run_outputs(opts.files, loaded.chip);
  rt::Device dev(loaded.chip, mode, run_outputs.trace_factory());
  std::map<std::size_t, std::vector<std::uint8_t>> results;
  const auto t0 = std::chrono::steady_clock::now();
  dev.run([&](rt::Device& d) {
    const rt::Stream s = d.create_stream();
    std::vector<std::uint64_t> words;
    std::vector<hw::core::CoreEngine::GmRange> bounds;
    for (KernelArg& a : args) {
      if (a.kind == KernelArg::kScalar) {
        words.push_back(a.word);
        continue;
      }
      a.addr = d.malloc(std::max<std::uint64_t>(a.bytes, 1));
      words.push_back(static_cast<std::uint64_t>(reinterpret_cast<std::uintptr_t>(d.chip().memory().base() + a.addr)));
      bounds.push_back({a.addr, a.bytes, a.name});
      if (a.kind == KernelArg::kTiling) {
        // The tiling struct travels with the launch (the runtime packs it with the arguments), in every mode: the
        // kernel's control flow reads it.
        d.chip().memory().write(a.addr, a.data.data(), a.bytes);
      } else if (a.kind == KernelArg::kInput || a.kind == KernelArg::kRandom) {
        d.memcpy_async(a.addr, a.data.empty() ? nullptr : a.data.data(), a.bytes, s);
      }
    }
    d.launch(entry.name, type, opts.block_dim, rt::kernel_body(entry, words, d.chip().memory(), bounds), s);
    for (std::size_t i = 0; i < args.size(); ++i) {
      if (args[i].kind != KernelArg::kOutput) continue;
      auto& host = results[i];
      if (functional) host.resize(args[i].bytes);
      d.memcpy_async(host.empty() ? nullptr : host.data(), args[i].addr, args[i].bytes, s);
    }
    d.synchronize();
  });
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  nlohmann::json report = rt::run_report(dev, wall);
  nlohmann::json& kernel = report["kernel"];
  kernel["name"] = entry.name;
  kernel["file"] = opts.name;
  kernel["block_dim"] = opts.block_dim;
  kernel["type"] = opts.type;
  nlohmann::json jargs = nlohmann::json::array();
  for (const KernelArg& a : args) {
    nlohmann::json j = {{"name", a.name}, {"spec", a.kind == KernelArg::kTiling ? "tiling" : a.spec}};
    if (a.kind != KernelArg::kScalar) j["bytes"] = a.bytes;
    jargs.push_back(j);
  }
  kernel["args"] = jargs;

  int status = 0;
  if (!refs.empty()) {
    double max_abs = 0, max_rel = 0;
    bool passed = true;
    for (const auto& [i, ref] : refs) {
      const KernelArg& o = args[i];
      auto [atol, rtol] = default_tolerance(o.dtype);
      if (opts.atol >= 0) atol = opts.atol;
      if (opts.rtol >= 0) rtol = opts.rtol;
      const std::vector<std::uint8_t>& out = results.at(i);
      const std::uint64_t n = stack::ops::elements(o.shape);
      for (std::uint64_t e = 0; e < n; ++e) {
        const double got = element(out, o.dtype, e), want = element(ref.bytes, ref.dtype, e);
        const double err = std::abs(got - want);
        if (!(err <= atol + rtol * std::abs(want))) passed = false;  // NaN fails
        max_abs = std::max(max_abs, err);
        if (want != 0) max_rel = std::max(max_rel, err / std::abs(want));
      }
    }
    report["check"] = {{"max_abs_err", max_abs}, {"max_rel_err", max_rel}, {"passed", passed}};
    if (!passed) status = 3;
  }
  if (!opts.outputs.empty()) {
    std::error_code ec;
    fs::create_directories(opts.outputs, ec);
    if (ec) throw InputError("--outputs " + opts.outputs + ": " + ec.message());
    for (const auto& [i, bytes] : results) {
      NpyArray a;
      a.dtype = args[i].dtype;
      a.shape = args[i].shape;
      a.bytes = bytes;
      write_npy((fs::path(opts.outputs) / (args[i].name + ".npy")).string(), a);
    }
  }
  run_outputs.finish(dev, report);

  if (opts.json) {
    std::cout << report.dump(2) << "\n";
  } else {
    std::cout << std::fixed << std::setprecision(3);
    std::cout << "kernel " << entry.name << " (" << opts.name << ") on " << loaded.chip.name << ", " << opts.block_dim
              << " block(s) (" << (functional ? "functional" : "timing-only") << ")\n";
    print_kernel_report(report);
    if (!opts.outputs.empty()) std::cout << "  outputs     " << opts.outputs << "\n";
    if (run_outputs.tracing()) std::cout << "  trace       " << opts.files.trace << "\n";
  }
  if (status) std::cerr << "npusim: error: kernel " << entry.name << ": output does not match the reference\n";
  return status;
}

}  // namespace npusim::cli
