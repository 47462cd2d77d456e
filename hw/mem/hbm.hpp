// HBM timing: stacks -> channels -> pseudo-channels (PCs) -> bank groups -> banks with an open row each, DRAMSys
// style: every constraint is an "earliest allowed time" kept per bank, per bank group and per PC (data bus, activate
// window) and checked with a few lookups. Traffic is served in runs: the consecutive bursts of one access that fall
// into the same PC, bank index and row (over one or several bank groups) are one row-hit batch, so the cost is one
// computation per run, not per burst. A request's times are fixed when it arrives (requests arrive in time order).
//
// Per run of n bursts over g bank groups, times in ns (keys hbm.*, hbm.timing.*):
//   enter   = arrival, or when a slot frees in the PC's transaction queue (queue_depth) and in the command queue of
//             each bank the run uses (bank_queue_depth): a request holds its slots until its last column command
//             issues
//   t0      = enter + controller_latency
//   ACT     = the earliest time >= max(t0, PRE + tRP) that keeps the PC's activates tRRD_S apart (tRRD_L in one bank
//             group) and at most four in any tFAW window, outside refresh windows, for each bank whose row is not
//             open, where PRE = max(ACT_prev + tRAS, last read + tRTP, last write data + tWR)
//   data    = the earliest start s >= max(t0, ACT + tRCD) + tCL (tCWL for writes) of (n-1) x interval + tBURST on
//             the PC's data bus such that
//               - no other data overlaps it, and data in the same direction stays max(tCCD_S, tBURST) apart;
//               - read data starts >= the end of earlier write data + tWTR_S (tWTR_L when they share a bank group)
//                 + tCL, and ends <= tRTRS before later write data (and the same turned around for writes:
//                 write data starts >= read data end + tRTRS, i.e. tRTW = tCL + tBURST - tCWL + tRTRS);
//               - in each bank group, the run's first column command is >= tCCD_L after the last one of another
//                 run there, and its last >= tCCD_L before the first of a later one (a run's bursts visit its
//                 bank groups in turn);
//               - it stays outside the all-bank refresh windows [k tREFI, + tRFC), k >= 1
//   interval = max(tBURST, tCCD_S, tCCD_L / g), tBURST = burst_bytes x 8 / (bus_bits x pin_rate)
// Writes are posted into a write buffer per PC (hbm.write_buffer runs; the buffer is their queue, they take no slot
// in the queues above): they are served when no read is waiting at the PC (from the moment the last read's column
// command issued), or, when the buffer reaches write_high of its size, the oldest down to write_low at once, so
// that reads go first and writes turn the bus around in batches. A run's bursts are taken to visit its bank groups
// in turn: exact for mappings with the bank group lowest (the default), an approximation for others.
// Activates, the bus and the bank groups' column commands are calendars, not "free at" times: a run blocked on its
// bank does not hold up a later run to another bank, as an FR-FCFS scheduler would not.
// Within a bank (hbm.scheduler): under fcfs each bank serves its runs in arrival order. Under fr_fcfs a run that hits
// the row its bank had open before the last activate (the row an older request is closing) is served from that row
// before the older request, when it fits before that request's precharge (its last column command + tRTP, its
// write data + tWR, at or before ACT - tRP), no refresh closes the row first, and fewer than hbm.scheduler_cap hits
// passed that request already; otherwise it waits like any conflict. The precharge stays where the older request's
// arrival put it (every time reported is the real one): a controller that delays a precharge for later hits
// lets more of them pass than this one does. Bursts alternating over
// bank groups stream at the bus rate; bursts in one bank group at tCCD_L each.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
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
  std::uint64_t read_bursts = 0, read_row_hits = 0, write_bursts = 0, write_row_hits = 0;  // the same, apart
  std::uint64_t activates = 0;  // row openings (misses)
  std::uint64_t refreshes = 0;  // refresh windows that delayed a run
  // Requests (Hbm::access calls) from their arrival at the controllers to their last data, ns.
  traces::Histogram read_latency, write_latency;
  double row_hit_rate() const { return rate(row_hits, bursts); }
  double read_row_hit_rate() const { return rate(read_row_hits, read_bursts); }
  double write_row_hit_rate() const { return rate(write_row_hits, write_bursts); }
  static double rate(std::uint64_t a, std::uint64_t b) {
    return b ? static_cast<double>(a) / static_cast<double>(b) : 0.0;
  }
};

