#include "hw/mem/hbm.hpp"

#include <algorithm>
#include <array>
#include <cmath>

namespace npusim::hw::mem {

namespace {
constexpr double kHorizon = 2000.0;  // ns of history kept in the calendars
}  // namespace

void Hbm::register_stats(traces::StatsRegistry& reg, const std::string& prefix) const {
  reg.bind(prefix + ".read_bytes", stats_.read_bytes, "bytes", "bytes read from the HBM devices");
  reg.bind(prefix + ".write_bytes", stats_.write_bytes, "bytes", "bytes written to the HBM devices");
  reg.bind(prefix + ".bursts", stats_.bursts, "count", "bursts on the pseudo-channels' data buses");
  reg.bind(prefix + ".row_hits", stats_.row_hits, "count", "bursts served from a row that was already open");
  reg.bind(prefix + ".read_bursts", stats_.read_bursts, "count", "read bursts");
  reg.bind(prefix + ".read_row_hits", stats_.read_row_hits, "count", "read bursts served from an open row");
  reg.bind(prefix + ".write_bursts", stats_.write_bursts, "count", "write bursts");
  reg.bind(prefix + ".write_row_hits", stats_.write_row_hits, "count", "write bursts served from an open row");
  reg.bind(prefix + ".activates", stats_.activates, "count", "row activations (row misses and conflicts)");
  reg.bind(prefix + ".refreshes", stats_.refreshes, "count", "runs of bursts that a refresh window delayed");
  reg.bind(prefix + ".read_latency", stats_.read_latency, "ns",
           "read requests, from their arrival at the controllers to their last data");
  reg.bind(prefix + ".write_latency", stats_.write_latency, "ns",
           "write requests, from their arrival at the controllers to their last data");
}

Hbm::Hbm(const config::HbmParams& p)
    : p_(p),
      map_(p),
      burst_bytes_(p.burst_bytes),
      // A burst is burst_bytes over a bus of bus_bits pins at pin_rate bit/s each.
      t_burst_(static_cast<double>(p.burst_bytes) * 8.0 / (static_cast<double>(p.bus_bits) * p.pin_rate) * 1e9),
      refresh_(make_refresh_policy(p)),
      page_(make_page_policy(p)),
      scheduler_(make_scheduler_policy(p)),
      reorders_(scheduler_->hit_passes(0)) {
  pcs_.resize(map_.pseudo_channels());
  for (std::size_t i = 0; i < pcs_.size(); ++i) {
    pcs_[i].banks.resize(map_.banks_per_pc());
    pcs_[i].columns.resize(p_.bank_groups);
    pcs_[i].bank_slots.resize(map_.banks_per_pc());
    // All PCs refresh together (one schedule per device), the first time after one interval. Staggering them
    // would spread the loss, but with fine channel interleaving nearly every request would then meet some
    // refreshing PC and wait for it.
    pcs_[i].offset = p_.timing.tREFI;
  }
}

double Hbm::past_refresh(const Pc& pc, double t, double duration) const {
  return refresh_->past_all_bank(pc.offset, t, duration);
}

double Hbm::bus_slot(const Pc& pc, double earliest, double duration, std::uint8_t dir, std::uint64_t groups) const {
  const config::HbmTiming& T = p_.timing;
  // The gap kept between data of direction `first` and later data of direction `second` (shared: they have a bank
  // group in common): tCCD_S beyond a burst in one direction, tRTRS from reads to writes, tWTR + tCL (the read
  // command after the write data, then its latency) from writes to reads.
  const double same = std::max(0.0, T.tCCD_S - t_burst_);
  auto gap = [&](std::uint8_t first, std::uint8_t second, bool shared) {
    if (first == second) return same;
    if (first == 0) return T.tRTRS;
    return (shared ? T.tWTR_L : T.tWTR_S) + T.tCL;
  };
  auto after = [&](const Interval& iv) { return gap(iv.dir, dir, (iv.groups & groups) != 0); };
  auto before = [&](const Interval& iv) { return gap(dir, iv.dir, (iv.groups & groups) != 0); };
  const double reach = std::max({same, T.tRTRS, T.tWTR_L + T.tCL, T.tWTR_S + T.tCL});
  const std::vector<Interval>& busy = pc.bus.busy;
  double s = earliest;
  for (;;) {
    s = past_refresh(pc, s, duration);
    bool clash = false;
    auto it =
        std::lower_bound(busy.begin(), busy.end(), s - reach, [](const Interval& iv, double t) { return iv.end <= t; });
    for (; it != busy.end() && it->start < s + duration + reach; ++it) {
      if (s < it->end + after(*it) && it->start < s + duration + before(*it)) {
        s = it->end + after(*it);
        clash = true;
      }
    }
    if (!clash && past_refresh(pc, s, duration) == s) return s;
  }
}

double Hbm::free_slot(const Calendar& cal, double earliest, double duration) {
  double s = earliest;
  auto it =
      std::lower_bound(cal.busy.begin(), cal.busy.end(), s, [](const Interval& iv, double t) { return iv.end <= t; });
  for (; it != cal.busy.end() && it->start < s + duration; ++it)
    if (it->end > s) s = it->end;
  return s;
}

void Hbm::Calendar::insert(const Interval& iv) {
  auto pos =
      std::lower_bound(busy.begin(), busy.end(), iv.start, [](const Interval& a, double t) { return a.start < t; });
  auto ins = busy.insert(pos, iv);
  // Merge with touching neighbours of the same direction to keep the calendar short.
  if (ins != busy.begin() && std::prev(ins)->dir == ins->dir && std::prev(ins)->end >= ins->start) {
    std::prev(ins)->end = std::max(std::prev(ins)->end, ins->end);
    std::prev(ins)->groups |= ins->groups;
    ins = std::prev(busy.erase(ins));
  }
  if (std::next(ins) != busy.end() && std::next(ins)->dir == ins->dir && std::next(ins)->start <= ins->end) {
    ins->end = std::max(ins->end, std::next(ins)->end);
    ins->groups |= std::next(ins)->groups;
    busy.erase(std::next(ins));
  }
}

void Hbm::Calendar::prune(double before) {
  if (busy.size() < 128) return;
  std::size_t n = 0;
  while (n < busy.size() && busy[n].end < before) ++n;
  busy.erase(busy.begin(), busy.begin() + static_cast<std::ptrdiff_t>(n));
}

double Hbm::take_slot(std::vector<double>& heap, std::uint64_t depth, double t) {
  auto later = std::greater<double>();
  while (!heap.empty() && heap.front() <= t) {
    std::pop_heap(heap.begin(), heap.end(), later);
    heap.pop_back();
  }
  if (heap.size() >= std::max<std::uint64_t>(depth, 1)) {
    t = heap.front();
    std::pop_heap(heap.begin(), heap.end(), later);
    heap.pop_back();
  }
  return t;
}

void Hbm::hold_slot(std::vector<double>& heap, double release) {
  heap.push_back(release);
  std::push_heap(heap.begin(), heap.end(), std::greater<double>());
}

double Hbm::schedule_act(Pc& pc, std::uint32_t bg, std::size_t bank, double earliest) {
  const config::HbmTiming& T = p_.timing;
  const double rrd = std::max(T.tRRD_S, T.tRRD_L), reach = std::max(T.tFAW, rrd);
  auto at_or_after = [](const Act& a, double t) { return a.at < t; };
  double t = earliest;
  std::vector<double>& near = near_;
  for (int guard = 0; guard < 10000; ++guard) {
    // A refresh needs its banks precharged: the row is open tRAS at least and precharged (tRP) before it begins.
    t = refresh_->past_all_bank(pc.offset, t, T.tRAS + T.tRP);
    t = refresh_->past_bank(pc.offset, bank, pc.banks.size(), t);
    const auto lo = std::lower_bound(pc.acts.begin(), pc.acts.end(), t - reach, at_or_after);
    const auto hi = std::upper_bound(lo, pc.acts.end(), t + reach, [](double v, const Act& a) { return v < a.at; });
    double need = t;
    for (auto it = lo; it != hi; ++it) {
      const double gap = it->bg == bg ? T.tRRD_L : T.tRRD_S;
      if (std::abs(it->at - t) < gap) need = std::max(need, it->at + gap);
    }
    if (need == t) {
      // tFAW: at most four activates in any tFAW window, i.e. every five consecutive ones (t among them) span at
      // least tFAW.
      near.clear();
      for (auto it = lo; it != hi; ++it) near.push_back(it->at);
      const auto pos = static_cast<std::ptrdiff_t>(std::lower_bound(near.begin(), near.end(), t) - near.begin());
      near.insert(near.begin() + pos, t);
      for (std::ptrdiff_t i = std::max<std::ptrdiff_t>(0, pos - 4); i <= pos && i + 4 < static_cast<std::ptrdiff_t>(near.size()); ++i) {
        if (near[static_cast<std::size_t>(i + 4)] - near[static_cast<std::size_t>(i)] < T.tFAW) {
          const double first_other = i == pos ? near[static_cast<std::size_t>(i + 1)] : near[static_cast<std::size_t>(i)];
          need = std::max(need, first_other + T.tFAW);
        }
      }
    }
    if (need == t) break;
    t = need;
  }
  pc.acts.insert(std::lower_bound(pc.acts.begin(), pc.acts.end(), t, at_or_after), Act{t, bg});
  if (pc.acts.size() > 256) {
    const double cut = earliest - kHorizon;
    std::size_t n = 0;
    while (n < pc.acts.size() && pc.acts[n].at < cut) ++n;
    pc.acts.erase(pc.acts.begin(), pc.acts.begin() + static_cast<std::ptrdiff_t>(n));
  }
  return t;
}

std::uint64_t Hbm::refresh_epoch(const Pc& pc, std::size_t bank, double t) const {
  return refresh_->epoch(pc.offset, bank, pc.banks.size(), t);
}

Hbm::Served Hbm::serve_run(Pc& pc, std::uint32_t bank, std::uint64_t row, std::uint64_t bg_mask, std::uint32_t first_bg,
                           std::uint32_t n, bool write, double t) {
  const config::HbmTiming& T = p_.timing;
  const auto groups = static_cast<std::uint32_t>(__builtin_popcountll(bg_mask));
  const double interval = std::max({t_burst_, T.tCCD_S, T.tCCD_L / groups});
  const double data_time = (n - 1) * interval + t_burst_;
  const double lat = write ? T.tCWL : T.tCL;
  const std::uint8_t dir = write ? 1 : 0;
  // The bank groups in the order the run's bursts visit them, from the first burst's.
  std::array<std::uint32_t, 64> order{};
  for (std::uint32_t k = 0, j = 0; k < p_.bank_groups; ++k) {
    const std::uint32_t bg = (first_bg + k) % p_.bank_groups;
    if ((bg_mask >> bg) & 1) order[j++] = bg;
  }
  // The j-th of them holds bursts j, j + groups, ...: its column commands span [j, last_j] intervals from the first.
  auto span = [&](std::uint32_t j) {
    const std::uint32_t last = j + (n - 1 - j) / groups * groups;  // the bank group's last burst
    return static_cast<double>(last) * interval;
  };
  // The earliest data start, with the columns ready at `ready`, that the bus and the bank groups' column calendars
  // allow.
  auto place = [&](double ready) {
    double data_start = ready + lat;
    for (bool moved = true; moved;) {
      data_start = bus_slot(pc, data_start, data_time, dir, bg_mask);
      moved = false;
      for (std::uint32_t j = 0; j < groups && j < n && !moved; ++j) {
        const double first = data_start - lat + j * interval;
        const double free = free_slot(pc.columns[order[j]], first, span(j) - j * interval + T.tCCD_L);
        if (free > first) {
          // At least one ulp: rounding must not leave the search where it was.
          data_start = std::max(data_start + (free - first), std::nextafter(data_start, 1e300));
          moved = true;
        }
      }
    }
    return data_start;
  };
  auto index = [&](std::uint32_t bg) -> std::size_t { return bg * p_.banks_per_group + bank; };
  auto bank_of = [&](std::uint32_t bg) -> Bank& { return pc.banks[index(bg)]; };
  auto epoch = [&](std::uint32_t bg, double at) { return refresh_epoch(pc, index(bg), at); };

  // FR-FCFS: a run to the row its banks had open before their last activate (for an older request that closes it)
  // is served from that row when it fits before that request's precharge: its last column command tRTP (its write
  // data tWR) before it, that precharge done (tRP) before a refresh of the bank begins, and no more than
  // hbm.scheduler_cap such hits.
  double data_start = 0;
  bool old_row = reorders_;
  double ready = t;
  for (std::uint32_t bg = 0; bg < p_.bank_groups && old_row; ++bg) {
    if (!((bg_mask >> bg) & 1)) continue;
    const Bank& b = bank_of(bg);
    const bool current = b.open && b.row == row && b.epoch == epoch(bg, std::max(t, b.col_ready));
    old_row = !current && b.old_row == row && t < b.old_until && scheduler_->hit_passes(b.old_passed);
    ready = std::max(ready, b.old_col_ready);
  }
  if (old_row) {
    data_start = place(ready);
    const double last_cmd = data_start - lat + (n - 1) * interval;
    const double data_end = data_start + data_time;
    const double ends = write ? data_end + T.tWR : last_cmd + T.tRTP;
    for (std::uint32_t bg = 0; bg < p_.bank_groups && old_row; ++bg) {
      if (!((bg_mask >> bg) & 1)) continue;
      const Bank& b = bank_of(bg);
      old_row = ends <= b.old_until && epoch(bg, std::max(ends + T.tRP, data_end)) == b.old_epoch;
    }
  }
  std::uint32_t acts = 0;
  if (!old_row) {
    ready = t;
    for (std::uint32_t bg = 0; bg < p_.bank_groups; ++bg) {
      if (!((bg_mask >> bg) & 1)) continue;
      Bank& b = bank_of(bg);
      // A refresh (the PC's all-bank one or the bank's own) since the row was activated closed it. The run's column
      // commands are taken to start by max(t, col_ready), the earliest they can.
      if (b.open && b.epoch != epoch(bg, std::max(t, b.col_ready))) b.open = false;
      if (!(b.open && b.row == row)) {
        double earliest = std::max(t, b.pre_done);
        if (b.open) {
          const double pre = std::max({t, b.act + T.tRAS, b.last_read + T.tRTP, b.write_end + T.tWR});
          earliest = std::max(earliest, pre + T.tRP);
        }
        const double act = schedule_act(pc, bg, index(bg), earliest);
        // The row it closes stays usable for younger hits until the precharge (FR-FCFS).
        b.old_until = b.open ? act - T.tRP : -1e18;
        b.old_row = b.row;
        b.old_col_ready = b.col_ready;
        b.old_epoch = b.epoch;
        b.old_passed = 0;
        b.act = act;
        b.open = true;
        b.row = row;
        b.col_ready = act + T.tRCD;
        b.epoch = epoch(bg, act);
        ++acts;
      }
      ready = std::max(ready, b.col_ready);
    }
    data_start = place(ready);
  }
  if (past_refresh(pc, ready + lat, data_time) != ready + lat) ++stats_.refreshes;
  const double c0 = data_start - lat;
  for (std::uint32_t j = 0; j < groups && j < n; ++j) {
    const double first = c0 + j * interval;
    pc.columns[order[j]].insert({first, c0 + span(j) + T.tCCD_L, dir, 1ULL << order[j]});
    pc.columns[order[j]].prune(t - kHorizon);
  }
  const double data_end = data_start + data_time;
  pc.bus.insert({data_start, data_end, dir, bg_mask});
  pc.bus.prune(t - kHorizon);
  const double last_cmd = c0 + (n - 1) * interval;
  for (std::uint32_t bg = 0; bg < p_.bank_groups; ++bg) {
    if (!((bg_mask >> bg) & 1)) continue;
    Bank& b = bank_of(bg);
    // A hit in the old row ends before the open row's activate: the times below, kept as maxima, stay the open
    // row's.
    if (write) b.write_end = std::max(b.write_end, data_end);
    else b.last_read = std::max(b.last_read, last_cmd);
    if (old_row) {
      ++b.old_passed;
      continue;
    }
    // b.epoch stays the activate's: a refresh that began while this run waited for the bus closes the row for the
    // next run (restamping it here kept rows open across refreshes).
    if (page_->precharge_after_run()) {
      const double pre = std::max({b.act + T.tRAS, b.last_read + T.tRTP, b.write_end + T.tWR});
      b.pre_done = pre + T.tRP;
      b.open = false;
    }
  }
  double done = data_end;
  if (link_rate_ > 0) {
    // A calendar, not a next-free time: a hit served before an older request (FR-FCFS) crosses the link first.
    const double transfer = static_cast<double>(n * burst_bytes_) / link_rate_;
    const double start = free_slot(pc.link, data_start, transfer);
    pc.link.insert({start, start + transfer, 0, 0});
    pc.link.prune(t - kHorizon);
    done = std::max(done, start + transfer);
  }
  const std::uint64_t hits = n - std::min<std::uint64_t>(n, acts);
  stats_.bursts += n;
  stats_.activates += acts;
  stats_.row_hits += hits;
  (write ? stats_.write_bursts : stats_.read_bursts) += n;
  (write ? stats_.write_row_hits : stats_.read_row_hits) += hits;
  return {done, last_cmd};
}

Hbm::Served Hbm::serve(Pc& pc, std::uint32_t bank, std::uint64_t row, std::uint64_t bg_mask, std::uint32_t first_bg,
                       std::uint32_t n, bool write, double t) {
  if (n > static_cast<std::uint32_t>(__builtin_popcountll(bg_mask)))
    return serve_run(pc, bank, row, bg_mask, first_bg, n, write, t);
  // One burst per bank group: independent column accesses, each bank group on its own (a busy bank does not hold
  // up the others, as it would not on the command bus).
  Served s{0, 0};
  for (std::uint32_t bg = 0; bg < p_.bank_groups; ++bg) {
    if (!((bg_mask >> bg) & 1)) continue;
    const Served one = serve_run(pc, bank, row, 1ULL << bg, bg, 1, write, t);
    s = {std::max(s.done, one.done), std::max(s.released, one.released)};
  }
  return s;
}

Hbm::Result Hbm::access(std::uint64_t addr, std::uint64_t bytes, bool write, double t_ns) {
  (write ? stats_.write_bytes : stats_.read_bytes) += bytes;
  Result r{t_ns, t_ns};
  if (bytes == 0) return r;
  const std::uint64_t first = addr / burst_bytes_ * burst_bytes_;
  const std::uint64_t last = (addr + bytes - 1) / burst_bytes_ * burst_bytes_;
  // Walk the bursts, serving each maximal run with the same PC, bank and row as one batch.
  DramAddress run{};
  std::uint64_t mask = 0;
  std::uint32_t n = 0;
  double accepted = t_ns;
  const bool posted = write && p_.write_buffer > 0;
  const std::uint64_t request = next_request_++;
  touched_.clear();
  auto flush = [&] {
    if (!n) return;
    Pc& pc = pcs_[run.pc];
    if (posted) {
      pc.writes.push_back({run.bank, run.row, mask, run.bg, n, t_ns, request});
      auto& pending = pending_writes_[request];
      if (pending.runs++ == 0) pending = {t_ns, 1, t_ns};
      if (std::find(touched_.begin(), touched_.end(), run.pc) == touched_.end()) touched_.push_back(run.pc);
      n = 0;
      mask = 0;
      return;
    }
    // Writes that waited for the reads to finish went when they had (the last read's command).
    if (!pc.writes.empty() && pc.reads_until <= t_ns) drain(pc, pc.reads_until, 0);
    // A slot in the PC's transaction queue and in the command queue of each bank the run uses.
    double enter = take_slot(pc.slots, p_.queue_depth, t_ns);
    for (std::uint32_t bg = 0; bg < p_.bank_groups; ++bg)
      if ((mask >> bg) & 1)
        enter = take_slot(pc.bank_slots[bg * p_.banks_per_group + run.bank], p_.bank_queue_depth, enter);
    accepted = std::max(accepted, enter);
    const Served s = serve(pc, run.bank, run.row, mask, run.bg, n, write, enter + p_.controller_latency);
    hold_slot(pc.slots, s.released);
    if (!write) pc.reads_until = std::max(pc.reads_until, s.released);
    for (std::uint32_t bg = 0; bg < p_.bank_groups; ++bg)
      if ((mask >> bg) & 1) hold_slot(pc.bank_slots[bg * p_.banks_per_group + run.bank], s.released);
    r.done_ns = std::max(r.done_ns, s.done);
    n = 0;
    mask = 0;
  };
  // Block by block: the bursts of one aligned block share PC, bank and row; only their bank groups differ.
  const std::uint64_t block = map_.block_bursts() * burst_bytes_;
  for (std::uint64_t a = first; a <= last;) {
    const std::uint64_t block_end = std::min(last + burst_bytes_, (a / block + 1) * block);
    const DramAddress d = map_.decode(a);
    if (n && (d.pc != run.pc || d.bank != run.bank || d.row != run.row)) flush();
    if (!n) run = d;
    const std::uint64_t count = (block_end - a) / burst_bytes_;
    using BG = AddressMap::BlockGroups;
    if (map_.block_groups() == BG::kOne) {
      mask |= 1ULL << d.bg;
    } else if (map_.block_groups() == BG::kRoundRobin && count >= p_.bank_groups) {
      mask |= (p_.bank_groups >= 64 ? ~0ULL : ((1ULL << p_.bank_groups) - 1));
    } else {
      for (std::uint64_t b = a; b < block_end; b += burst_bytes_) mask |= 1ULL << map_.decode(b).bg;
    }
    n += static_cast<std::uint32_t>(count);
    a = block_end;
  }
  flush();
  // Posted: each PC the write went to drains when no read waits there, or down to write_low when the buffer is at
  // write_high.
  for (const std::uint32_t i : touched_) {
    Pc& pc = pcs_[i];
    if (pc.reads_until <= t_ns) {
      drain(pc, pc.reads_until, 0);  // each from when the reads were done, or its arrival if later
    } else if (static_cast<double>(pc.writes.size()) >= p_.write_high * static_cast<double>(p_.write_buffer)) {
      drain(pc, t_ns, static_cast<std::size_t>(p_.write_low * static_cast<double>(p_.write_buffer)));
    }
  }
  r.accepted_ns = accepted;
  if (!posted) (write ? stats_.write_latency : stats_.read_latency).sample(r.done_ns - t_ns);
  return r;
}

double Hbm::drain(Pc& pc, double at, std::size_t keep) {
  double last = 0;
  std::size_t k = 0;
  for (; pc.writes.size() - k > keep; ++k) {
    const WriteRun& w = pc.writes[k];
    const double enter = std::max(at, w.arrival);
    const Served s = serve(pc, w.bank, w.row, w.mask, w.first_bg, w.n, true, enter + p_.controller_latency);
    last = std::max(last, s.done);
    const auto it = pending_writes_.find(w.request);
    it->second.done = std::max(it->second.done, s.done);
    if (--it->second.runs == 0) {
      stats_.write_latency.sample(it->second.done - it->second.arrival);
      pending_writes_.erase(it);
    }
  }
  pc.writes.erase(pc.writes.begin(), pc.writes.begin() + static_cast<std::ptrdiff_t>(k));
  return last;
}

double Hbm::drain_writes() {
  double last = 0;
  for (Pc& pc : pcs_)
    if (!pc.writes.empty()) last = std::max(last, drain(pc, pc.reads_until, 0));
  return last;
}

}  // namespace npusim::hw::mem
