#include "traces/chrome_trace.hpp"

#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <stdexcept>

namespace npusim::traces {

Arg arg(std::string key, std::string value) { return Arg{std::move(key), std::move(value), false}; }

Arg arg(std::string key, double value) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.17g", value);
  return Arg{std::move(key), buf, true};
}

void write_json_string(std::ostream& out, std::string_view s) {
  out.put('"');
  for (char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    switch (c) {
      case '"': out << "\\\""; break;
      case '\\': out << "\\\\"; break;
      case '\n': out << "\\n"; break;
      case '\r': out << "\\r"; break;
      case '\t': out << "\\t"; break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out << buf;
        } else {
          out.put(ch);
        }
    }
  }
  out.put('"');
}

namespace {

// Microseconds with three decimals: nanosecond precision without float noise.
void write_us(std::ostream& out, double ns) {
  char buf[48];
  const double r = std::round(ns);
  if (std::fabs(ns - r) < 1e-6 && std::fabs(r) < 9.0e15) {
    const auto v = static_cast<std::int64_t>(r);
    std::snprintf(buf, sizeof buf, "%" PRId64 ".%03" PRId64, v / 1000, v % 1000);
  } else {
    std::snprintf(buf, sizeof buf, "%.6f", ns / 1000.0);
  }
  out << buf;
}

}  // namespace

ChromeTraceWriter::ChromeTraceWriter(const std::string& path) : file_(std::make_unique<AtomicFile>(path)), path_(path) {
  out_ = &file_->stream();
  if (path.size() > 3 && path.compare(path.size() - 3, 3, ".gz") == 0) {
    gzip_ = std::make_unique<GzipStreambuf>(*out_);
    gzip_out_ = std::make_unique<std::ostream>(gzip_.get());
    out_ = gzip_out_.get();
  }
  *out_ << "{\"displayTimeUnit\":\"ns\",\"traceEvents\":[\n";
}

ChromeTraceWriter::ChromeTraceWriter(std::ostream& out) : out_(&out) {
  *out_ << "{\"displayTimeUnit\":\"ns\",\"traceEvents\":[\n";
}

ChromeTraceWriter::~ChromeTraceWriter() {
  // A file not closed explicitly belongs to a run that failed: its temporary goes (AtomicFile), no trace appears.
  if (file_) return;
  try {
    close();
  } catch (...) {
    // A destructor must not throw; a failed flush was already reported by close() when called explicitly.
  }
}

void ChromeTraceWriter::close() {
  if (closed_) return;
  closed_ = true;
  *out_ << "\n]}\n";
  out_->flush();
  // A compression failure is a write failure of the file: the stream's state makes commit() report it.
  if (gzip_ && (!gzip_->finish() || !*gzip_out_)) file_->stream().setstate(std::ios::badbit);
  if (file_) file_->commit();  // the trace appears under its name only now, complete
}

void ChromeTraceWriter::begin_event() {
  if (closed_) throw std::logic_error("trace event written after close()");
  if (!first_) *out_ << ",\n";
  first_ = false;
  ++events_;
}

void ChromeTraceWriter::write_common(std::string_view ph, int pid, int tid, std::string_view name, double ts_ns) {
  begin_event();
  *out_ << "{\"ph\":\"" << ph << "\",\"pid\":" << pid << ",\"tid\":" << tid << ",\"name\":";
  write_json_string(*out_, name);
  *out_ << ",\"ts\":";
  write_us(*out_, ts_ns);
}

void ChromeTraceWriter::write_args(const Args& args) {
  if (args.empty()) return;
  *out_ << ",\"args\":{";
  bool first = true;
  for (const Arg& a : args) {
    if (!first) *out_ << ',';
    first = false;
    write_json_string(*out_, a.key);
    out_->put(':');
    if (a.numeric) {
      *out_ << a.value;
    } else {
      write_json_string(*out_, a.value);
    }
  }
  out_->put('}');
}

int ChromeTraceWriter::add_process(std::string_view name, int sort_index) {
  const int pid = next_pid_++;
  begin_event();
  *out_ << "{\"ph\":\"M\",\"pid\":" << pid << ",\"tid\":0,\"name\":\"process_name\",\"args\":{\"name\":";
  write_json_string(*out_, name);
  *out_ << "}}";
  begin_event();
  *out_ << "{\"ph\":\"M\",\"pid\":" << pid << ",\"tid\":0,\"name\":\"process_sort_index\",\"args\":{\"sort_index\":"
        << sort_index << "}}";
  return pid;
}

