// The memory hierarchy behind the cores' GM ports (DESIGN.md, "Memory system"): per-core ports -> interconnect ->
// L2 slices -> links -> HBM pseudo-channels. Every resource is a reservation ("free at" or a calendar) and a request
// computes its own times when it arrives, so there are no SystemC events here; requests arrive in simulated-time
// order because the cores synchronise before they call. Times are core cycles (clock.core) except inside Hbm (ns).
//
// A read of B bytes from core c at cycle t (keys in parentheses):
//   port      the copy is k = min(noc.core_outstanding, ceil(B / noc.request_bytes)) requests; begin = max(t, port
//             free, done of the oldest k of the last noc.core_outstanding requests); the port
//             streams the bytes at noc.core_read_bytes_per_cycle (write: noc.core_write_bytes_per_cycle);
//             accepted = begin + B / rate. The outstanding limit is the back-pressure of a loaded memory system.
//   to L2     each line's bytes reach their slice noc.latency cycles after they left the port (topology: crossbar)
//   slice     s = max(arrival, slice free); the slice is busy bytes / l2.slice_bytes_per_cycle
//   hit       data at max(s + l2.hit_latency, the line's fill time)
//   miss      the line is requested from HBM at s + l2.hit_latency + l2.miss_latency (consecutive missing lines of
//             one request in one batch), crosses the L2->PC link (noc.l2_to_hbm_bytes_per_cycle) and is there when
//             both the HBM data and the link are done; a dirty victim is written back (posted)
//   back      done = the last line's data + noc.latency
// Writes allocate: a whole-line write needs no fetch; a partial-line write miss fetches the line first. A write is
// done when its last line is written in the L2, + noc.latency for the acknowledgement.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <vector>

#include "common/config/chip_config.hpp"
#include "hw/mem/gm_port.hpp"
#include "hw/mem/hbm.hpp"
#include "hw/mem/l2_cache.hpp"

namespace npusim::hw::mem {

// The interconnect's shape: the latency between a core and an L2 slice. One named policy so far (noc.topology).
class Topology {
 public:
  virtual ~Topology() = default;
  virtual std::uint64_t latency(std::uint32_t core, std::uint32_t slice) const = 0;
};
std::unique_ptr<Topology> make_topology(const config::NocParams& noc);

// Time-binned activity for trace counters.
struct MemoryBin {
  std::uint64_t hbm_bytes = 0;
  std::uint64_t l2_hits = 0, l2_misses = 0;
  std::uint64_t l2_bytes = 0;
};

struct MemoryTotals {
  std::uint64_t read_bytes = 0, write_bytes = 0;  // requested by cores (or the trace)
  std::uint64_t reads = 0;
  double read_latency_cycles = 0;  // summed over reads: done - request start
};

class MemorySystem final : public GmPort {
 public:
  MemorySystem(const config::ChipConfig& cfg, std::uint32_t cores);
  GmAccess access(const GmRequest& r) override;
  // prefix.gm (read_bytes, write_bytes, reads, read_latency_cycles), prefix.l2.slice<i>.*, prefix.hbm.*.
  void register_stats(traces::StatsRegistry& reg, const std::string& prefix) const override;

  // A request without a core port (trace replay): arrives at the L2 (or with use_l2 = false, at the memory
  // controllers) at `cycle`. Returns accepted and done cycles (fractional).
  struct Timing {
    double accepted, done;
  };
  Timing access_direct(std::uint64_t addr, std::uint64_t bytes, bool write, double cycle, bool use_l2);

  // Drains the HBM controllers' write buffers (the end of a run, before its statistics are read): returns when the
  // last buffered write's data is written (core cycles), 0 when none was buffered.
  double drain_writes();

  // Puts the lines of [addr, addr + bytes) into the L2 as clean, present data (what an earlier kernel would have
  // left there), without time or traffic. Used by latency probes to measure hits.
  void preload(std::uint64_t addr, std::uint64_t bytes);

  const Hbm& hbm() const { return hbm_; }
  const L2Cache& l2() const { return l2_; }
  const MemoryTotals& totals() const { return totals_; }
  // The bins that saw traffic, by index (bin i covers cycles [i, i + 1) x bin_cycles()): sparse, so a request far
  // in the future (a memory trace's cycle 10^15) costs one bin, not every bin before it.
  const std::map<std::uint64_t, MemoryBin>& bins() const { return bins_; }
  std::uint64_t bin_cycles() const { return bin_cycles_; }
  double ns_per_cycle() const { return ns_per_cycle_; }

 private:
  // Returns when the data is done; *accepted = when the last line's slice took it.
  double through_l2(std::uint32_t core, std::uint64_t addr, std::uint64_t bytes, bool write, double t_port,
                    double rate, bool via_port, double* accepted = nullptr);
  double hbm_fetch(std::uint64_t addr, std::uint64_t bytes, bool write, double t);
  MemoryBin& bin(double cycle);

  config::ChipConfig cfg_;
  double ns_per_cycle_;
  Hbm hbm_;
  L2Cache l2_;
  std::unique_ptr<Topology> topo_;
  std::vector<double> read_port_, write_port_, slice_free_;
  // Per core and direction: done times of the last noc.core_outstanding requests of noc.request_bytes (a ring).
  std::vector<std::vector<double>> read_inflight_, write_inflight_;
  std::vector<std::size_t> read_next_, write_next_;
  MemoryTotals totals_;
  std::map<std::uint64_t, MemoryBin> bins_;
  std::uint64_t bin_cycles_;
  std::uint64_t last_bin_ = 0;  // the bin bin() returned last (requests come mostly in time order)
  MemoryBin* last_bin_ptr_ = nullptr;
  std::vector<L2Cache::Way*> batch_;  // scratch for through_l2
};

}  // namespace npusim::hw::mem
