// The HBM controller's rules between requests, each against a closed form with two requests or a fixed pattern
// (the formulas of hw/mem/hbm.hpp and docs/memory.md): queue slots released at command issue, tRRD_S / tRRD_L,
// tCCD_L between requests in a bank group, the read-to-write and write-to-read turnarounds, the refresh ceiling of
// a sequential stream at the default queue depths, and the latency statistics.
#include <gtest/gtest.h>

#include "common/config/loader.hpp"
#include "hw/mem/hbm.hpp"

namespace npusim::hw::mem {
namespace {

config::HbmParams hbm(std::vector<std::string> sets = {}) {
  sets.insert(sets.begin(), "hbm.stacks=1");
  sets.insert(sets.begin() + 1, "hbm.address_mapping=ro_ba_ch_co_bg");  // PC-local: 4 KiB per PC, bg every 32 B
  sets.insert(sets.begin() + 2, "hbm.row_hash=false");
  return config::load_config("910b", sets).chip.hbm;
}

// 910b, one stack, ro_ba_ch_co_bg: bank groups alternate every 32 B burst, 4 KiB of PC 0, then the other 15 PCs,
// then the next bank, then rows. Offset 32 k is bank group k % 4.
std::uint64_t pc0(std::uint64_t bank, std::uint64_t row, std::uint64_t offset = 0) {
  return ((row * 4 + bank) * 16) * 4096 + offset;
}

// Opens the rows of PC 0's four bank groups in both, then sends `pairs` read-write pairs to `mix` and as many reads
// to `reads`, all at 1000 ns, to open rows over the bank groups in turn; the last data done of each.
constexpr int kPairs = 50;
struct Alternation {
  double mix_end = 0, reads_end = 0;
};
Alternation alternate(Hbm& mix, Hbm& reads, int pairs) {
  for (int g = 0; g < 4; ++g) {
    mix.access(pc0(0, 0, 32 * g), 32, false, 0.0);
    reads.access(pc0(0, 0, 32 * g), 32, false, 0.0);
  }
  Alternation a;
  for (int i = 0; i < 2 * pairs; ++i) {
    const std::uint64_t at = pc0(0, 0, 32 * (i % 4) + 128 * (1 + i / 4));
    a.mix_end = std::max(a.mix_end, mix.access(at, 32, i % 2 == 1, 1000.0).done_ns);
    a.reads_end = std::max(a.reads_end, reads.access(at, 32, false, 1000.0).done_ns);
  }
  return a;
}

// FR-FCFS (hbm.scheduler): a row hit that arrives after a request that must close the row (same bank, another row)
// is served first, from the open row, while that request waits for its precharge (tRAS after the row's activate);
// under FCFS it waits for the other row to open and close again. Three reads to PC 0, bank 0, bank group 0: row 0
// at 0 ns (opens it), row 1 at 1 ns (a conflict), row 0 again at 2 ns (a hit in the old row).
TEST(HbmController, ALateRowHitPassesAnEarlierRowMissUnderFrFcfsNotFcfs) {
  const auto p = hbm({"hbm.refresh=none"});
  const auto& T = p.timing;
  const double ctrl = p.controller_latency;
  const double burst = Hbm(p).burst_ns();
  // The conflict: precharge at the first activate (ctrl) + tRAS, then tRP + tRCD + tCL + burst.
  const double miss_done = ctrl + T.tRAS + T.tRP + T.tRCD + T.tCL + burst;
  ASSERT_LT(T.tRCD + T.tCCD_L + T.tRTP, T.tRAS);  // the hit's read-to-precharge does not delay the miss
  {
    Hbm h(hbm({"hbm.refresh=none", "hbm.scheduler=fr_fcfs"}));
    h.access(pc0(0, 0), 32, false, 0.0);
    const auto miss = h.access(pc0(0, 1), 32, false, 1.0);
    const auto hit = h.access(pc0(0, 0, 128), 32, false, 2.0);
    EXPECT_DOUBLE_EQ(miss.done_ns, miss_done);
    // The hit's column command tCCD_L after the first read's (ctrl + tRCD), from the open row.
    EXPECT_DOUBLE_EQ(hit.done_ns, ctrl + T.tRCD + T.tCCD_L + T.tCL + burst);
    EXPECT_LT(hit.done_ns, miss.done_ns);
    h.drain_writes();
    EXPECT_EQ(h.stats().activates, 2u);  // row 0 once, row 1 once
    EXPECT_EQ(h.stats().read_row_hits, 1u);
    EXPECT_DOUBLE_EQ(h.stats().read_latency.max(), miss_done - 1.0);  // the miss was served when it was told
  }
  {
    Hbm h(hbm({"hbm.refresh=none", "hbm.scheduler=fcfs"}));
    h.access(pc0(0, 0), 32, false, 0.0);
    const auto miss = h.access(pc0(0, 1), 32, false, 1.0);
    const auto hit = h.access(pc0(0, 0, 128), 32, false, 2.0);
    EXPECT_DOUBLE_EQ(miss.done_ns, miss_done);
    // Row 1 opens at ctrl + tRAS + tRP; row 0 again tRAS + tRP after that.
    EXPECT_DOUBLE_EQ(hit.done_ns, ctrl + 2 * (T.tRAS + T.tRP) + T.tRCD + T.tCL + burst);
    EXPECT_GT(hit.done_ns, miss.done_ns);
    h.drain_writes();
    EXPECT_EQ(h.stats().activates, 3u);
  }
}

// The starvation cap: with hbm.scheduler_cap=1 one younger hit passes the waiting miss and the next is served after
// it (a conflict with the row the miss opened); a hit that arrives after the miss's precharge issued passes nothing.
TEST(HbmController, FrFcfsStopsPassingAtTheCapAndAfterThePrecharge) {
  const auto p = hbm({"hbm.refresh=none", "hbm.scheduler_cap=1"});
  const auto& T = p.timing;
  const double ctrl = p.controller_latency;
  Hbm h(p);
  const double burst = h.burst_ns();
  h.access(pc0(0, 0), 32, false, 0.0);
  const auto miss = h.access(pc0(0, 1), 32, false, 1.0);
  const auto first = h.access(pc0(0, 0, 128), 32, false, 2.0);
  const auto second = h.access(pc0(0, 0, 256), 32, false, 3.0);
  EXPECT_LT(first.done_ns, miss.done_ns);
  // Row 1 activated at ctrl + tRAS + tRP; row 0 again after its tRAS and a tRP.
  const double act1 = ctrl + T.tRAS + T.tRP;
  EXPECT_DOUBLE_EQ(second.done_ns, act1 + T.tRAS + T.tRP + T.tRCD + T.tCL + burst);

  Hbm late(hbm({"hbm.refresh=none"}));
  late.access(pc0(0, 0), 32, false, 0.0);
  late.access(pc0(0, 1), 32, false, 1.0);  // precharges at ctrl + tRAS
  const double at = T.tRAS;                // the hit starts at ctrl + tRAS: the precharge has issued
  const auto hit = late.access(pc0(0, 0, 128), 32, false, at);
  EXPECT_DOUBLE_EQ(hit.done_ns, act1 + T.tRAS + T.tRP + T.tRCD + T.tCL + burst);
}

// The link to the L2 is a calendar too: a hit that passes an older request crosses it first, and its time is its
// own data start plus the transfer (a next-free time would put it behind the request it passed). The first test's
// three reads with a link at half the bus rate (32 B in two bursts' time).
TEST(HbmController, APassingHitCrossesTheLinkBeforeTheRequestItPassed) {
  const auto p = hbm({"hbm.refresh=none"});
  const auto& T = p.timing;
  const double ctrl = p.controller_latency;
  Hbm h(p);
  const double burst = h.burst_ns();
  h.set_link_rate(32.0 / (2 * burst));
  h.access(pc0(0, 0), 32, false, 0.0);
  const auto miss = h.access(pc0(0, 1), 32, false, 1.0);
  const auto hit = h.access(pc0(0, 0, 128), 32, false, 2.0);
  // The first read's transfer starts at its data, ctrl + tRCD + tCL; the hit's at its own, tCCD_L later, or after it.
  const double first_data = ctrl + T.tRCD + T.tCL;
  EXPECT_DOUBLE_EQ(hit.done_ns, std::max(first_data + T.tCCD_L, first_data + 2 * burst) + 2 * burst);
  EXPECT_LT(hit.done_ns, miss.done_ns);
  EXPECT_DOUBLE_EQ(miss.done_ns, ctrl + T.tRAS + T.tRP + T.tRCD + T.tCL + 2 * burst);
}

// A refresh closes the rows it finds open, also a row whose last hit issued before the refresh and whose data
// landed after it began: the next read pays the activate again (no precharge: the refresh left the bank closed).
// all_bank: PC 0 refreshes in [tREFI, + tRFC) (the hit's data waits for its end); per_bank: PC 0's bank 0 of bank
// group 0 in [tREFI, + tRFCpb) (the hit's data is not held up).
TEST(HbmController, ARefreshClosesTheRowsItFindsOpen) {
  for (const char* refresh : {"all_bank", "per_bank"}) {
    const auto p = hbm({std::string("hbm.refresh=") + refresh});
    const auto& T = p.timing;
    const double ctrl = p.controller_latency;
    const bool all = std::string(refresh) == "all_bank";
    Hbm h(p);
    const double burst = h.burst_ns();
    const double window = T.tREFI;
    h.access(pc0(0, 0), 32, false, 0.0);
    // A hit whose column command is tCL / 2 before the window: its data would start tCL / 2 into it.
    const double hit_at = window - ctrl - T.tCL / 2;
    const double hit_done = all ? window + T.tRFC + burst : hit_at + ctrl + T.tCL + burst;
    EXPECT_DOUBLE_EQ(h.access(pc0(0, 0, 128), 32, false, hit_at).done_ns, hit_done) << refresh;
    const double after = window + T.tRFC + 100.0;
    EXPECT_DOUBLE_EQ(h.access(pc0(0, 0, 256), 32, false, after).done_ns, after + ctrl + T.tRCD + T.tCL + burst)
        << refresh;
    EXPECT_EQ(h.stats().activates, 2u) << refresh;
  }
}

// A refresh needs its banks precharged, so no activate comes within tRAS + tRP before one: a read to an idle bank whose
// activate would fall there waits for the refresh's end (and its row is then open after it); one whose activate
// leaves tRAS + tRP does not wait. Bank 0 of PC 0 refreshes from tREFI under both modes.
TEST(HbmController, NoActivateWithinTrasTrpOfARefresh) {
  for (const char* refresh : {"all_bank", "per_bank"}) {
    const auto p = hbm({std::string("hbm.refresh=") + refresh});
    const auto& T = p.timing;
    const double ctrl = p.controller_latency;
    const double window = T.tREFI, busy = std::string(refresh) == "all_bank" ? T.tRFC : T.tRFCpb;
    const double before = window - (T.tRAS + T.tRP) - 1.0;  // the activate time of the first case
    {
      Hbm h(p);
      const double burst = h.burst_ns();
      EXPECT_DOUBLE_EQ(h.access(pc0(0, 0), 32, false, before - ctrl).done_ns, before + T.tRCD + T.tCL + burst)
          << refresh;
    }
    Hbm h(p);
    const double burst = h.burst_ns();
    const double late = window - 10.0;
    EXPECT_DOUBLE_EQ(h.access(pc0(0, 0), 32, false, late - ctrl).done_ns, window + busy + T.tRCD + T.tCL + burst)
        << refresh;
    const double next = window + busy + 500.0;
    EXPECT_DOUBLE_EQ(h.access(pc0(0, 0, 128), 32, false, next).done_ns, next + ctrl + T.tCL + burst) << refresh;
    EXPECT_EQ(h.stats().activates, 1u) << refresh;
  }
}

// FR-FCFS does not serve a hit from the row being closed once the bank's own refresh has begun: the row closed for
// it. Row 0 open; a conflict (row 1) whose activate would overlap bank 0's refresh window [tREFI, + tRFCpb) waits
// for its end; a row-0 hit that arrives in the window is a conflict with row 1 under both schedulers.
TEST(HbmController, FrFcfsServesNoHitFromARowItsBankRefreshClosed) {
  for (const char* scheduler : {"fr_fcfs", "fcfs"}) {
    const auto p = hbm({"hbm.refresh=per_bank", std::string("hbm.scheduler=") + scheduler});
    const auto& T = p.timing;
    const double ctrl = p.controller_latency;
    Hbm h(p);
    const double burst = h.burst_ns();
    const double window = T.tREFI;
    h.access(pc0(0, 0), 32, false, 0.0);
    // Its activate would come at tREFI - tRAS / 2, within tRAS of the window.
    const auto conflict = h.access(pc0(0, 1), 32, false, window - ctrl - T.tRP - T.tRAS / 2);
    const double act1 = window + T.tRFCpb;
    EXPECT_DOUBLE_EQ(conflict.done_ns, act1 + T.tRCD + T.tCL + burst) << scheduler;
    const auto hit = h.access(pc0(0, 0, 128), 32, false, window - ctrl + 10.0);
    EXPECT_DOUBLE_EQ(hit.done_ns, act1 + T.tRAS + T.tRP + T.tRCD + T.tCL + burst) << scheduler;
  }
}

// The bank must be able to close the old row after a passing hit before its refresh begins: a hit whose read
// command is tRTP + tRP + 1 ns before bank 0's window passes (its data and the precharge after it end before the
// window); one whose command is tRTP + tRP - 1 ns before it has its data before the window but not that precharge,
// and waits for the other row. The conflict of the test above.
TEST(HbmController, APassingHitLeavesTimeToPrechargeBeforeTheRefresh) {
  const auto p = hbm({"hbm.refresh=per_bank"});
  const auto& T = p.timing;
  const double ctrl = p.controller_latency;
  const double window = T.tREFI;
  const double act1 = window + T.tRFCpb;
  for (const double margin : {1.0, -1.0}) {
    Hbm h(p);
    const double burst = h.burst_ns();
    ASSERT_LT(T.tCL + burst, T.tRTP + T.tRP - 1.0);  // the later hit's data still ends before the window
    h.access(pc0(0, 0), 32, false, 0.0);
    h.access(pc0(0, 1), 32, false, window - ctrl - T.tRP - T.tRAS / 2);
    const double command = window - (T.tRTP + T.tRP) - margin;
    const auto hit = h.access(pc0(0, 0, 128), 32, false, command - ctrl);
    if (margin > 0) {
      EXPECT_DOUBLE_EQ(hit.done_ns, command + T.tCL + burst);
    } else {
      EXPECT_DOUBLE_EQ(hit.done_ns, act1 + T.tRAS + T.tRP + T.tRCD + T.tCL + burst);
    }
  }
}

// The transaction queue slot is free when the request's last column command issues, not when its data returns:
// with one slot, a second row hit enters at the first's column command (ctrl + tRCD), not at its data (+ tCL +
// tBURST).
TEST(HbmController, QueueSlotFreesWhenTheColumnCommandIssues) {
  const auto p = hbm({"hbm.refresh=none", "hbm.queue_depth=1"});
  const auto& T = p.timing;
  Hbm h(p);
  const double ctrl = p.controller_latency, burst = h.burst_ns();
  const auto a = h.access(pc0(0, 0), 32, false, 0.0);
  const auto b = h.access(pc0(0, 0, 128), 32, false, 0.0);  // bank group 0 again, next column: a row hit
  EXPECT_DOUBLE_EQ(a.done_ns, ctrl + T.tRCD + T.tCL + burst);
  EXPECT_DOUBLE_EQ(b.accepted_ns, ctrl + T.tRCD);
  EXPECT_DOUBLE_EQ(b.done_ns, ctrl + T.tRCD + ctrl + T.tCL + burst);
  // The bank's command queue holds requests to one bank the same way: with one entry per bank and a deep
  // transaction queue, a request to another bank does not wait.
  Hbm banks(hbm({"hbm.refresh=none", "hbm.bank_queue_depth=1"}));
  banks.access(pc0(0, 0), 32, false, 0.0);
  EXPECT_DOUBLE_EQ(banks.access(pc0(0, 0, 128), 32, false, 0.0).accepted_ns, ctrl + T.tRCD);
  EXPECT_DOUBLE_EQ(banks.access(pc0(1, 0, 128), 32, false, 0.0).accepted_ns, 0.0);
}

// Two activates in one bank group are tRRD_L apart; in two bank groups tRRD_S.
TEST(HbmController, ActivatesInOneBankGroupAreTrrdLApart) {
  const auto p = hbm({"hbm.refresh=none"});
  const auto& T = p.timing;
  ASSERT_GT(T.tRRD_L, T.tRRD_S);
  const double idle = p.controller_latency + T.tRCD + T.tCL + 1.25;
  {
    Hbm h(p);
    h.access(pc0(0, 5), 32, false, 0.0);                                             // bank group 0, bank 0
    EXPECT_DOUBLE_EQ(h.access(pc0(1, 5), 32, false, 0.0).done_ns, idle + T.tRRD_L);  // bank group 0, bank 1
  }
  {
    Hbm h(p);
    h.access(pc0(0, 5), 32, false, 0.0);
    EXPECT_DOUBLE_EQ(h.access(pc0(1, 5, 32), 32, false, 0.0).done_ns, idle + T.tRRD_S);  // bank group 1, bank 1
  }
}

// Sequential single-burst reads of one row in one bank group: one column command per tCCD_L, whoever sent them.
TEST(HbmController, ReadsInOneBankGroupAreTccdLApartAcrossRequests) {
  auto p = hbm({"hbm.refresh=none", "hbm.timing.tCCD_L=5ns"});
  p.address_mapping = "ro_ch_ba_bg_co";  // columns lowest: a row of one bank group
  Hbm h(p);
  const int n = 16;
  double first = 0, last = 0;
  for (int i = 0; i < n; ++i) {
    const double done = h.access(static_cast<std::uint64_t>(i) * 32, 32, false, 0.0).done_ns;
    if (i == 0) first = done;
    last = done;
  }
  EXPECT_DOUBLE_EQ(first, p.controller_latency + p.timing.tRCD + p.timing.tCL + 1.25);
  EXPECT_DOUBLE_EQ(last - first, (n - 1) * 5.0);  // 32 B per 5 ns: a quarter of the bus
}

// The bank-group rule for a sequential stream over G bank groups: min(1 / tBURST, G / tCCD_L) bursts per ns.
// tCCD_L = 2.5 ns (the default) keeps the bus rate; tCCD_L = 10 ns halves it (4 bursts per 10 ns against 8).
TEST(HbmController, SequentialStreamLosesBandwidthAsTheBankGroupRuleSays) {
  for (const double ccd_l : {2.5, 10.0}) {
    const auto p = hbm({"hbm.refresh=none", "hbm.timing.tCCD_L=" + std::to_string(ccd_l) + "ns"});
    Hbm h(p);
    const int n = 4000;
    double first = 0, last = 0;
    for (int i = 0; i < n; ++i) {
      // PC 0's 4 KiB blocks, in order: rows of banks 0..3, then the next row.
      const std::uint64_t k = static_cast<std::uint64_t>(i) * 32, block = k / 4096;
      const double done = h.access(pc0(block % 4, block / 4, k % 4096), 32, false, i * 1.25 / 2).done_ns;
      if (i == 100) first = done;
      last = done;
    }
    const double rate = (n - 101) * 32.0 / (last - first);  // B/ns over the steady part
    const double expect = std::min(32.0 / h.burst_ns(), 4 * 32.0 / ccd_l);
    EXPECT_NEAR(rate / expect, 1.0, 0.03) << "tCCD_L " << ccd_l << ": " << rate << " B/ns";
  }
}

// Read data, then write data: the write's data starts tRTRS after the read's ends (tRTW = tCL + tBURST - tCWL +
// tRTRS between the commands). Write data, then a read: the read command waits tWTR_S after the write data (tWTR_L
// in the same bank group).
TEST(HbmController, ReadWriteMixCostsTheTurnarounds) {
  const auto p = hbm({"hbm.refresh=none", "hbm.write_buffer=0"});  // each write served as it comes
  const auto& T = p.timing;
  {
    Hbm h(p);
    const auto r = h.access(pc0(0, 0), 32, false, 0.0);     // bank group 0
    const auto w = h.access(pc0(0, 0, 32), 32, true, 0.0);  // bank group 1
    EXPECT_DOUBLE_EQ(w.done_ns, r.done_ns + T.tRTRS + 1.25);
    const auto r2 = h.access(pc0(0, 0, 64), 32, false, 0.0);  // bank group 2: after the write, not before it
    EXPECT_DOUBLE_EQ(r2.done_ns, w.done_ns + T.tWTR_S + T.tCL + 1.25);
  }
  {
    // The same three as reads only: back to back on the bus once the rows are open (tRRD_S apart).
    Hbm h(p);
    h.access(pc0(0, 0), 32, false, 0.0);
    const auto b = h.access(pc0(0, 0, 32), 32, false, 0.0);
    const auto c = h.access(pc0(0, 0, 64), 32, false, 0.0);
    EXPECT_DOUBLE_EQ(c.done_ns - b.done_ns, T.tRRD_S);
  }
  {
    // A stream alternating reads and writes to open rows pays one turnaround per switch: each read-write pair
    // takes 2 tBURST + tRTRS + tWTR_S + tCL against 2 tBURST for reads only.
    Hbm mix(p), reads(p);
    const Alternation a = alternate(mix, reads, kPairs);
    const double per_pair = (a.mix_end - a.reads_end) / kPairs;
    EXPECT_NEAR(per_pair, T.tRTRS + T.tWTR_S + T.tCL, 0.5) << per_pair;
  }
}

// Posted writes wait while a read waits at their PC, and go from the moment the last read's column command
// issued: a write arriving with a read is written at ctrl + tRCD (the read's command) + ctrl + tRCD + tCWL + tBURST.
TEST(HbmController, PostedWritesWaitForTheReads) {
  const auto p = hbm({"hbm.refresh=none"});
  const auto& T = p.timing;
  Hbm h(p);
  const double ctrl = p.controller_latency;
  h.access(pc0(0, 0), 32, false, 0.0);                    // a read in bank group 0
  const auto w = h.access(pc0(0, 0, 32), 32, true, 0.0);  // a write in bank group 1: posted
  EXPECT_DOUBLE_EQ(w.done_ns, 0.0);
  EXPECT_EQ(h.stats().write_latency.count(), 0u);
  const double expect = ctrl + T.tRCD + ctrl + T.tRCD + T.tCWL + 1.25;
  EXPECT_DOUBLE_EQ(h.drain_writes(), expect);
  EXPECT_DOUBLE_EQ(h.stats().write_latency.max(), expect);
  EXPECT_DOUBLE_EQ(h.drain_writes(), 0.0);  // nothing left
  // With no read waiting, a write goes at once.
  const auto idle = h.access(pc0(0, 0, 64), 32, true, 1000.0);
  EXPECT_EQ(h.stats().write_latency.count(), 2u);
  EXPECT_DOUBLE_EQ(h.stats().write_latency.max(), expect);
  EXPECT_DOUBLE_EQ(idle.done_ns, 1000.0);  // posted all the same
  // Whatever comes next at the PC, a buffered write went when the reads were done: here a later write, which
  // finds no read waiting.
  Hbm next(p);
  next.access(pc0(0, 0), 32, false, 0.0);
  next.access(pc0(0, 0, 32), 32, true, 0.0);
  next.access(pc0(0, 0, 96), 32, true, 1000.0);
  EXPECT_EQ(next.stats().write_latency.count(), 2u);
  EXPECT_DOUBLE_EQ(next.stats().write_latency.max(), expect);
}

// While reads wait, writes drain when the buffer holds write_high of its entries, down to write_low: with 10
// entries, 0.8 and 0.2, the 8th write drains the oldest six and leaves two.
TEST(HbmController, WritesDrainAtTheHighWatermark) {
  const auto p = hbm({"hbm.refresh=none", "hbm.write_buffer=10"});
  Hbm h(p);
  for (int i = 0; i < 8; ++i) h.access(pc0(1, 0, 32 * (i % 4)), 32, false, 0.0);  // reads, bank 1, until ~ 30 ns
  for (int i = 0; i < 7; ++i) h.access(pc0(0, i % 4, 32 * (i % 4)), 32, true, 1.0 + 0.1 * i);
  EXPECT_EQ(h.stats().write_latency.count(), 0u);
  h.access(pc0(0, 0, 384), 32, true, 2.0);
  EXPECT_EQ(h.stats().write_latency.count(), 6u);
  h.drain_writes();
  EXPECT_EQ(h.stats().write_latency.count(), 8u);
}

// Batched, a read/write mix turns the bus around once per drain instead of once per write: the pairs of the
// test above cost a small part of a turnaround each.
TEST(HbmController, TheWriteBufferBatchesTurnarounds) {
  const auto p = hbm({"hbm.refresh=none"});
  const auto& T = p.timing;
  Hbm mix(p), reads(p);
  const Alternation a = alternate(mix, reads, kPairs);
  const double reads_end = a.reads_end;
  double mix_end = a.mix_end;
  const double last_write = mix.drain_writes();  // the writes left after the last drain at the watermark
  ASSERT_GT(last_write, 1000.0);
  mix_end = std::max(mix_end, last_write);
  const double per_pair = (mix_end - reads_end) / kPairs;
  EXPECT_GT(per_pair, 0.0);
  EXPECT_LT(per_pair, 0.25 * (T.tRTRS + T.tWTR_S + T.tCL)) << per_pair;
  EXPECT_EQ(mix.stats().write_latency.count(), static_cast<std::uint64_t>(kPairs));
}

// A sequential stream on one pseudo-channel, offered faster than it can be served, reaches the refresh ceiling
// 1 - tRFC / tREFI with the default queue depths.
TEST(HbmController, SequentialStreamReachesTheRefreshCeilingAtTheDefaultDepth) {
  const auto p = hbm();
  ASSERT_EQ(p.queue_depth, 32u);
  Hbm h(p);
  const int n = 80000;  // 64 B each, one per 1.25 ns: twice the PC's rate, 200 us of traffic
  double end = 0;
  for (int i = 0; i < n; ++i) {
    const std::uint64_t k = static_cast<std::uint64_t>(i) * 64, block = k / 4096;
    end = std::max(end, h.access(pc0(block % 4, block / 4, k % 4096), 64, false, i * 1.25).done_ns);
  }
  const double efficiency = n * 64.0 / end / (32.0 / h.burst_ns());
  EXPECT_NEAR(efficiency, 1 - p.timing.tRFC / p.timing.tREFI, 0.02) << efficiency;
}

// Latency statistics: every request from its arrival to its last data, reads and writes apart, with the row-hit
// rates apart too. Idle reads all take the same time, so every percentile is that time.
TEST(HbmController, LatencyStatisticsPerRequestType) {
  const auto p = hbm({"hbm.refresh=none"});
  const auto& T = p.timing;
  Hbm h(p);
  const double miss = p.controller_latency + T.tRCD + T.tCL + 1.25, hit = p.controller_latency + T.tCL + 1.25;
  h.access(pc0(0, 0), 32, false, 0.0);                                               // opens the row: a miss
  for (int i = 1; i <= 9; ++i) h.access(pc0(0, 0, 128 * i), 32, false, 1000.0 * i);  // hits
  h.access(pc0(0, 0, 32), 32, true, 20000.0);  // bank group 1: a write that opens its row
  const HbmStats& s = h.stats();
  EXPECT_EQ(s.read_latency.count(), 10u);
  EXPECT_DOUBLE_EQ(s.read_latency.max(), miss);
  EXPECT_DOUBLE_EQ(s.read_latency.min(), hit);
  EXPECT_DOUBLE_EQ(s.read_latency.percentile(0.5), hit);
  EXPECT_DOUBLE_EQ(s.read_latency.percentile(0.9), hit);  // the 9th of 10
  EXPECT_DOUBLE_EQ(s.read_latency.percentile(0.99), miss);
  EXPECT_DOUBLE_EQ(s.read_latency.mean(), (miss + 9 * hit) / 10);
  EXPECT_EQ(s.write_latency.count(), 1u);
  EXPECT_DOUBLE_EQ(s.write_latency.max(), p.controller_latency + T.tRCD + T.tCWL + 1.25);
  EXPECT_DOUBLE_EQ(s.read_row_hit_rate(), 0.9);
  EXPECT_DOUBLE_EQ(s.write_row_hit_rate(), 0.0);
}

}  // namespace
}  // namespace npusim::hw::mem
