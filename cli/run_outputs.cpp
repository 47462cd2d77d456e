#include "cli/run_outputs.hpp"

#include "common/util/error.hpp"
#include "stack/runtime/timeline.hpp"

namespace npusim::cli {

std::map<std::string, std::string> parse_params(const std::vector<std::string>& kvs) {
  std::map<std::string, std::string> values;
  for (const std::string& kv : kvs) {
    const auto eq = kv.find('=');
    if (eq == std::string::npos || eq == 0) throw InputError("-p '" + kv + "': expected key=value");
    values[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  return values;
}

RunOutputs::RunOutputs(std::string trace, std::string summary, double core_hz)
    : trace_(std::move(trace)), summary_(std::move(summary)), core_hz_(core_hz) {
  if (trace_.empty()) return;
  try {
    writer_ = std::make_unique<traces::ChromeTraceWriter>(trace_);
  } catch (const std::exception& e) {
    throw InputError(std::string("--trace: ") + e.what());
  }
}

hw::chip::Chip::TraceFactory RunOutputs::trace_factory() {
  return [this](const hw::core::CoreIdentity& id) -> hw::core::TraceSink* {
    if (!writer_) return nullptr;
    tracers_.push_back(std::make_unique<hw::chip::PipeTrace>(*writer_, id, core_hz_, static_cast<int>(id.index)));
    cores_[id.index] = tracers_.back().get();
    return tracers_.back().get();
  };
}

void RunOutputs::finish(const stack::runtime::Device& dev, nlohmann::json& report) {
  if (writer_) {
    for (auto& t : tracers_) t->flush();
    stack::runtime::write_runtime_trace(*writer_, dev, cores_);
    writer_->close();
    report["trace"] = trace_;
  }
  if (!summary_.empty()) {
    try {
      stack::runtime::write_op_summary(summary_, dev);
    } catch (const std::exception& e) {
      throw InputError(std::string("--summary: ") + e.what());
    }
    report["summary"] = summary_;
  }
}

}  // namespace npusim::cli
