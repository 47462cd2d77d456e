#include "cli/op_command.hpp"

#include "cli/run_outputs.hpp"
#include "cli/tensor_data.hpp"

#include <chrono>
#include <cmath>
#include <cstring>
#include <iomanip>
#include <iostream>
#include <map>
#include <random>

#include <nlohmann/json.hpp>

#include "common/config/loader.hpp"
#include "common/util/error.hpp"
#include "hw/chip/pipe_trace.hpp"
#include "stack/ops/op.hpp"
#include "stack/runtime/timeline.hpp"

namespace npusim::cli {

namespace ops = stack::ops;
using hw::isa::DType;

std::string describe_ops() {
  std::string out;
  for (const ops::OpDef& op : ops::all_ops()) {
    out += "  " + op.name + ": " + op.summary + " (-p";
    for (const auto& p : op.params) out += " " + p;
    out += ")\n";
  }
  return out;
}

int run_op_command(const OpOptions& opts) {
  const ops::OpDef* op = ops::find_op(opts.name);
  if (!op) {
    std::string names;
    for (const auto& o : ops::all_ops()) names += (names.empty() ? "" : ", ") + o.name;
    throw InputError("no op named '" + opts.name + "' (there are: " + names + ")");
  }
  const std::map<std::string, std::string> params = parse_params(opts.params);
  for (const auto& [key, value] : params) {
    if (std::find(op->params.begin(), op->params.end(), key) == op->params.end()) {
      std::string known;
      for (const auto& p : op->params) known += (known.empty() ? "" : ", ") + p;
      throw InputError("op " + opts.name + " has no parameter '" + key + "' (it takes: " + known + ")");
    }
  }
  const DType dtype = ops::parse_dtype(opts.dtype);
  const config::LoadedConfig loaded = config::load_config(opts.config, opts.sets);
  // Shapes and tiling are checked before anything is simulated.
  const std::vector<ops::TensorDesc> inputs = op->inputs(params, dtype);
  const ops::OpPlan plan = op->plan(inputs, params, loaded.chip);
  const hw::core::Mode mode = opts.check ? hw::core::Mode::kFunctional : hw::core::Mode::kTimingOnly;

  RunOutputs outputs(opts.trace, opts.summary, loaded.chip.clock.core_hz);
  stack::runtime::Device dev(loaded.chip, mode, outputs.trace_factory());

  std::mt19937_64 rng(2026);
  std::vector<std::vector<std::uint8_t>> in_bytes(inputs.size());
  std::vector<ops::HostTensor> in_values(inputs.size());
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    const std::pair<float, float> range = i < op->input_ranges.size() ? op->input_ranges[i] : std::make_pair(-1.0f, 1.0f);
    if (mode == hw::core::Mode::kFunctional) random_tensor(inputs[i], range, rng, in_bytes[i], in_values[i]);
  }
  std::vector<std::vector<std::uint8_t>> out_bytes(plan.outputs.size());
  const auto t0 = std::chrono::steady_clock::now();
  dev.run([&](stack::runtime::Device& d) {
    const stack::runtime::Stream s = d.create_stream();
    std::vector<std::uint64_t> buffers;
    for (std::size_t i = 0; i < inputs.size(); ++i) {
      buffers.push_back(d.malloc(inputs[i].bytes()));
      d.memcpy_async(buffers.back(), in_bytes[i].empty() ? nullptr : in_bytes[i].data(), inputs[i].bytes(), s);
    }
    for (const auto& o : plan.outputs) buffers.push_back(d.malloc(o.bytes()));
    if (plan.workspace_bytes) buffers.push_back(d.malloc(plan.workspace_bytes));
    d.launch(opts.name, plan.type, plan.block_dim, plan.kernel(buffers), s);
    for (std::size_t i = 0; i < plan.outputs.size(); ++i) {
      if (mode == hw::core::Mode::kFunctional) out_bytes[i].resize(plan.outputs[i].bytes());
      d.memcpy_async(out_bytes[i].empty() ? nullptr : out_bytes[i].data(), buffers[inputs.size() + i],
                     plan.outputs[i].bytes(), s);
    }
    d.synchronize();
  });
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  nlohmann::json report = stack::runtime::run_report(dev, wall);
  report["op"] = {{"name", opts.name}, {"dtype", opts.dtype}, {"params", params}, {"block_dim", plan.block_dim},
                  {"tiling", plan.tiling}};
  nlohmann::json shapes = nlohmann::json::array();
  for (const auto& t : inputs) shapes.push_back(ops::shape_string(t.shape));
  report["op"]["inputs"] = shapes;
  report["op"]["output"] = ops::shape_string(plan.outputs[0].shape);
  report["op"]["workspace_bytes"] = plan.workspace_bytes;
  const double kernel_s = report["kernel"]["time_us"].get<double>() * 1e-6;
  if (plan.flops > 0) {
    // Achieved rate over the kernel's own span (first block start to last block end), in 10^12 FLOP/s.
    report["op"]["flops"] = plan.flops;
    report["op"]["tflops"] = plan.flops / kernel_s / 1e12;
  }
  // The op's compulsory traffic (every input read once, every output written once) over the kernel's span: the
  // effective bandwidth, and it over the HBM peak.
  std::uint64_t op_bytes = 0;
  for (const auto& t : inputs) op_bytes += t.bytes();
  for (const auto& t : plan.outputs) op_bytes += t.bytes();
  report["op"]["bytes"] = op_bytes;
  report["op"]["effective_GBps"] = static_cast<double>(op_bytes) / kernel_s / 1e9;
  report["op"]["hbm_peak_fraction"] = static_cast<double>(op_bytes) / kernel_s / loaded.chip.hbm.peak_bytes_per_second();
  int status = 0;
  if (opts.check) {
    const std::vector<ops::HostTensor> ref = op->reference(inputs, params, in_values);
    double max_abs = 0, max_rel = 0;
    bool passed = true;
    const double extra = op->extra_atol ? op->extra_atol(inputs, params) : 0.0;
    for (std::size_t o = 0; o < plan.outputs.size(); ++o) {
      auto [atol, rtol] = default_tolerance(plan.outputs[o].dtype);
      atol += extra;
      for (std::uint64_t i = 0; i < ref[o].size(); ++i) {
        const double got = element(out_bytes[o], plan.outputs[o].dtype, i), want = ref[o][i];
        const double err = got == want ? 0.0 : std::abs(got - want);  // equal infinities match
        max_abs = std::max(max_abs, err);
        if (want != 0) max_rel = std::max(max_rel, err / std::abs(want));
        if (!(err <= atol + rtol * std::abs(want))) passed = false;
      }
    }
    report["check"] = {{"max_abs_err", max_abs}, {"max_rel_err", max_rel}, {"passed", passed}};
    if (!passed) status = 3;
  }
  outputs.finish(dev, report);
  if (opts.json) {
    std::cout << report.dump(2) << "\n";
  } else {
    std::cout << std::fixed << std::setprecision(3) << "op " << opts.name << " " << opts.dtype << " "
              << report["op"]["output"].get<std::string>() << " on " << loaded.chip.name << "\n";
    std::cout << "  kernel      " << report["kernel"]["cycles"].get<std::uint64_t>() << " cycles, "
              << report["kernel"]["time_us"].get<double>() << " us on " << plan.block_dim << " block(s)\n";
    std::cout << "  pipes      ";
    for (const auto& [pipe, v] : report["kernel"]["pipes"].items())
      if (v.get<double>() > 0) std::cout << " " << pipe << "=" << std::setprecision(2) << v.get<double>();
    std::cout << std::setprecision(3) << "  (busy fraction over the cores that have the pipe)\n";
    if (report["overlap"].contains("cube_vector"))
      std::cout << "  overlap     cube_vector=" << report["overlap"]["cube_vector"].get<double>() << "\n";
    if (report["op"].contains("tflops"))
      std::cout << "  achieved    " << report["op"]["tflops"].get<double>() << " TFLOPS\n";
    std::cout << "  memory      " << report["op"]["effective_GBps"].get<double>() << " GB/s effective ("
              << report["op"]["hbm_peak_fraction"].get<double>() * 100 << " % of the HBM peak), HBM "
              << report["memory"]["hbm_avg_GBps"].get<double>() << " GB/s\n";
    if (report.contains("check"))
      std::cout << "  check       " << (status ? "FAILED" : "passed") << " (max abs err "
                << report["check"]["max_abs_err"].get<double>() << ")\n";
    if (outputs.tracing()) std::cout << "  trace       " << opts.trace << "\n";
  }
  if (status) std::cerr << "npusim: error: op " << opts.name << ": output does not match the CPU reference\n";
  return status;
}

}  // namespace npusim::cli