class Hbm {
 public:
  explicit Hbm(const config::HbmParams& p);

  struct Result {
    double accepted_ns;  // when the controllers took the request (a slot in each queue it needs)
    double done_ns;      // when its last burst's data is done
  };
  // Serves the contiguous range [addr, addr + bytes) arriving at t_ns. A write that goes into the write buffer is
  // posted: done_ns is its arrival, and its data is written when the buffer drains.
  Result access(std::uint64_t addr, std::uint64_t bytes, bool write, double t_ns);
  // Drains every buffered write (at the end of a run, before its statistics are read); returns when the last of
  // their data is written (ns), or 0 when none was buffered.
  double drain_writes();

  // The link between the L2 and each PC controller (noc.l2_to_hbm_bytes_per_cycle): a run's data also crosses it,
  // in the earliest free [s, s + bytes / rate) with s >= its data start (a calendar, as the bus), and is done when
  // both are. 0 = no link limit.
  void set_link_rate(double bytes_per_ns) { link_rate_ = bytes_per_ns; }

  double burst_ns() const { return t_burst_; }
  // Peak data rate of the whole device, B/ns.
  double peak_bytes_per_ns() const { return static_cast<double>(map_.pseudo_channels()) * burst_bytes_ / t_burst_; }
  const AddressMap& address_map() const { return map_; }
  const HbmStats& stats() const { return stats_; }
  // Registers the counters above at `prefix` ("chip.hbm"): read_bytes, write_bytes, bursts, row_hits, read_bursts,
  // read_row_hits, write_bursts, write_row_hits, activates, refreshes, and the histograms read_latency and
  // write_latency.
  void register_stats(traces::StatsRegistry& reg, const std::string& prefix) const;

