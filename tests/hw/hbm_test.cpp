// HBM timing against closed-form expectations (the formulas of hw/mem/hbm.hpp): unloaded latency, row hits and
// misses, streaming within rows, bank-group alternation, the tFAW bound of random traffic, refresh overhead.
#include <gtest/gtest.h>

#include <random>

#include "common/config/loader.hpp"
#include "common/util/error.hpp"
#include "hw/mem/hbm.hpp"

namespace npusim::hw::mem {
namespace {

config::HbmParams hbm(std::vector<std::string> sets = {}) {
  sets.insert(sets.begin(), "hbm.stacks=1");
  sets.insert(sets.begin() + 1, "hbm.address_mapping=ro_ba_ch_co_bg");  // PC-local tests: 4 KiB per PC
  sets.insert(sets.begin() + 2, "hbm.row_hash=false");
  return config::load_config("910b", sets).chip.hbm;
}

// 910b, one stack: 16 PCs; mapping ro_ba_ch_co_bg: bank groups alternate every 32 B burst, a PC holds 4 KiB
// (4 bank groups x 1 KiB rows) before the next PC, then banks, then rows.
constexpr std::uint64_t kPcStride = 4096;
std::uint64_t pc0(std::uint64_t bank, std::uint64_t row, std::uint64_t offset = 0) {
  return ((row * 4 + bank) * 16) * kPcStride + offset;
}

TEST(Hbm, AddressMapInterleavesBankGroupsThenColumnsThenPseudoChannels) {
  const Hbm h(hbm());
  const AddressMap& m = h.address_map();
  EXPECT_EQ(m.decode(0).bg, 0u);
  EXPECT_EQ(m.decode(32).bg, 1u);
  EXPECT_EQ(m.decode(128).col, 1u);
  EXPECT_EQ(m.decode(4096).pc, 1u);
  EXPECT_EQ(m.decode(pc0(3, 7)).bank, 3u);
  EXPECT_EQ(m.decode(pc0(3, 7)).row, 7u);
  EXPECT_EQ(m.decode(pc0(3, 7)).pc, 0u);
  const Hbm fine(hbm({"hbm.address_mapping=ro_ba_co_ch_bg"}));  // the default: next PC every 128 B
  EXPECT_EQ(fine.address_map().decode(128).pc, 1u);
  EXPECT_EQ(fine.address_map().decode(16 * 128).col, 1u);
  const Hbm bad(hbm({"hbm.address_mapping=ro_ch_ba_bg_co"}));
  EXPECT_EQ(bad.address_map().decode(32).bg, 0u);  // columns lowest: one bank group for a whole row
  EXPECT_EQ(bad.address_map().decode(32).col, 1u);
  auto wrong = hbm();
  wrong.address_mapping = "ro_ba_ch_xx_bg";
  EXPECT_THROW(AddressMap{wrong}, InputError);
}

TEST(Hbm, BurstTimeAndPeakFollowThePins) {
  const Hbm h(hbm());
  // 32 B over 64 pins at 3.2 Gb/s: 1.25 ns; 16 PCs x 25.6 GB/s = 409.6 GB/s per stack.
  EXPECT_DOUBLE_EQ(h.burst_ns(), 1.25);
  EXPECT_DOUBLE_EQ(h.peak_bytes_per_ns(), 409.6);
}

TEST(Hbm, IdleBankReadCostsControllerPlusActivatePlusCasPlusBurst) {
  const auto p = hbm({"hbm.refresh=none"});
  Hbm h(p);
  const auto& T = p.timing;
  const auto r = h.access(pc0(0, 0), 32, false, 100.0);
  EXPECT_DOUBLE_EQ(r.done_ns, 100.0 + p.controller_latency + T.tRCD + T.tCL + h.burst_ns());
  // The same row again: a row hit, no activate.
  const auto hit = h.access(pc0(0, 0, 128), 32, false, 1000.0);
  EXPECT_DOUBLE_EQ(hit.done_ns, 1000.0 + p.controller_latency + T.tCL + h.burst_ns());
  // Another row of the same bank: precharge, activate, then the read.
  const auto miss = h.access(pc0(0, 1), 32, false, 2000.0);
  EXPECT_DOUBLE_EQ(miss.done_ns, 2000.0 + p.controller_latency + T.tRP + T.tRCD + T.tCL + h.burst_ns());
  EXPECT_EQ(h.stats().activates, 2u);
  EXPECT_EQ(h.stats().row_hits, 1u);
}

TEST(Hbm, StreamingWithinRowsRunsAtTheBusRate) {
  const auto p = hbm({"hbm.refresh=none"});
  Hbm h(p);
  const auto& T = p.timing;
  // 4 KiB: 128 bursts alternating over 4 bank groups, one activate per group (tRRD apart).
  const auto r = h.access(pc0(0, 0), 4096, false, 0.0);
  EXPECT_DOUBLE_EQ(r.done_ns, p.controller_latency + 3 * T.tRRD_S + T.tRCD + T.tCL + 128 * h.burst_ns());
  // The next 4 KiB of the same rows... is in the next PC; the same PC's next rows are a different bank: the bus
  // stays busy (back to back) once the activates are hidden.
  const auto next = h.access(pc0(1, 0), 4096, false, 0.0);
  EXPECT_DOUBLE_EQ(next.done_ns, r.done_ns + 128 * h.burst_ns());
}

TEST(Hbm, OneBankGroupRunsAtHalfRate) {
  const auto p = hbm({"hbm.refresh=none"});
  Hbm alternating(p);
  auto same_p = p;
  same_p.address_mapping = "ro_ch_ba_bg_co";
  Hbm same(same_p);
  const double a = alternating.access(0, 1024, false, 0).done_ns;  // 32 bursts over 4 bank groups
  const double s = same.access(0, 1024, false, 0).done_ns;         // 32 bursts in one bank group
  const auto& T = p.timing;
  EXPECT_DOUBLE_EQ(a, p.controller_latency + 3 * T.tRRD_S + T.tRCD + T.tCL + 32 * 1.25);
  EXPECT_DOUBLE_EQ(s, p.controller_latency + T.tRCD + T.tCL + 31 * T.tCCD_L + 1.25);
  // The data phases: 32 bursts at the bus rate against 31 tCCD_L gaps, about twice as long.
  EXPECT_NEAR((s - p.controller_latency - T.tRCD - T.tCL) / (32 * 1.25), 2.0, 0.1);
}

TEST(Hbm, RandomSingleBurstReadsAreBoundByTheActivateWindow) {
  // tRRD_L = tRRD_S: the activate window alone (two activates in one bank group are the next test's).
  const auto p = hbm({"hbm.refresh=none", "hbm.timing.tRRD_L=4ns"});
  Hbm h(p);
  std::mt19937_64 rng(1);
  const int n = 2000;
  double end = 0;
  for (int i = 0; i < n; ++i) {
    // PC 0, random bank group, bank and row: every read opens a row.
    const std::uint64_t addr = pc0(rng() % 4, rng() % 1000 + 1) + (rng() % 4) * 32;
    end = std::max(end, h.access(addr, 32, false, 0.0).done_ns);
  }
  // At most 4 activates per tFAW (and one per tRRD): n reads take n / 4 x tFAW. Reaching it needs the scheduler
  // window (hbm.queue_depth and bank_queue_depth) to reorder around reads that wait for their bank's previous row
  // (tRAS + tRP).
  const double bound = n / 4.0 * std::max(p.timing.tFAW, 4 * p.timing.tRRD_S);
  EXPECT_NEAR(end / bound, 1.0, 0.1) << end << " vs " << bound;
  EXPECT_LE(h.stats().row_hits, 5u);  // random rows: a hit is a coincidence
}

TEST(Hbm, AllBankRefreshCostsTrfcEveryTrefi) {
  const auto p = hbm();
  Hbm h(p);
  // Stream 4 MiB through PC 0 only (its 4 KiB pieces), back to back.
  const std::uint64_t pieces = 1024;
  double end = 0;
  for (std::uint64_t i = 0; i < pieces; ++i) end = std::max(end, h.access(pc0(i % 4, i / 4), 4096, false, 0.0).done_ns);
  const double efficiency = pieces * 4096 / end / (h.peak_bytes_per_ns() / 16);
  const double ceiling = 1 - p.timing.tRFC / p.timing.tREFI;
  EXPECT_NEAR(efficiency, ceiling, 0.03) << efficiency;
  EXPECT_LT(efficiency, 1 - 0.5 * p.timing.tRFC / p.timing.tREFI);
  EXPECT_GT(h.stats().refreshes, 0u);
}

TEST(Hbm, ReadsAfterWritesWaitForTheTurnaround) {
  const auto p = hbm({"hbm.refresh=none", "hbm.write_buffer=0"});  // each write served as it comes
  const auto& T = p.timing;
  {
    // A read to another bank group waits tWTR_S after the write data; to the same bank group tWTR_L.
    Hbm h(p);
    const auto w = h.access(pc0(0, 0), 32, true, 0.0);         // bank group 0
    const auto other = h.access(pc0(0, 0, 32), 32, false, 0.0);  // bank group 1 (its row opens meanwhile)
    EXPECT_DOUBLE_EQ(other.done_ns, w.done_ns + T.tWTR_S + T.tCL + 1.25);
  }
  {
    Hbm h(p);
    const auto w = h.access(pc0(0, 0), 32, true, 0.0);
    const auto same = h.access(pc0(0, 0, 128), 32, false, 0.0);  // bank group 0, next column
    EXPECT_DOUBLE_EQ(same.done_ns, w.done_ns + T.tWTR_L + T.tCL + 1.25);
  }
}

TEST(Hbm, ClosedPagePolicyActivatesEveryAccess) {
  Hbm h(hbm({"hbm.refresh=none", "hbm.page_policy=closed"}));
  h.access(pc0(0, 0), 32, false, 0.0);
  h.access(pc0(0, 0, 128), 32, false, 1000.0);
  EXPECT_EQ(h.stats().activates, 2u);
}

}  // namespace
}  // namespace npusim::hw::mem

