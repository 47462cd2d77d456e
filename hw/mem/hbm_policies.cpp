#include "hw/mem/hbm_policies.hpp"

#include <cmath>
#include <functional>
#include <map>

#include "common/util/error.hpp"

namespace npusim::hw::mem {

double past_windows(double t, double duration, double offset, double period, double busy) {
  if (period <= 0 || busy <= 0) return t;
  if (t < offset) return t + duration > offset ? offset + busy : t;  // before the first window
  const double k = std::floor((t - offset) / period);
  const double start = offset + k * period;
  if (t < start + busy) return start + busy;  // inside the window
  const double next = start + period;
  if (t + duration > next) return next + busy;  // would run into the next one
  return t;
}

namespace {

// The windows [offset + k period, ...), k >= 0, begun at or before t.
std::uint64_t windows_begun(double t, double offset, double period) {
  if (period <= 0 || t < offset) return 0;
  return static_cast<std::uint64_t>(std::floor((t - offset) / period)) + 1;
}

class NoRefresh : public RefreshPolicy {
 public:
  double past_all_bank(double, double t, double) const override { return t; }
  std::uint64_t epoch(double, std::size_t, std::size_t, double) const override { return 0; }
  double past_bank(double, std::size_t, std::size_t, double earliest) const override { return earliest; }
};

// Windows [offset + k tREFI, + tRFC), k >= 0, for the whole pseudo-channel.
class AllBankRefresh : public NoRefresh {
 public:
  explicit AllBankRefresh(const config::HbmTiming& t) : t_(t) {}
  double past_all_bank(double offset, double t, double duration) const override {
    return past_windows(t, duration, offset, t_.tREFI, t_.tRFC);
  }
  std::uint64_t epoch(double offset, std::size_t, std::size_t, double t) const override {
    return windows_begun(t, offset, t_.tREFI);
  }

 private:
  config::HbmTiming t_;
};

// Bank b of n refreshes in [offset + b tREFI / n + k tREFI, + tRFCpb).
class PerBankRefresh : public NoRefresh {
 public:
  explicit PerBankRefresh(const config::HbmTiming& t) : t_(t) {}
  double past_bank(double offset, std::size_t bank, std::size_t banks, double earliest) const override {
    return past_windows(earliest, t_.tRAS + t_.tRP, first(offset, bank, banks), t_.tREFI, t_.tRFCpb);
  }
  std::uint64_t epoch(double offset, std::size_t bank, std::size_t banks, double t) const override {
    return windows_begun(t, first(offset, bank, banks), t_.tREFI);
  }

 private:
  // Bank `bank`'s first window.
  double first(double offset, std::size_t bank, std::size_t banks) const {
    return offset + t_.tREFI / static_cast<double>(banks) * static_cast<double>(bank);
  }
  config::HbmTiming t_;
};

class OpenPage : public PagePolicy {
 public:
  bool precharge_after_run() const override { return false; }
};

class ClosedPage : public PagePolicy {
 public:
  bool precharge_after_run() const override { return true; }
};

class Fcfs : public SchedulerPolicy {
 public:
  bool hit_passes(std::uint64_t) const override { return false; }
};

class FrFcfs : public SchedulerPolicy {
 public:
  explicit FrFcfs(std::uint64_t cap) : cap_(cap) {}
  bool hit_passes(std::uint64_t passed) const override { return passed < cap_; }

 private:
  std::uint64_t cap_;
};

template <class Policy>
std::unique_ptr<Policy> by_name(const std::map<std::string, std::function<std::unique_ptr<Policy>()>>& table,
                                const std::string& key, const std::string& name) {
  const auto it = table.find(name);
  if (it != table.end()) return it->second();
  std::string choices;
  for (const auto& [n, make] : table) choices += (choices.empty() ? "" : ", ") + n;
  throw InputError(key + ": unknown policy '" + name + "' (" + choices + ")");
}

}  // namespace

std::unique_ptr<RefreshPolicy> make_refresh_policy(const config::HbmParams& p) {
  const config::HbmTiming t = p.timing;
  return by_name<RefreshPolicy>({{"all_bank", [t] { return std::make_unique<AllBankRefresh>(t); }},
                                 {"per_bank", [t] { return std::make_unique<PerBankRefresh>(t); }},
                                 {"none", [] { return std::make_unique<NoRefresh>(); }}},
                                "hbm.refresh", p.refresh);
}

std::unique_ptr<PagePolicy> make_page_policy(const config::HbmParams& p) {
  return by_name<PagePolicy>({{"open", [] { return std::make_unique<OpenPage>(); }},
                              {"closed", [] { return std::make_unique<ClosedPage>(); }}},
                             "hbm.page_policy", p.page_policy);
}

std::unique_ptr<SchedulerPolicy> make_scheduler_policy(const config::HbmParams& p) {
  const std::uint64_t cap = p.scheduler_cap;
  return by_name<SchedulerPolicy>(
      {{"fr_fcfs", [cap] { return std::make_unique<FrFcfs>(cap); }}, {"fcfs", [] { return std::make_unique<Fcfs>(); }}},
      "hbm.scheduler", p.scheduler);
}

}  // namespace npusim::hw::mem
