// The HBM controller's policies, each a small interface chosen by name in the config and made in one place
// (make_refresh_policy, make_page_policy, make_scheduler_policy), as the L2's hash and replacement are:
//   hbm.refresh      all_bank: every tREFI the whole pseudo-channel refreshes for tRFC (no activate, no data, and
//                    the open rows close); per_bank: each bank refreshes for tRFCpb in its own slot of tREFI / banks
//                    (its activates wait and its open row closes); none.
//   hbm.page_policy  open: a row stays open after its accesses (a later hit skips the activate); closed: the bank
//                    precharges after each run of accesses (a later access to it pays tRCD but never tRP).
//   hbm.scheduler    fr_fcfs: younger requests that hit the row an older request is closing are served from it
//                    when they fit before that request's precharge (fixed at its arrival, not delayed for them), up
//                    to hbm.scheduler_cap of them (FR-FCFS with a starvation cap; 0 behaves as fcfs); fcfs: each
//                    bank's requests in arrival order.
// Times in ns; `offset` is the pseudo-channel's first refresh (one interval after start).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "common/config/chip_config.hpp"

namespace npusim::hw::mem {

// t moved past the periodic windows [offset + k period, + busy) if [t, t + duration) would overlap one.
double past_windows(double t, double duration, double offset, double period, double busy);

class RefreshPolicy {
 public:
  virtual ~RefreshPolicy() = default;
  // [t, t + duration) moved past the windows in which the whole pseudo-channel refreshes.
  virtual double past_all_bank(double offset, double t, double duration) const = 0;
  // The refreshes up to t that close bank `bank`'s (of `banks`) open row: the pseudo-channel's all-bank ones or the
  // bank's own; 0 when nothing closes rows. A row opened in one epoch is closed in any later one.
  virtual std::uint64_t epoch(double offset, std::size_t bank, std::size_t banks, double t) const = 0;
  // The earliest activate of bank `bank` (of `banks`) at or after `earliest` that keeps [ACT, ACT + tRAS + tRP) (the
  // row open its minimum time, then precharged) out of that bank's own refresh windows.
  virtual double past_bank(double offset, std::size_t bank, std::size_t banks, double earliest) const = 0;
};

class PagePolicy {
 public:
  virtual ~PagePolicy() = default;
  // Whether a bank precharges as soon as a run of accesses to its open row is done.
  virtual bool precharge_after_run() const = 0;
};

class SchedulerPolicy {
 public:
  virtual ~SchedulerPolicy() = default;
  // Whether a row hit is served before an older request that waits to close the row and that `passed` younger
  // hits have passed already.
  virtual bool hit_passes(std::uint64_t passed) const = 0;
};

// By hbm.refresh, hbm.page_policy and hbm.scheduler; InputError naming the key and the choices for another name.
std::unique_ptr<RefreshPolicy> make_refresh_policy(const config::HbmParams& p);
std::unique_ptr<PagePolicy> make_page_policy(const config::HbmParams& p);
std::unique_ptr<SchedulerPolicy> make_scheduler_policy(const config::HbmParams& p);

}  // namespace npusim::hw::mem
