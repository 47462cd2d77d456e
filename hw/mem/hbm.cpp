#include "hw/mem/hbm.hpp"

#include <algorithm>
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
  reg.bind(prefix + ".activates", stats_.activates, "count", "row activations (row misses and conflicts)");
  reg.bind(prefix + ".refreshes", stats_.refreshes, "count", "runs of bursts that a refresh window delayed");
}

Hbm::Hbm(const config::HbmParams& p)
    : p_(p),
      map_(p),
      burst_bytes_(p.burst_bytes),
      // A burst is burst_bytes over a bus of bus_bits pins at pin_rate bit/s each.
      t_burst_(static_cast<double>(p.burst_bytes) * 8.0 / (static_cast<double>(p.bus_bits) * p.pin_rate) * 1e9),
      refresh_(make_refresh_policy(p)),
      page_(make_page_policy(p)) {
  pcs_.resize(map_.pseudo_channels());
  for (std::size_t i = 0; i < pcs_.size(); ++i) {
    pcs_[i].banks.resize(map_.banks_per_pc());
    pcs_[i].bg_write_end.assign(p_.bank_groups, -1e18);
    // All PCs refresh together (one schedule per device), the first time after one interval. Staggering them
    // would spread the loss, but with fine channel interleaving nearly every request would then meet some
    // refreshing PC and wait for it.
    pcs_[i].offset = p_.timing.tREFI;
  }
}

double Hbm::past_refresh(const Pc& pc, double t, double duration) const {
  return refresh_->past_all_bank(pc.offset, t, duration);
}

double Hbm::Calendar::reserve(double earliest, double duration, const Hbm& h, const Pc& pc) {
  double s = earliest;
  for (;;) {
    const double moved = h.past_refresh(pc, s, duration);
    bool clash = false;
    auto it = std::lower_bound(busy.begin(), busy.end(), std::make_pair(moved, moved),
                               [](const auto& a, const auto& b) { return a.second <= b.first; });
    s = moved;
    for (; it != busy.end() && it->first < s + duration; ++it) {
      if (it->second > s) {
        s = it->second;
        clash = true;
      }
    }
    if (!clash && moved == s) break;
  }
  const auto pos = std::lower_bound(busy.begin(), busy.end(), std::make_pair(s, s + duration));
  // Merge with touching neighbours to keep the calendar short.
  auto ins = busy.insert(pos, {s, s + duration});
  if (ins != busy.begin() && std::prev(ins)->second >= ins->first) {
    std::prev(ins)->second = std::max(std::prev(ins)->second, ins->second);
    ins = std::prev(busy.erase(ins));
  }
  if (std::next(ins) != busy.end() && std::next(ins)->first <= ins->second) {
    ins->second = std::max(ins->second, std::next(ins)->second);
    busy.erase(std::next(ins));
  }
  return s;
}

void Hbm::Calendar::prune(double before) {
  if (busy.size() < 128) return;
  std::size_t n = 0;
  while (n < busy.size() && busy[n].second < before) ++n;
  busy.erase(busy.begin(), busy.begin() + static_cast<std::ptrdiff_t>(n));
}

