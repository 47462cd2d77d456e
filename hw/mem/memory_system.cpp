#include "hw/mem/memory_system.hpp"

#include <algorithm>
#include <cmath>

#include "common/util/error.hpp"

namespace npusim::hw::mem {

namespace {
class Crossbar final : public Topology {
 public:
  explicit Crossbar(std::uint64_t latency) : latency_(latency) {}
  std::uint64_t latency(std::uint32_t, std::uint32_t) const override { return latency_; }

 private:
  std::uint64_t latency_;
};
}  // namespace

std::unique_ptr<Topology> make_topology(const config::NocParams& noc) {
  if (noc.topology == "crossbar") return std::make_unique<Crossbar>(noc.latency);
  throw InputError("noc.topology: unknown topology '" + noc.topology + "' (crossbar)");
}

void MemorySystem::register_stats(traces::StatsRegistry& reg, const std::string& prefix) const {
  reg.bind(prefix + ".gm.read_bytes", totals_.read_bytes, "bytes", "bytes the cores (or a replayed trace) read");
  reg.bind(prefix + ".gm.write_bytes", totals_.write_bytes, "bytes", "bytes the cores (or a replayed trace) wrote");
  reg.bind(prefix + ".gm.reads", totals_.reads, "count", "read requests");
  reg.bind(prefix + ".gm.read_latency_cycles", totals_.read_latency_cycles, "cycles",
           "read latency summed over read requests: from the request to its data (core clock)");
  l2_.register_stats(reg, prefix + ".l2");
  hbm_.register_stats(reg, prefix + ".hbm");
}

MemorySystem::MemorySystem(const config::ChipConfig& cfg, std::uint32_t cores)
    : cfg_(cfg),
      ns_per_cycle_(1e9 / cfg.clock.core_hz),
      hbm_(cfg.hbm),
      l2_(cfg.l2),
      topo_(make_topology(cfg.noc)),
      read_port_(cores, 0),
      write_port_(cores, 0),
      slice_free_(cfg.l2.slices, 0),
      read_inflight_(cores, std::vector<double>(cfg.noc.core_outstanding, 0.0)),
      write_inflight_(cores, std::vector<double>(cfg.noc.core_outstanding, 0.0)),
      read_next_(cores, 0),
      write_next_(cores, 0),
      bin_cycles_(std::max<std::uint64_t>(1, static_cast<std::uint64_t>(cfg.sim.counter_interval * 1e-9 * cfg.clock.core_hz))) {
  // noc.l2_to_hbm_bytes_per_cycle in B/ns.
  hbm_.set_link_rate(cfg.noc.l2_to_hbm_bytes_per_cycle * cfg.clock.core_hz / 1e9);
}

MemoryBin& MemorySystem::bin(double cycle) {
  const auto i = static_cast<std::uint64_t>(std::max(0.0, cycle) / static_cast<double>(bin_cycles_));
  if (last_bin_ptr_ == nullptr || i != last_bin_) {
    last_bin_ = i;
    last_bin_ptr_ = &bins_[i];  // std::map: the pointer stays valid as bins are added
  }
  return *last_bin_ptr_;
}

double MemorySystem::hbm_fetch(std::uint64_t addr, std::uint64_t bytes, bool write, double t) {
  const Hbm::Result r = hbm_.access(addr, bytes, write, t * ns_per_cycle_);
  const double done = r.done_ns / ns_per_cycle_;
  bin(done).hbm_bytes += bytes;
  return done;
}

double MemorySystem::through_l2(std::uint32_t core, std::uint64_t addr, std::uint64_t bytes, bool write,
                                double t_port, double rate, bool via_port, double* accepted) {
  const std::uint64_t line = l2_.line_bytes();
  double done = t_port;
  // Consecutive missing lines of this request are fetched as one batch.
  std::uint64_t miss_first = 0, miss_bytes = 0;
  double miss_time = 0;
  std::vector<L2Cache::Way*>& batch = batch_;
  batch.clear();
  auto flush = [&] {
    if (!miss_bytes) return;
    const double ready = hbm_fetch(miss_first, miss_bytes, false, miss_time);
    for (L2Cache::Way* w : batch) L2Cache::fill(w, ready);
    done = std::max(done, ready);
    miss_bytes = 0;
    batch.clear();
  };
  for (std::uint64_t a = addr; a < addr + bytes;) {
    const std::uint64_t line_addr = a / line * line;
    const std::uint64_t part = std::min(addr + bytes, line_addr + line) - a;
    const std::uint32_t slice = l2_.slice_of(line_addr);
    // The line's bytes leave the port as the port streams them, then cross the interconnect.
    const double left_port = via_port ? t_port + static_cast<double>(a + part - addr) / rate : t_port;
    const double arrive = left_port + (via_port ? static_cast<double>(topo_->latency(core, slice)) : 0.0);
    double& sf = slice_free_[slice];
    const double s = std::max(arrive, sf);
    sf = s + static_cast<double>(part) / cfg_.l2.slice_bytes_per_cycle;
    if (accepted) *accepted = std::max(*accepted, s);
    const L2Cache::Lookup look = l2_.access(line_addr, write, static_cast<std::uint32_t>(part));
    MemoryBin& b = bin(s);
    b.l2_bytes += part;
    (look.hit ? b.l2_hits : b.l2_misses) += 1;
    const double lookup_done = s + static_cast<double>(cfg_.l2.hit_latency);
    if (look.writeback) hbm_fetch(look.victim_addr, line, true, lookup_done);  // posted: nobody waits
    if (look.hit) {
      done = std::max(done, std::max(lookup_done, look.ready));
    } else if (write && part == line) {
      L2Cache::fill(look.way, lookup_done);  // a whole-line write needs no fetch
      done = std::max(done, lookup_done);
    } else {
      const double request = lookup_done + static_cast<double>(cfg_.l2.miss_latency);
      if (miss_bytes && miss_first + miss_bytes == line_addr) {
        miss_bytes += line;
      } else {
        flush();
        miss_first = line_addr;
        miss_bytes = line;
        miss_time = request;
      }
      batch.push_back(look.way);
      if (batch.size() >= cfg_.l2.ways) flush();  // later lines of this request could evict a batched one
    }
    a += part;
  }
  flush();
  return done;
}

double MemorySystem::drain_writes() {
  const double ns = hbm_.drain_writes();
  return ns / ns_per_cycle_;
}

void MemorySystem::preload(std::uint64_t addr, std::uint64_t bytes) {
  const std::uint64_t line = l2_.line_bytes();
  for (std::uint64_t a = addr / line * line; a < addr + bytes; a += line) {
    l2_.access(a, false, 0);
    l2_.fill(a, 0);
  }
  l2_.reset_stats();
}

GmAccess MemorySystem::access(const GmRequest& r) {
  const double rate = r.write ? cfg_.noc.core_write_bytes_per_cycle : cfg_.noc.core_read_bytes_per_cycle;
  double& port = (r.write ? write_port_ : read_port_).at(r.core);
  std::vector<double>& inflight = (r.write ? write_inflight_ : read_inflight_)[r.core];
  std::size_t& next = (r.write ? write_next_ : read_next_)[r.core];
  // The request takes one slot per noc.request_bytes (at most the whole window): it starts when the oldest of
  // them is free, so the bytes in flight do not depend on how the kernel chunked its copy.
  const std::size_t slots = std::min<std::size_t>(
      inflight.size(), std::max<std::uint64_t>(1, (r.bytes + cfg_.noc.request_bytes - 1) / cfg_.noc.request_bytes));
  double oldest = 0;
  for (std::size_t k = 0; k < slots; ++k) oldest = std::max(oldest, inflight[(next + k) % inflight.size()]);
  const double begin = std::max({static_cast<double>(r.start), port, oldest});
  port = begin + static_cast<double>(r.bytes) / rate;
  (r.write ? totals_.write_bytes : totals_.read_bytes) += r.bytes;
  double done = through_l2(r.core, r.addr, r.bytes, r.write, begin, rate, true);
  done += static_cast<double>(cfg_.noc.latency);  // data (or the write acknowledgement) back to the core
  for (std::size_t k = 0; k < slots; ++k) inflight[(next + k) % inflight.size()] = done;
  next = (next + slots) % inflight.size();
  if (!r.write) {
    ++totals_.reads;
    totals_.read_latency_cycles += done - static_cast<double>(r.start);
  }
  return GmAccess{static_cast<std::uint64_t>(std::ceil(port)), static_cast<std::uint64_t>(std::ceil(done))};
}

MemorySystem::Timing MemorySystem::access_direct(std::uint64_t addr, std::uint64_t bytes, bool write, double cycle,
                                                 bool use_l2) {
  (write ? totals_.write_bytes : totals_.read_bytes) += bytes;
  Timing t{cycle, cycle};
  if (use_l2) {
    t.done = through_l2(0, addr, bytes, write, cycle, 0, false, &t.accepted);
  } else {
    const Hbm::Result r = hbm_.access(addr, bytes, write, cycle * ns_per_cycle_);
    t.accepted = r.accepted_ns / ns_per_cycle_;
    t.done = r.done_ns / ns_per_cycle_;
    bin(t.done).hbm_bytes += bytes;
  }
  if (!write) {
    ++totals_.reads;
    totals_.read_latency_cycles += t.done - t.accepted;
  }
  return t;
}

}  // namespace npusim::hw::mem
