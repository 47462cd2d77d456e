// HBM timing: stacks -> channels -> pseudo-channels (PCs) -> bank groups -> banks with an open row each, DRAMSys
// style: every constraint is an "earliest allowed time" kept per bank, per PC (data bus, activate window) and
// checked with a few lookups. Traffic is served in runs: the consecutive bursts of one access that fall into the
// same PC, bank index and row (over one or several bank groups) are one row-hit batch (FR-FCFS-like: a row, once
// open, serves every burst of the batch), so the cost is one computation per run, not per burst.
//
// Per run of n bursts over g bank groups, times in ns (keys hbm.timing.*):
//   t0      = arrival + controller_latency
//   ACT     = the earliest time >= max(t0, PRE + tRP) that keeps every pair of activates tRRD apart and at most four
//             in any tFAW window, outside refresh windows, for each bank whose row is not open, where
//             PRE = max(ACT_prev + tRAS, last read + tRTP, last write data + tWR)
//   first column command c0 = max(t0, ACT + tRCD, reads: last write data in the PC + tWTR_S and in the same
//             bank group + tWTR_L)
//   data    = the earliest gap of (n-1) x interval + tBURST on the PC's data bus at or after c0 + tCL (tCWL for
//             writes), outside the all-bank refresh windows [k tREFI, + tRFC), k >= 1
//   interval = max(tBURST, tCCD_L / g), tBURST = burst_bytes x 8 / (bus_bits x pin_rate)
// Activates and bus slots are calendars, not "free at" times: a run blocked on its bank does not hold up a later
// run to another bank, which is what an FR-FCFS scheduler achieves. Bursts alternating over bank groups stream at
// the bus rate; bursts in one bank group at half rate.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <queue>
#include <vector>

#include "common/config/chip_config.hpp"
#include "hw/mem/address_map.hpp"
#include "hw/mem/hbm_policies.hpp"
#include "traces/stats.hpp"

namespace npusim::hw::mem {

struct HbmStats {
  std::uint64_t read_bytes = 0, write_bytes = 0;
  std::uint64_t bursts = 0;
  std::uint64_t row_hits = 0;   // bursts served from an open row
  std::uint64_t activates = 0;  // row openings (misses)
  std::uint64_t refreshes = 0;  // refresh windows that delayed a run
  double row_hit_rate() const { return bursts ? static_cast<double>(row_hits) / static_cast<double>(bursts) : 0.0; }
};

class Hbm {
 public:
  explicit Hbm(const config::HbmParams& p);

  struct Result {
    double accepted_ns;  // when the controllers took the request (queue_depth requests in flight per PC)
    double done_ns;      // when its last burst's data is done
  };
  // Serves the contiguous range [addr, addr + bytes) arriving at t_ns.
  Result access(std::uint64_t addr, std::uint64_t bytes, bool write, double t_ns);

  // The link between the L2 and each PC controller (noc.l2_to_hbm_bytes_per_cycle): a run's data also crosses it,
  // [max(data start, link free), + bytes / rate), and is done when both are. 0 = no link limit.
  void set_link_rate(double bytes_per_ns) { link_rate_ = bytes_per_ns; }

  double burst_ns() const { return t_burst_; }
  // Peak data rate of the whole device, B/ns.
  double peak_bytes_per_ns() const { return static_cast<double>(map_.pseudo_channels()) * burst_bytes_ / t_burst_; }
  const AddressMap& address_map() const { return map_; }
  const HbmStats& stats() const { return stats_; }
  // Registers the counters above at `prefix` ("chip.hbm"): read_bytes, write_bytes, bursts, row_hits, activates,
  // refreshes.
  void register_stats(traces::StatsRegistry& reg, const std::string& prefix) const;

 private:
  struct Bank {
    bool open = false;
    std::uint64_t row = 0;
    std::uint64_t epoch = 0;    // refresh window count when the row was opened
    double act = -1e18;         // last ACT
    double col_ready = 0;       // earliest column command to the open row
    double last_read = -1e18;   // last read column command
    double write_end = -1e18;   // end of the last write data
    double pre_done = 0;        // closed-page policy: when the precharge after the last access is done
  };
  struct Pc;
  // Busy intervals of a resource, sorted; the earliest gap is found by a short scan. Intervals that ended before the
  // oldest time still asked about are dropped.
  struct Calendar {
    std::vector<std::pair<double, double>> busy;
    double reserve(double earliest, double duration, const Hbm& h, const Pc& pc);
    void prune(double before);
  };
  struct Pc {
    std::vector<Bank> banks;
    Calendar bus;
    std::vector<double> acts;  // activate times, sorted
    double write_end = -1e18;  // end of the last write data on the PC
    std::vector<double> bg_write_end;  // per bank group
    double link_free = 0;
    double offset = 0;         // refresh schedule offset (0: every PC refreshes together)
    // Done times of the requests in the scheduler's queue (a min-heap): a new request enters when fewer than
    // queue_depth are in flight, i.e. when the earliest of them is done.
    std::priority_queue<double, std::vector<double>, std::greater<double>> inflight;
  };
  double serve_run(Pc& pc, std::uint32_t bank, std::uint64_t row, std::uint64_t bg_mask, std::uint32_t n, bool write,
                   double t);
  double schedule_act(Pc& pc, double earliest);
  // t moved past the PC's all-bank refresh windows if [t, t + duration) overlaps one.
  double past_refresh(const Pc& pc, double t, double duration) const;
  std::uint64_t refresh_epoch(const Pc& pc, double t) const;

  config::HbmParams p_;
  AddressMap map_;
  std::uint64_t burst_bytes_;
  double t_burst_;
  std::unique_ptr<RefreshPolicy> refresh_;  // hbm.refresh
  std::unique_ptr<PagePolicy> page_;        // hbm.page_policy
  double link_rate_ = 0;
  std::vector<Pc> pcs_;
  HbmStats stats_;
  std::vector<double> near_;  // scratch for schedule_act
};

}  // namespace npusim::hw::mem
