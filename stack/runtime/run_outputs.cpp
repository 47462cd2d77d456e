#include "stack/runtime/run_outputs.hpp"

#include "common/util/error.hpp"
#include "stack/runtime/timeline.hpp"

namespace npusim::stack::runtime {

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

void RunOutputs::finish(const Device& dev, nlohmann::json& report) {
  if (writer_) {
    for (auto& t : tracers_) t->flush();
    write_runtime_trace(*writer_, dev, cores_);
    writer_->close();
    report["trace"] = trace_;
  }
  if (!summary_.empty()) {
    try {
      write_op_summary(summary_, dev);
    } catch (const std::exception& e) {
      throw InputError(std::string("--summary: ") + e.what());
    }
    report["summary"] = summary_;
  }
}

}  // namespace npusim::stack::runtime
