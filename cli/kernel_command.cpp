#include "cli/kernel_command.hpp"

#include "cli/run_outputs.hpp"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <iomanip>
#include <iostream>
#include <map>
#include <memory>
#include <set>
#include <sstream>

#include "common/config/loader.hpp"
#include "common/util/error.hpp"
#include "firmware/kernel/launch_spec.hpp"
#include "firmware/kernel/samples/samples.hpp"
#include "hw/chip/chip.hpp"
#include "hw/chip/pipe_trace.hpp"
#include "stack/runtime/pipeline_demo.hpp"
#include "stack/runtime/report.hpp"
#include "traces/chrome_trace.hpp"

namespace npusim::cli {

namespace samples = fw::kernel::samples;

std::string error_text(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3g", v);
  return buf;
}

std::string count_text(std::size_t n, const std::string& noun) {
  return std::to_string(n) + " " + noun + (n == 1 ? "" : "s");
}

void print_kernel_report(const nlohmann::json& report) {
  const nlohmann::json& kernel = report["kernel"];
  std::cout << "  kernel      " << kernel["cycles"].get<std::uint64_t>() << " cycles, " << kernel["time_us"].get<double>()
            << " us on " << kernel["cores"].get<std::uint32_t>() << " core(s)\n";
  std::cout << "  device      " << report["time_us"].get<double>() << " us for "
            << count_text(report["tasks"].size(), "task") << " (copies in and out, launch)\n";
  if (kernel.contains("efficiency")) std::cout << "  efficiency  " << kernel["efficiency"].get<double>() << " of peak\n";
  std::cout << "  pipes busy ";
  for (auto& [k, v] : kernel["pipes"].items()) std::cout << " " << k << "=" << v.get<double>();
  std::cout << "\n  overlap    ";
  for (auto& [k, v] : report["overlap"].items()) std::cout << " " << k << "=" << v.get<double>();
  std::cout << "\n";
  if (report.contains("check"))
    std::cout << "  check       " << (report["check"]["passed"].get<bool>() ? "passed" : "FAILED") << " (max abs err "
              << error_text(report["check"]["max_abs_err"].get<double>()) << ")\n";
}

std::string describe_kernels() {
  std::ostringstream os;
  os << "  pipeline_demo: C chunks host -> device -> kernel -> host on S streams, through the runtime\n"
     << "      -p streams (2)\n      -p chunks (8)\n      -p bytes (1048576): per chunk, a multiple of 1 KiB\n";
  for (const samples::Sample& s : samples::all_samples()) {
    os << "  " << s.name << ": " << s.summary << "\n";
    std::istringstream lines(s.params);
    for (std::string line; std::getline(lines, line);) os << "      -p " << line << "\n";
  }
  return os.str();
}

namespace {
// pipeline_demo runs through the runtime (host thread, driver rings, task scheduler, SDMA/host link).
int run_pipeline_demo(const KernelOptions& opts, const std::map<std::string, std::string>& values) {
  const config::LoadedConfig loaded = config::load_config(opts.config, opts.sets);
  samples::Params params(values);
  stack::runtime::PipelineDemo demo;
  demo.streams = static_cast<std::uint32_t>(params.integer("streams", 2, 1, 64));
  demo.chunks = static_cast<std::uint32_t>(params.integer("chunks", 8, 1, 100000));
  demo.bytes = params.integer("bytes", 1 << 20, 1024, 1ULL << 30);
  params.reject_unused("pipeline_demo");
  stack::runtime::validate(demo);
  const hw::core::Mode mode = (opts.check || opts.functional) ? hw::core::Mode::kFunctional : hw::core::Mode::kTimingOnly;
  RunOutputs outputs(opts.files, loaded.chip);
  stack::runtime::Device dev(loaded.chip, mode, outputs.trace_factory());
  const auto t0 = std::chrono::steady_clock::now();
  dev.run([&](stack::runtime::Device& d) { stack::runtime::run_pipeline_demo(d, demo); });
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  nlohmann::json report = stack::runtime::runtime_report(dev);
  report["kernel"] = {{"name", "pipeline_demo"}, {"params", values}};
  std::uint64_t instructions = 0;
  for (const auto& t : dev.tasks())
    for (const auto& r : t.runs) instructions += r.instructions;
  report["sim"] = {{"wall_seconds", wall},
                   {"instructions", instructions},
                   {"instructions_per_second", wall > 0 ? static_cast<double>(instructions) / wall : 0.0},
                   {"mode", mode == hw::core::Mode::kFunctional ? "functional" : "timing"}};
  int status = 0;
  if (opts.check) {
    // The reference: 2x + 1 in fp32, the kernel's arithmetic (two roundings, so exact for these inputs).
    double max_abs = 0, max_rel = 0;
    for (std::size_t i = 0; i < demo.input.size(); ++i) {
      const double want = 2.0f * demo.input[i] + 1.0f;
      const double err = std::abs(static_cast<double>(demo.output[i]) - want);
      max_abs = std::max(max_abs, err);
      if (want != 0) max_rel = std::max(max_rel, err / std::abs(want));
    }
    report["check"] = {{"max_abs_err", max_abs}, {"max_rel_err", max_rel}, {"passed", max_abs == 0.0}};
    if (max_abs != 0.0) status = 3;
  }
  outputs.finish(dev, report);
  if (opts.json) {
    std::cout << report.dump(2) << "\n";
  } else {
    std::cout << std::fixed << std::setprecision(3) << "pipeline_demo on " << loaded.chip.name << ": " << demo.streams
              << " stream(s), " << demo.chunks << " chunk(s) of " << demo.bytes << " B\n";
    std::cout << "  device time " << report["time_us"].get<double>() << " us over "
              << count_text(report["tasks"].size(), "task") << "\n";
    if (report.contains("check")) std::cout << "  check       " << (status ? "FAILED" : "passed") << "\n";
    if (outputs.tracing()) std::cout << "  trace       " << opts.files.trace << "\n";
  }
  return status;
}
}  // namespace

int run_kernel_command(const KernelOptions& opts) {
  if (opts.name == "pipeline_demo") return run_pipeline_demo(opts, parse_params(opts.params));
  const samples::Sample* sample = samples::find_sample(opts.name);
  if (!sample) {
    std::string names = "pipeline_demo";
    for (const auto& s : samples::all_samples()) names += ", " + s.name;
    throw InputError("no sample kernel named '" + opts.name + "' (there are: " + names +
                     "; your own kernel is a .cpp or .so path)");
  }
  const std::map<std::string, std::string> values = parse_params(opts.params);
  const config::LoadedConfig loaded = config::load_config(opts.config, opts.sets);
  const hw::core::Mode mode =
      (opts.check || opts.functional) ? hw::core::Mode::kFunctional : hw::core::Mode::kTimingOnly;

  RunOutputs run_outputs(opts.files, loaded.chip);
  stack::runtime::Device dev(loaded.chip, mode, run_outputs.trace_factory());
  hw::chip::Chip& chip = dev.chip();

  samples::Params params(values);
  samples::SampleRun run = sample->prepare(params, chip);
  params.reject_unused(opts.name);

  // Through the runtime: the inputs are copied in, the kernel launched, the outputs copied back.
  std::map<std::uint64_t, std::vector<std::uint8_t>> outputs;
  const auto t0 = std::chrono::steady_clock::now();
  dev.run([&](stack::runtime::Device& d) {
    // The sample placed its buffers at the bottom of device memory: the first allocation is exactly there.
    const std::uint64_t base = d.malloc(std::max<std::uint64_t>(run.gm_bytes, 1));
    if (base != 0) throw std::logic_error("sample buffers are not at the bottom of device memory");
    const stack::runtime::Stream s = d.create_stream();
    for (const samples::HostBuffer& in : run.inputs)
      d.memcpy_async(in.addr, in.data.empty() ? nullptr : in.data.data(), in.bytes, s);
    d.launch(run.spec.name, run.spec.type, run.spec.block_dim, run.spec.body, s);
    for (const auto& [addr, bytes] : run.outputs) {
      auto& host = outputs[addr];
      if (mode == hw::core::Mode::kFunctional) host.resize(bytes);
      d.memcpy_async(host.empty() ? nullptr : host.data(), addr, bytes, s);
    }
    d.synchronize();
  });
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  // The kernel task's blocks give the per-pipe figures; the device tasks the timeline.
  nlohmann::json report = stack::runtime::run_report(dev, wall);
  nlohmann::json& kernel = report["kernel"];
  kernel["name"] = opts.name;
  kernel["params"] = values;
  const double kernel_cycles = kernel["cycles"].get<double>();
  for (const auto& [k, v] : run.facts) kernel[k] = v;
  if (run.facts.count("ideal_cycles") && kernel_cycles > 0) kernel["efficiency"] = run.facts.at("ideal_cycles") / kernel_cycles;
  if (run.facts.count("macs") && kernel_cycles > 0) kernel["macs_per_cycle"] = run.facts.at("macs") / kernel_cycles;

  int status = 0;
  if (opts.check) {
    if (!run.check) throw InputError("kernel " + opts.name + " has no CPU reference to check against");
    const samples::MemoryReader read = [&](std::uint64_t addr, void* out, std::uint64_t bytes) {
      for (const auto& [base, data] : outputs) {
        if (addr >= base && addr + bytes <= base + data.size()) {
          std::memcpy(out, data.data() + (addr - base), bytes);
          return;
        }
      }
      throw std::logic_error("check reads device memory that was not copied back");
    };
    const samples::CheckResult c = run.check(read);
    report["check"] = {{"max_abs_err", c.max_abs_err}, {"max_rel_err", c.max_rel_err}, {"passed", c.passed}};
    if (!c.passed) status = 3;
  }
  run_outputs.finish(dev, report);

  if (opts.json) {
    std::cout << report.dump(2) << "\n";
  } else {
    std::cout << std::fixed << std::setprecision(3);
    std::cout << "kernel " << opts.name << " on " << loaded.chip.name << " ("
              << (mode == hw::core::Mode::kFunctional ? "functional" : "timing-only") << ")\n";
    print_kernel_report(report);
    if (run_outputs.tracing()) std::cout << "  trace       " << opts.files.trace << "\n";
  }
  if (status) std::cerr << "npusim: error: kernel " << opts.name << ": output does not match the CPU reference\n";
  return status;
}

}  // namespace npusim::cli