 private:
  struct Bank {
    bool open = false;
    std::uint64_t row = 0;
    std::uint64_t epoch = 0;    // refreshes begun by the row's activate (refresh_epoch)
    double act = -1e18;         // last ACT
    double col_ready = 0;       // earliest column command to the open row
    double last_read = -1e18;   // last read column command
    double write_end = -1e18;   // end of the last write data
    double pre_done = 0;        // closed-page policy: when the precharge after the last access is done
    // FR-FCFS: the row the bank had open before its last activate, usable by younger row hits until the precharge
    // that activate needed (old_until, -inf when it closed no row), with that row's column ready time and refresh
    // window count, and the hits served from it.
    std::uint64_t old_row = 0, old_epoch = 0, old_passed = 0;
    double old_until = -1e18, old_col_ready = 0;
  };
  struct Pc;
  // Busy intervals of a resource, sorted and disjoint; the earliest gap is found by a short scan. `dir` marks data
  // of reads (0) and writes (1) on a bus, and `groups` the bank groups whose bursts it holds: the gaps the
  // turnarounds need are kept between intervals of different directions. Intervals that ended before the oldest
  // time still asked about are dropped.
  struct Interval {
    double start, end;
    std::uint8_t dir;
    std::uint64_t groups;
  };
  struct Calendar {
    std::vector<Interval> busy;
    void insert(const Interval& iv);
    void prune(double before);
  };
  // The earliest s >= earliest at which [s, s + duration) fits the bus of `pc` (data in direction `dir` of the bank
  // groups `groups`): the gaps and turnarounds above, outside refresh.
  double bus_slot(const Pc& pc, double earliest, double duration, std::uint8_t dir, std::uint64_t groups) const;
  // The earliest s >= earliest at which [s, s + duration) overlaps no interval of `cal`.
  static double free_slot(const Calendar& cal, double earliest, double duration);
  struct Act {
    double at;
    std::uint32_t bg;
  };
  struct WriteRun {
    std::uint32_t bank;
    std::uint64_t row, mask;
    std::uint32_t first_bg, n;
    double arrival;
    std::uint64_t request;  // the access it belongs to (its latency is sampled when its last run is written)
  };
  struct PendingWrite {
    double arrival;
    std::uint32_t runs;
    double done;
  };
  struct Pc {
    std::vector<Bank> banks;
    Calendar bus;
    std::vector<Calendar> columns;  // per bank group: [first, last column command + tCCD_L) of each run
    std::vector<Act> acts;          // activates, by time
    Calendar link;                  // the PC's link from the L2: transfers, each from its data start
    double offset = 0;  // refresh schedule offset (0: every PC refreshes together)
    // The queues as min-heaps of the times their requests release them (the last column command): the
    // transaction queue, and each bank's command queue.
    std::vector<double> slots;
    std::vector<std::vector<double>> bank_slots;
    // Posted write runs, oldest first, and when the PC's last queued read issues its last column command: reads
    // wait while it is later than now.
    std::vector<WriteRun> writes;
    double reads_until = -1e18;
  };
  struct Served {
    double done;      // last data (and link) done
    double released;  // last column command issued
  };
  Served serve_run(Pc& pc, std::uint32_t bank, std::uint64_t row, std::uint64_t bg_mask, std::uint32_t first_bg,
                   std::uint32_t n, bool write, double t);
  // A run of a request: as one serve_run, or with one burst per bank group, each bank group on its own.
  Served serve(Pc& pc, std::uint32_t bank, std::uint64_t row, std::uint64_t bg_mask, std::uint32_t first_bg,
               std::uint32_t n, bool write, double t);
  // The earliest activate at or after `earliest` in bank group `bg` (bank `bank` of the PC) that tRRD_S / tRRD_L, tFAW
  // and the refreshes allow; recorded in the PC's activates.
  double schedule_act(Pc& pc, std::uint32_t bg, std::size_t bank, double earliest);
  // Serves the oldest buffered writes of `pc` until `keep` remain, each entering at max(at, its arrival); returns
  // the last data done (0 if none).
  double drain(Pc& pc, double at, std::size_t keep);
  // The time a request arriving at `t` takes a slot in `heap` of `depth` (popping those released by then).
  static double take_slot(std::vector<double>& heap, std::uint64_t depth, double t);
  static void hold_slot(std::vector<double>& heap, double release);
  // t moved past the PC's all-bank refresh windows if [t, t + duration) overlaps one.
  double past_refresh(const Pc& pc, double t, double duration) const;
  // The refreshes up to t that close the open row of bank `bank` (its index in the PC).
  std::uint64_t refresh_epoch(const Pc& pc, std::size_t bank, double t) const;

  config::HbmParams p_;
  AddressMap map_;
  std::uint64_t burst_bytes_;
  double t_burst_;
  std::unique_ptr<RefreshPolicy> refresh_;  // hbm.refresh
  std::unique_ptr<PagePolicy> page_;        // hbm.page_policy
  std::unique_ptr<SchedulerPolicy> scheduler_;  // hbm.scheduler
  bool reorders_ = false;                       // whether a row hit may pass an older request at all
  double link_rate_ = 0;
  std::vector<Pc> pcs_;
  HbmStats stats_;
  std::vector<double> near_;  // scratch for schedule_act
  std::uint64_t next_request_ = 0;
  std::map<std::uint64_t, PendingWrite> pending_writes_;  // write requests with runs still buffered
  std::vector<std::uint32_t> touched_;                    // scratch for access: the PCs a posted write went to
};

}  // namespace npusim::hw::mem
