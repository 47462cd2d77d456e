#include "hw/chip/pipe_trace.hpp"

#include <algorithm>

namespace npusim::hw::chip {

PipeTrace::PipeTrace(traces::ChromeTraceWriter& writer, const core::CoreIdentity& id, double core_hz, int sort_index,
                     SliceFilter* filter)
    : w_(writer), ns_per_cycle_(1e9 / core_hz), name_(id.name), sort_index_(sort_index), filter_(filter) {}

void PipeTrace::open() {
  // Registered on first use, so idle cores do not clutter the trace.
  pid_ = w_.add_process(name_, sort_index_);
  for (int p = 0; p < isa::kPipeCount; ++p) tid_[p] = w_.add_track(pid_, isa::pipe_name(static_cast<isa::Pipe>(p)), p);
}

PipeTrace::~PipeTrace() = default;

void PipeTrace::on_instr(isa::Pipe pipe, const isa::Instr& in, std::uint64_t start, std::uint64_t end) {
  if (end <= start) return;  // flags and barriers take no pipe time
  if (filter_ && (end <= filter_->start_cycle || start >= filter_->end_cycle)) return;
  if (pid_ < 0) open();
  const int p = static_cast<int>(pipe);
  Pending& q = pending_[p];
  const std::string_view name = isa::op_name(in.op);
  // Back-to-back or overlapping (a copy still in flight) instructions of one name are one slice; a slice of
  // another name ends where the next instruction starts, so a track's slices never overlap.
  if (q.count && start <= q.end && q.name == name) {
    q.end = std::max(q.end, end);
    ++q.count;
    return;
  }
  if (q.count && start < q.end) q.end = start;
  emit(p);
  q = Pending{std::string(name), start, end, 1};
}

void PipeTrace::emit(int p) {
  Pending& q = pending_[p];
  if (!q.count) return;
  if (filter_ && filter_->written >= filter_->limit) {
    ++filter_->dropped;
    q.count = 0;
    return;
  }
  if (filter_) ++filter_->written;
  traces::Args args{traces::arg("cycles", static_cast<double>(q.end - q.start))};
  if (q.count > 1) args.push_back(traces::arg("count", static_cast<double>(q.count)));
  w_.slice(pid_, tid_[p], q.name, static_cast<double>(q.start) * ns_per_cycle_,
           static_cast<double>(q.end - q.start) * ns_per_cycle_, "instr", args);
  q.count = 0;
}

namespace {
std::string flag_name(isa::Pipe src, isa::Pipe dst, std::uint32_t id) {
  return std::string(isa::pipe_name(src)) + "->" + std::string(isa::pipe_name(dst)) + " #" + std::to_string(id);
}
}  // namespace

bool PipeTrace::admit(std::uint64_t from, std::uint64_t to) {
  if (!filter_) return true;
  if (to < filter_->start_cycle || from >= filter_->end_cycle) return false;
  if (filter_->written >= filter_->limit) {
    ++filter_->dropped;
    return false;
  }
  ++filter_->written;
  return true;
}

std::uint64_t PipeTrace::on_flag_set(isa::Pipe src, isa::Pipe dst, std::uint32_t id, std::uint64_t at) {
  const std::uint64_t seq = flag_sets_++;
  if (!admit(at, at)) return seq;
  w_.instant(pid(), tid(src), "set_flag", static_cast<double>(at) * ns_per_cycle_,
             {traces::arg("flag", flag_name(src, dst, id)), traces::arg("set", static_cast<double>(seq))});
  return seq;
}

void PipeTrace::on_flag_wait(isa::Pipe src, isa::Pipe dst, std::uint32_t id, std::uint64_t from, std::uint64_t to,
                             std::uint64_t seq) {
  if (to <= from || !admit(from, to)) return;  // a wait that found its flag set costs nothing: not worth an event
  w_.instant(pid(), tid(dst), "wait_flag", static_cast<double>(to) * ns_per_cycle_,
             {traces::arg("flag", flag_name(src, dst, id)), traces::arg("set", static_cast<double>(seq)),
              traces::arg("waited_cycles", static_cast<double>(to - from)),
              traces::arg("waits_for", std::string(isa::pipe_name(src)))});
}

void PipeTrace::flush() {
  for (int p = 0; p < isa::kPipeCount; ++p) emit(p);
}

}  // namespace npusim::hw::chip