int ChromeTraceWriter::add_track(int pid, std::string_view name, int sort_index) {
  const int tid = ++next_tid_[pid];
  begin_event();
  *out_ << "{\"ph\":\"M\",\"pid\":" << pid << ",\"tid\":" << tid << ",\"name\":\"thread_name\",\"args\":{\"name\":";
  write_json_string(*out_, name);
  *out_ << "}}";
  begin_event();
  *out_ << "{\"ph\":\"M\",\"pid\":" << pid << ",\"tid\":" << tid
        << ",\"name\":\"thread_sort_index\",\"args\":{\"sort_index\":" << sort_index << "}}";
  return tid;
}

void ChromeTraceWriter::check_nesting(int pid, int tid, std::string_view name, double start_ns, double end_ns) {
  const auto key = std::make_pair(pid, tid);
  auto [it, fresh] = last_start_.try_emplace(key, start_ns);
  if (!fresh) {
    if (start_ns < it->second) {
      throw std::logic_error("trace slice '" + std::string(name) + "' on pid " + std::to_string(pid) + " tid " +
                             std::to_string(tid) + " written out of start order");
    }
    it->second = start_ns;
  }
  std::vector<double>& stack = open_[key];
  // Times are converted from integer cycles to ns in floating point: back-to-back slices may differ in the last
  // bits, so touching within a picosecond counts as touching.
  constexpr double slack = 1e-3;
  while (!stack.empty() && stack.back() <= start_ns + slack) stack.pop_back();
  if (!stack.empty() && end_ns > stack.back() + slack) {
    throw std::logic_error("trace slice '" + std::string(name) + "' on pid " + std::to_string(pid) + " tid " +
                           std::to_string(tid) + " overlaps an enclosing slice without nesting in it");
  }
  stack.push_back(end_ns);
}

void ChromeTraceWriter::slice(int pid, int tid, std::string_view name, double start_ns, double dur_ns,
                              std::string_view category, const Args& args) {
  if (dur_ns < 0 || start_ns < 0) throw std::logic_error("trace slice with negative time: " + std::string(name));
  // Round start and end to the picosecond the file shows, and write the duration as their difference, so that a
  // slice ending where the next one starts shows exactly that.
  const double end_ns = std::round((start_ns + dur_ns) * 1000.0) / 1000.0;
  start_ns = std::round(start_ns * 1000.0) / 1000.0;
  dur_ns = end_ns - start_ns;
  check_nesting(pid, tid, name, start_ns, start_ns + dur_ns);
  write_common("X", pid, tid, name, start_ns);
  *out_ << ",\"dur\":";
  write_us(*out_, dur_ns);
  if (!category.empty()) {
    *out_ << ",\"cat\":";
    write_json_string(*out_, category);
  }
  write_args(args);
  out_->put('}');
}

void ChromeTraceWriter::instant(int pid, int tid, std::string_view name, double ts_ns, const Args& args) {
  write_common("i", pid, tid, name, ts_ns);
  *out_ << ",\"s\":\"t\"";
  write_args(args);
  out_->put('}');
}

void ChromeTraceWriter::counter(int pid, std::string_view name, double ts_ns,
                                const std::vector<std::pair<std::string, double>>& values) {
  Args args;
  args.reserve(values.size());
  for (const auto& [k, v] : values) args.push_back(arg(k, v));
  write_common("C", pid, 0, name, ts_ns);
  write_args(args);
  out_->put('}');
}

void ChromeTraceWriter::flow_begin(std::uint64_t id, int pid, int tid, std::string_view name, double ts_ns) {
  write_common("s", pid, tid, name, ts_ns);
  *out_ << ",\"cat\":\"flow\",\"id\":" << id << '}';
}

void ChromeTraceWriter::flow_end(std::uint64_t id, int pid, int tid, std::string_view name, double ts_ns) {
  write_common("f", pid, tid, name, ts_ns);
  *out_ << ",\"cat\":\"flow\",\"bp\":\"e\",\"id\":" << id << '}';
}

}  // namespace npusim::traces
