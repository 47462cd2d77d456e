// Streaming writer for the Chrome trace-event format (JSON object form), which Perfetto and chrome://tracing load.
//
// Events are written as they come and never kept: memory stays constant however long the simulation runs.
// Timestamps are taken in nanoseconds and written in microseconds with three decimals (nanosecond precision).
// The writer enforces the format's rule that complete slices on one track nest: on each track, slices must be
// written in order of start time, and a slice that starts inside an earlier one must also end inside it.
#pragma once

#include <cstdint>
#include <fstream>
#include <map>
#include <memory>
#include <ostream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/util/atomic_file.hpp"
#include "traces/gzip_stream.hpp"

namespace npusim::traces {

// Key/value arguments shown in the slice details panel.
struct Arg {
  std::string key;
  std::string value;  // written as a JSON string unless `numeric`
  bool numeric = false;
};
using Args = std::vector<Arg>;
Arg arg(std::string key, std::string value);
Arg arg(std::string key, double value);

class ChromeTraceWriter {
 public:
  // Writes to a temporary beside `path` (common/util/atomic_file.hpp) that close() renames to `path`; destroyed
  // without close(), it leaves no file. A path ending in ".gz" is written gzip-compressed. Throws InputError naming
  // the path when it cannot write.
  explicit ChromeTraceWriter(const std::string& path);
  // Writes into a caller-owned stream (tests).
  explicit ChromeTraceWriter(std::ostream& out);
  ~ChromeTraceWriter();
  ChromeTraceWriter(const ChromeTraceWriter&) = delete;
  ChromeTraceWriter& operator=(const ChromeTraceWriter&) = delete;

  // A process (a group of tracks) with its display order; returns its pid.
  int add_process(std::string_view name, int sort_index);
  // A track (thread) in a process with its display order within it; returns its tid.
  int add_track(int pid, std::string_view name, int sort_index);

  // A complete slice [start_ns, start_ns + dur_ns). Throws std::logic_error when it breaks nesting on its track.
  void slice(int pid, int tid, std::string_view name, double start_ns, double dur_ns, std::string_view category = {},
             const Args& args = {});
  // An instant event on a track.
  void instant(int pid, int tid, std::string_view name, double ts_ns, const Args& args = {});
  // A counter sample: each series of `values` becomes a line in the counter track `name` of the process.
  void counter(int pid, std::string_view name, double ts_ns,
               const std::vector<std::pair<std::string, double>>& values);
  // A flow arrow from the slice enclosing (pid, tid, ts) at the start to the slice enclosing the end point.
  void flow_begin(std::uint64_t id, int pid, int tid, std::string_view name, double ts_ns);
  void flow_end(std::uint64_t id, int pid, int tid, std::string_view name, double ts_ns);

  // Finishes the JSON document and flushes. Called by the destructor when not called before.
  void close();

  std::uint64_t events_written() const { return events_; }
  const std::string& path() const { return path_; }

 private:
  void begin_event();
  void write_common(std::string_view ph, int pid, int tid, std::string_view name, double ts_ns);
  void write_args(const Args& args);
  void check_nesting(int pid, int tid, std::string_view name, double start_ns, double end_ns);

  std::unique_ptr<AtomicFile> file_;
  std::unique_ptr<GzipStreambuf> gzip_;  // between out_ and the file, for .gz paths
  std::unique_ptr<std::ostream> gzip_out_;
  std::ostream* out_ = nullptr;
  std::string path_;
  bool first_ = true;
  bool closed_ = false;
  std::uint64_t events_ = 0;
  int next_pid_ = 1;
  std::map<int, int> next_tid_;
  // Per track: end times of the slices still open at the last written start (a stack).
  std::map<std::pair<int, int>, std::vector<double>> open_;
  std::map<std::pair<int, int>, double> last_start_;
};

// Writes `s` as a JSON string literal (with quotes) to `out`.
void write_json_string(std::ostream& out, std::string_view s);

}  // namespace npusim::traces
