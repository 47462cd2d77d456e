#include "cli/op_command.hpp"

#include "cli/kernel_command.hpp"
#include "cli/run_outputs.hpp"
#include "cli/tensor_data.hpp"

#include <algorithm>
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
#include "stack/framework/session.hpp"

namespace npusim::cli {

namespace ops = stack::ops;
using hw::isa::DType;

namespace {

// "label: a, b, c" wrapped at 118 columns, continuation lines aligned under the first item.
std::string wrapped_list(const std::string& label, const std::vector<std::string>& items) {
  const std::string indent(label.size(), ' ');
  std::string out, line = label;
  for (std::size_t i = 0; i < items.size(); ++i) {
    const std::string item = items[i] + (i + 1 < items.size() ? "," : "");
    if (line.size() > label.size() && line.size() + 1 + item.size() > 118) {
      out += line + "\n";
      line = indent;
    }
    line += (line.size() > label.size() ? " " : "") + item;
  }
  return out + line + "\n";
}

}  // namespace

std::string describe_ops() {
  std::string out;
  for (const ops::OpDef& op : ops::all_ops()) {
    out += "  " + op.name + ": " + op.summary + "\n";
    std::vector<std::string> required, optional;
    for (const ops::OpParam& p : op.params) {
      if (p.required())
        required.push_back(p.key);
      else
        optional.push_back(p.key + "=" + p.def);
    }
    if (!required.empty()) out += wrapped_list("      required: ", required);
    if (!optional.empty()) out += wrapped_list("      optional: ", optional);
  }
  return out;
}

int run_op_command(const OpOptions& opts) {
  const std::map<std::string, std::string> params = parse_params(opts.params);
  const DType dtype = ops::parse_dtype(opts.dtype);
  // The op, its parameters and its input shapes are checked before the config is read.
  const std::vector<ops::TensorDesc> inputs = stack::framework::Session::op_inputs(opts.name, params, dtype);
  const ops::Call call = stack::framework::Session::op_call(opts.name, params);
  const ops::OpDef* op = ops::find_op(opts.name);
  const config::LoadedConfig loaded = config::load_config(opts.config, opts.sets);
  (void)ops::plan_op(*op, inputs, call, loaded.chip);  // a call the op refuses is refused before any file is opened
  const hw::core::Mode mode = opts.check ? hw::core::Mode::kFunctional : hw::core::Mode::kTimingOnly;
  stack::framework::Session session(loaded, mode, opts.files);

  std::mt19937_64 rng(2026);
  std::vector<std::vector<std::uint8_t>> in_bytes(inputs.size());
  std::vector<ops::HostTensor> in_values(inputs.size());
  const std::vector<std::pair<float, float>> ranges = op->ranges_of ? op->ranges_of(inputs) : op->input_ranges;
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    const std::pair<float, float> range = i < ranges.size() ? ranges[i] : std::make_pair(-1.0f, 1.0f);
    const bool distinct = std::count(op->distinct_inputs.begin(), op->distinct_inputs.end(), i) > 0;
    try {
      if (mode == hw::core::Mode::kFunctional)
        random_tensor(inputs[i], range, rng, in_bytes[i], in_values[i], distinct);
    } catch (const InputError& e) {
      throw InputError("op " + opts.name + ": input " + std::to_string(i) + " (" + ops::shape_string(inputs[i].shape) +
                       "): " + e.what());
    }
  }
  stack::framework::RunResult result = session.run_op(opts.name, call, inputs, in_bytes, params, opts.warmup);
  nlohmann::json& report = result.report;
  const std::vector<std::vector<std::uint8_t>>& out_bytes = result.outputs;
  const std::uint32_t block_dim = report["op"]["block_dim"].get<std::uint32_t>();
  std::vector<ops::TensorDesc> outs;
  for (const auto& o : report["op"]["outputs"])
    outs.push_back(
        {ops::parse_shape(o["shape"].get<std::string>()), ops::parse_dtype(o["dtype"].get<std::string>(), true)});
  int status = 0;
  if (opts.check) {
    const std::vector<ops::HostTensor> ref = op->reference(inputs, call, in_values);
    double max_abs = 0, max_rel = 0;
    bool passed = true;
    const double extra = op->extra_atol ? op->extra_atol(inputs, call) : 0.0;
    for (std::size_t o = 0; o < outs.size(); ++o) {
      auto [atol, rtol] = default_tolerance(outs[o].dtype);
      atol += extra;
      for (std::uint64_t i = 0; i < ref[o].size(); ++i) {
        const double got = element(out_bytes[o], outs[o].dtype, i), want = ref[o][i];
        // Equal infinities match, and a NaN matches a NaN (pow of a negative base, where(c, nan, x)).
        const double err = got == want || (std::isnan(got) && std::isnan(want)) ? 0.0 : std::abs(got - want);
        max_abs = std::max(max_abs, err);
        if (want != 0) max_rel = std::max(max_rel, err / std::abs(want));
        if (err != 0.0 && !(err <= atol + rtol * std::abs(want))) passed = false;
      }
    }
    report["check"] = {{"max_abs_err", max_abs}, {"max_rel_err", max_rel}, {"passed", passed}};
    if (!passed) status = 3;
  }
  session.finish(&report);
  if (opts.json) {
    std::cout << report.dump(2) << "\n";
  } else {
    std::cout << std::fixed << std::setprecision(3) << "op " << opts.name << " " << opts.dtype << " "
              << report["op"]["output"].get<std::string>() << " on " << loaded.chip.name << "\n";
    std::cout << "  kernel      " << report["kernel"]["cycles"].get<std::uint64_t>() << " cycles, "
              << report["kernel"]["time_us"].get<double>() << " us on " << block_dim << " block(s)\n";
    std::cout << "  pipes      ";
    for (const auto& [pipe, v] : report["kernel"]["pipes"].items())
      if (v.get<double>() > 0) std::cout << " " << pipe << "=" << std::setprecision(2) << v.get<double>();
    std::cout << std::setprecision(3) << "  (busy fraction over the cores that have the pipe)\n";
    if (report["overlap"].contains("cube_vector"))
      std::cout << "  overlap     cube_vector=" << report["overlap"]["cube_vector"].get<double>() << "\n";
    if (report["op"].contains("tflops"))
      std::cout << "  achieved    " << report["op"]["tflops"].get<double>() << " TFLOPS\n";
    // Two figures: the op's compulsory bytes over the kernel's time (what it must move, whether or not the bytes
    // reached the HBM), and what the memory model counted at the HBM.
    const double fraction = report["op"]["hbm_peak_fraction"].get<double>();
    std::cout << "  memory      compulsory " << report["op"]["effective_GBps"].get<double>() << " GB/s ("
              << fraction * 100 << " % of the HBM peak"
              << (fraction > 1 ? "; above the peak: the L2 served part of them" : "") << "), at the HBM "
              << report["memory"]["hbm_avg_GBps"].get<double>() << " GB/s\n";
    if (report.contains("check"))
      std::cout << "  check       " << (status ? "FAILED" : "passed") << " (max abs err "
                << error_text(report["check"]["max_abs_err"].get<double>()) << ")\n";
    if (report.contains("trace")) std::cout << "  trace       " << opts.files.trace << "\n";
  }
  if (status) std::cerr << "npusim: error: op " << opts.name << ": output does not match the CPU reference\n";
  return status;
}

}  // namespace npusim::cli