namespace npusim::hw::mem {
namespace {

// The policies are made by name in one place; a name no policy has (possible from C++, the config refuses it) is
// an error naming the key and the choices.
TEST(HbmPolicies, MadeByNameAndUnknownNamesRefused) {
  config::HbmParams p = config::load_config("910b", {}).chip.hbm;
  EXPECT_FALSE(make_page_policy(p)->precharge_after_run());
  p.page_policy = "closed";
  EXPECT_TRUE(make_page_policy(p)->precharge_after_run());
  p.refresh = "sometimes";
  try {
    make_refresh_policy(p);
    FAIL() << "made a refresh policy called 'sometimes'";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("hbm.refresh: unknown policy 'sometimes' (all_bank, none, per_bank)"),
              std::string::npos)
        << e.what();
  }
  // All-bank refresh: windows [tREFI k, + tRFC) from the offset; a request inside one waits for its end.
  p.refresh = "all_bank";
  const auto r = make_refresh_policy(p);
  const double refi = p.timing.tREFI, rfc = p.timing.tRFC;
  EXPECT_DOUBLE_EQ(r->past_all_bank(refi, refi + 1.0, 10.0), refi + rfc);
  EXPECT_DOUBLE_EQ(r->past_all_bank(refi, refi + rfc + 1.0, 10.0), refi + rfc + 1.0);
  EXPECT_EQ(r->epoch(refi, 0, 32, 2.5 * refi), 2u);
  EXPECT_EQ(r->epoch(refi, 7, 32, 2.5 * refi), 2u);  // every bank's rows close together
  // Per-bank refresh: bank b of n has its windows from offset + b tREFI / n; only its own close its row.
  p.refresh = "per_bank";
  const auto pb = make_refresh_policy(p);
  const double own = refi + 3 * refi / 32;
  EXPECT_EQ(pb->epoch(refi, 3, 32, own - 1.0), 0u);
  EXPECT_EQ(pb->epoch(refi, 3, 32, own), 1u);
  EXPECT_EQ(pb->epoch(refi, 3, 32, own + refi - 1.0), 1u);
  EXPECT_EQ(pb->epoch(refi, 3, 32, own + refi), 2u);
  EXPECT_EQ(pb->epoch(refi, 4, 32, own), 0u);
}

}  // namespace
}  // namespace npusim::hw::mem