double Hbm::schedule_act(Pc& pc, double earliest) {
  const config::HbmTiming& T = p_.timing;
  double t = earliest;
  std::vector<double>& near = near_;
  for (int guard = 0; guard < 10000; ++guard) {
    t = refresh_->past_all_bank(pc.offset, t, 0);
    const auto lo = std::lower_bound(pc.acts.begin(), pc.acts.end(), t - std::max(T.tFAW, T.tRRD));
    const auto hi = std::upper_bound(lo, pc.acts.end(), t + std::max(T.tFAW, T.tRRD));
    double need = t;
    for (auto it = lo; it != hi; ++it)
      if (std::abs(*it - t) < T.tRRD) need = std::max(need, *it + T.tRRD);
    if (need == t) {
      // tFAW: at most four activates in any tFAW window, i.e. every five consecutive ones (t among them) span at
      // least tFAW.
      near.assign(lo, hi);
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
  pc.acts.insert(std::lower_bound(pc.acts.begin(), pc.acts.end(), t), t);
  if (pc.acts.size() > 256) {
    const double cut = earliest - kHorizon;
    std::size_t n = 0;
    while (n < pc.acts.size() && pc.acts[n] < cut) ++n;
    pc.acts.erase(pc.acts.begin(), pc.acts.begin() + static_cast<std::ptrdiff_t>(n));
  }
  return t;
}

std::uint64_t Hbm::refresh_epoch(const Pc& pc, double t) const {
  return refresh_->epoch(pc.offset, t);
}

double Hbm::serve_run(Pc& pc, std::uint32_t bank, std::uint64_t row, std::uint64_t bg_mask, std::uint32_t n,
                      bool write, double t) {
  const config::HbmTiming& T = p_.timing;
  const int groups = __builtin_popcountll(bg_mask);
  const double interval = std::max(t_burst_, T.tCCD_L / groups);
  const double data_time = (n - 1) * interval + t_burst_;
  double ready = t;
  std::uint32_t acts = 0;
  for (std::uint32_t bg = 0; bg < p_.bank_groups; ++bg) {
    if (!((bg_mask >> bg) & 1)) continue;
    Bank& b = pc.banks[bg * p_.banks_per_group + bank];
    // An all-bank refresh since the row was opened closed it.
    if (b.open && b.epoch != refresh_epoch(pc, std::max(t, b.col_ready))) b.open = false;
    if (!(b.open && b.row == row)) {
      double earliest = std::max(t, b.pre_done);
      if (b.open) {
        const double pre = std::max({t, b.act + T.tRAS, b.last_read + T.tRTP, b.write_end + T.tWR});
        earliest = std::max(earliest, pre + T.tRP);
      }
      earliest = refresh_->past_bank(pc.offset, bg * p_.banks_per_group + bank, pc.banks.size(), earliest);
      const double act = schedule_act(pc, earliest);
      b.act = act;
      b.open = true;
      b.row = row;
      b.col_ready = act + T.tRCD;
      b.epoch = refresh_epoch(pc, b.col_ready);
      ++acts;
    }
    ready = std::max(ready, b.col_ready);
  }
  double c0 = ready;
  if (!write) {
    c0 = std::max(c0, pc.write_end + T.tWTR_S);
    for (std::uint32_t bg = 0; bg < p_.bank_groups; ++bg)
      if ((bg_mask >> bg) & 1) c0 = std::max(c0, pc.bg_write_end[bg] + T.tWTR_L);
  }
  const double lat = write ? T.tCWL : T.tCL;
  const double before = past_refresh(pc, c0 + lat, data_time);
  const double data_start = pc.bus.reserve(c0 + lat, data_time, *this, pc);
  if (before != c0 + lat) ++stats_.refreshes;
  const double data_end = data_start + data_time;
  pc.bus.prune(t - kHorizon);
  const double last_cmd = data_start - lat + (n - 1) * interval;
  for (std::uint32_t bg = 0; bg < p_.bank_groups; ++bg) {
    if (!((bg_mask >> bg) & 1)) continue;
    Bank& b = pc.banks[bg * p_.banks_per_group + bank];
    if (write) b.write_end = std::max(b.write_end, data_end);
    else b.last_read = std::max(b.last_read, last_cmd);
    b.epoch = refresh_epoch(pc, data_start);
    if (page_->precharge_after_run()) {
      const double pre = std::max({b.act + T.tRAS, b.last_read + T.tRTP, b.write_end + T.tWR});
      b.pre_done = pre + T.tRP;
      b.open = false;
    }
  }
  if (write) {
    pc.write_end = std::max(pc.write_end, data_end);
    for (std::uint32_t bg = 0; bg < p_.bank_groups; ++bg)
      if ((bg_mask >> bg) & 1) pc.bg_write_end[bg] = std::max(pc.bg_write_end[bg], data_end);
  }
  double done = data_end;
  if (link_rate_ > 0) {
    pc.link_free = std::max(pc.link_free, data_start) + static_cast<double>(n * burst_bytes_) / link_rate_;
    done = std::max(done, pc.link_free);
  }
  stats_.bursts += n;
  stats_.activates += acts;
  stats_.row_hits += n - std::min<std::uint64_t>(n, acts);
  return done;
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
  auto flush = [&] {
    if (!n) return;
    Pc& pc = pcs_[run.pc];
    // The PC's scheduler holds queue_depth requests: a run enters when one of those is done.
    while (!pc.inflight.empty() && pc.inflight.top() <= t_ns) pc.inflight.pop();
    double enter = t_ns;
    if (pc.inflight.size() >= std::max<std::uint64_t>(p_.queue_depth, 1)) {
      enter = pc.inflight.top();
      pc.inflight.pop();
    }
    accepted = std::max(accepted, enter);
    double done = 0;
    if (n <= static_cast<std::uint32_t>(__builtin_popcountll(mask))) {
      // One burst per bank group: independent column accesses, each bank group on its own (a busy bank does not
      // hold up the others, as it would not on the command bus).
      for (std::uint32_t bg = 0; bg < p_.bank_groups; ++bg)
        if ((mask >> bg) & 1)
          done = std::max(done, serve_run(pc, run.bank, run.row, 1ULL << bg, 1, write, enter + p_.controller_latency));
    } else {
      done = serve_run(pc, run.bank, run.row, mask, n, write, enter + p_.controller_latency);
    }
    pc.inflight.push(done);
    r.done_ns = std::max(r.done_ns, done);
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
  r.accepted_ns = accepted;
  return r;
}

}  // namespace npusim::hw::mem
