#include "stack/runtime/run_outputs.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <iostream>
#include <optional>
#include <string_view>

#include "common/util/error.hpp"
#include "common/util/file.hpp"
#include "stack/runtime/timeline.hpp"

namespace npusim::stack::runtime {

namespace {

// Whether two output paths name one file (after resolving "." and "..", and symlinks where the file exists).
bool same_file(const std::string& a, const std::string& b) {
  if (a.empty() || b.empty()) return false;
  std::error_code ea, eb;
  const auto ca = std::filesystem::weakly_canonical(a, ea), cb = std::filesystem::weakly_canonical(b, eb);
  return ea || eb ? a == b : ca == cb;
}

// The chip's cores by name prefix, in ranges: "aic0-23, aiv0-47".
std::string core_ranges(const std::map<std::string, std::uint64_t>& count) {
  std::string out;
  for (const auto& [prefix, n] : count) {
    if (!out.empty()) out += ", ";
    out.append(prefix).append("0");
    if (n > 1) out.append("-").append(std::to_string(n - 1));
  }
  return out;
}

// A core number of up to nine digits (core counts are at most 4096), or nullopt.
std::optional<std::uint64_t> core_number(std::string_view digits) {
  if (digits.empty() || digits.size() > 9) return std::nullopt;
  std::uint64_t v = 0;
  for (char c : digits) {
    if (c < '0' || c > '9') return std::nullopt;
    v = v * 10 + static_cast<std::uint64_t>(c - '0');
  }
  return v;
}

// The cores --trace-cores names: "all", or comma-separated names and ranges (aiv0-3); empty: the first core group.
std::set<std::string> traced_cores(const std::string& spec, const std::string& option, const config::ChipConfig& chip) {
  const std::vector<hw::chip::CoreSlot> slots = hw::chip::core_slots(chip);
  std::set<std::string> out;
  std::map<std::string, std::uint64_t> count;  // cores per name prefix
  for (const hw::chip::CoreSlot& s : slots) {
    ++count[s.name.substr(0, s.name.find_first_of("0123456789"))];
    if (spec == "all" || (spec.empty() && s.group == 0)) out.insert(s.name);
  }
  if (spec.empty() || spec == "all") return out;
  std::size_t pos = 0;
  while (pos <= spec.size()) {
    const std::size_t comma = std::min(spec.find(',', pos), spec.size());
    const std::string item = spec.substr(pos, comma - pos);
    pos = comma + 1;
    const std::size_t digit = item.find_first_of("0123456789");
    const std::size_t dash = item.find('-');
    const std::string prefix = item.substr(0, digit);
    const auto first =
        core_number(digit == std::string::npos ? "" : std::string_view(item).substr(digit, dash - digit));
    const auto last = dash == std::string::npos ? first : core_number(std::string_view(item).substr(dash + 1));
    std::string msg = option;
    msg.append(" ").append(spec).append(": ");
    if (!first || !last || *last < *first) {
      msg.append("'").append(item).append("' is not a core name or range (e.g. aic0, aiv0-3, or all)");
      throw InputError(msg);
    }
    const auto it = count.find(prefix);
    if (it == count.end() || *last >= it->second) {
      msg.append("no core ").append(prefix).append(std::to_string(it == count.end() ? *first : *last));
      msg.append(" on this chip (it has ").append(core_ranges(count)).append(")");
      throw InputError(msg);
    }
    for (std::uint64_t n = *first; n <= *last; ++n) out.insert(prefix + std::to_string(n));
  }
  return out;
}

}  // namespace

TraceLevel parse_trace_level(const std::string& text, const std::string& option) {
  if (text == "task") return TraceLevel::kTask;
  if (text == "block") return TraceLevel::kBlock;
  if (text == "instr") return TraceLevel::kInstr;
  throw InputError(option + " " + text + ": the trace levels are task, block and instr");
}

void parse_trace_window(const std::string& text, const std::string& option, TraceOptions& out) {
  const std::size_t colon = text.find(':');
  auto bad = [&](const std::string& why) { return InputError(option + " " + text + ": " + why); };
  if (colon == std::string::npos) throw bad("expected START:END in microseconds (either may be left out)");
  auto number = [&](const std::string& part, double empty) {
    if (part.empty()) return empty;
    std::size_t used = 0;
    double v = 0;
    try {
      v = std::stod(part, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != part.size() || !std::isfinite(v) || v < 0) throw bad("'" + part + "' is not a time in microseconds");
    return v;
  };
  out.window_start_us = number(text.substr(0, colon), 0);
  out.window_end_us = number(text.substr(colon + 1), std::numeric_limits<double>::infinity());
  if (out.window_end_us <= out.window_start_us) throw bad("the window ends before it starts");
}

RunOutputs::RunOutputs(OutputPaths paths, const config::ChipConfig& chip)
    : paths_(std::move(paths)), core_hz_(chip.clock.core_hz) {
  const std::pair<const char*, const std::string*> named[] = {
      {"--trace", &paths_.trace}, {"--summary", &paths_.summary}, {"--stats", &paths_.stats}};
  for (std::size_t i = 0; i < std::size(named); ++i)
    for (std::size_t j = i + 1; j < std::size(named); ++j)
      if (same_file(*named[i].second, *named[j].second))
        throw InputError(std::string(named[i].first) + " and " + named[j].first + " name the same file '" +
                         *named[j].second + "': give each output its own file");
  // The files written at the end: a missing directory is an error now, before anything is simulated.
  for (const auto& [option, path] : {named[1], named[2]})
    if (!path->empty()) check_output_dir(option, *path);
  if (paths_.trace.empty()) return;
  const TraceOptions& t = paths_.trace_options;
  instr_cores_ = traced_cores(t.cores, t.cores_option, chip);  // checked at every level: a wrong name is a mistake
  if (t.level != TraceLevel::kInstr) instr_cores_.clear();
  // Microseconds to cycles, saturating: a window past 2^64 cycles reaches the end of any run.
  const auto cycles = [&](double us, bool up) {
    const double c = up ? std::ceil(us * core_hz_ / 1e6) : std::floor(us * core_hz_ / 1e6);
    return c < 1.8e19 ? static_cast<std::uint64_t>(c) : std::numeric_limits<std::uint64_t>::max();
  };
  filter_.start_cycle = cycles(t.window_start_us, false);
  if (std::isfinite(t.window_end_us)) filter_.end_cycle = cycles(t.window_end_us, true);
  filter_.limit = t.max_slices;
  try {
    writer_ = std::make_unique<traces::ChromeTraceWriter>(paths_.trace);
  } catch (const std::exception& e) {
    throw InputError(std::string("--trace: ") + e.what());
  }
}

hw::chip::Chip::TraceFactory RunOutputs::trace_factory() {
  return [this](const hw::core::CoreIdentity& id) -> hw::core::TraceSink* {
    if (!writer_ || !instr_cores_.count(id.name)) return nullptr;
    tracers_.push_back(
        std::make_unique<hw::chip::PipeTrace>(*writer_, id, core_hz_, static_cast<int>(id.index), &filter_));
    cores_[id.index] = tracers_.back().get();
    return tracers_.back().get();
  };
}

void RunOutputs::finish(const Device& dev, nlohmann::json& report) {
  if (writer_) {
    for (auto& t : tracers_) t->flush();
    write_runtime_trace(*writer_, dev, cores_, paths_.trace_options.level, filter_.dropped);
    if (filter_.dropped) {
      std::cerr << "npusim: warning: --trace " << paths_.trace << ": kept the first " << filter_.written
                << " instruction slices and flag events (--trace-limit) and left out " << filter_.dropped
                << "; choose fewer cores (--trace-cores) or a time window (--trace-window)\n";
    }
    try {
      writer_->close();
    } catch (const std::exception& e) {
      throw InputError(std::string("--trace: ") + e.what());
    }
    report["trace"] = paths_.trace;
  }
  if (!paths_.summary.empty()) {
    try {
      write_op_summary(paths_.summary, dev);
    } catch (const std::exception& e) {
      throw InputError(std::string("--summary: ") + e.what());
    }
    report["summary"] = paths_.summary;
  }
  if (!paths_.stats.empty()) {
    write_stats(paths_.stats, dev);
    report["stats"] = paths_.stats;
  }
}

void write_stats(const std::string& path, const Device& dev) {
  try {
    traces::write_stats_file(path, dev.chip().config().name, dev.chip().stats());
  } catch (const std::runtime_error& e) {
    throw InputError(std::string("--stats: ") + e.what());
  }
}

}  // namespace npusim::stack::runtime
