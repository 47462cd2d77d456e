#include "stack/runtime/run_outputs.hpp"

#include <filesystem>

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

}  // namespace

RunOutputs::RunOutputs(OutputPaths paths, double core_hz) : paths_(std::move(paths)), core_hz_(core_hz) {
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
  try {
    writer_ = std::make_unique<traces::ChromeTraceWriter>(paths_.trace);
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
