// Exact-cycle tests of the core engine against the formulas of hw/core/cost_model.hpp, and its error reports.
// The engine runs standalone (no SystemC): the host's time is whatever the engine synchronised to.
#include <gtest/gtest.h>

#include <cmath>
#include <optional>

#include "common/config/loader.hpp"
#include "hw/core/core_engine.hpp"
#include "hw/core/cost_model.hpp"

namespace npusim::hw::core {
namespace {

using isa::Instr;
using isa::Op;
using isa::Pipe;
using isa::Space;

class StandaloneHost final : public CoreHost {
 public:
  explicit StandaloneHost(const config::ChipConfig& cfg) : gm_(cfg.simple_gm, 1), memory_(1ULL << 30) {}
  std::uint64_t now() const override { return now_; }
  void sync(std::uint64_t cycle) override {
    EXPECT_GE(cycle, now_) << "syncs must be monotonic";
    now_ = std::max(now_, cycle);
  }
  mem::GmPort& gm() override { return gm_; }
  mem::DeviceMemory* device_memory() override { return &memory_; }
  CrossCoreHub* cross_core() override { return nullptr; }
  void wait_cross(std::optional<std::uint64_t>) override {}

 private:
  std::uint64_t now_ = 0;
  mem::SimpleGm gm_;
  mem::DeviceMemory memory_;
};

config::ChipConfig load(const std::string& name, const std::vector<std::string>& sets = {}) {
  return config::load_config(name, sets).chip;
}

Instr vadd(std::uint32_t repeat, std::uint64_t dst = 0, std::uint64_t a = 0x1000, std::uint64_t b = 0x2000) {
  Instr in;
  in.op = Op::kAdd;
  in.dtype = in.src_dtype = isa::DType::kFp16;
  in.vec.dst.addr = dst;
  in.vec.src0.addr = a;
  in.vec.src1.addr = b;
  in.vec.repeat = repeat;
  in.where = {"test.cpp", 10};
  return in;
}

Instr copy_in(std::uint64_t ub, std::uint64_t gm, std::uint32_t bytes) {
  Instr in;
  in.op = Op::kCopy;
  in.src_space = Space::kGm;
  in.dst_space = Space::kUb;
  in.src0 = gm;
  in.dst = ub;
  in.copy.burst_bytes = bytes;
  in.where = {"test.cpp", 20};
  return in;
}

Instr flag(Op op, Pipe src, Pipe dst, std::uint32_t id, std::uint32_t line = 30) {
  Instr in;
  in.op = op;
  in.pipe = op == Op::kSetFlag ? src : dst;
  in.sync.src = src;
  in.sync.dst = dst;
  in.sync.id = id;
  in.where = {"kernel.cpp", line};
  return in;
}

CoreIdentity aiv() { return CoreIdentity{0, CoreKind::kVector, "aiv0", 0}; }
CoreIdentity aic() { return CoreIdentity{0, CoreKind::kCube, "aic0", 0}; }

TEST(CoreEngineTiming, VectorInstructionCostsLatencyPlusRepeats) {
  for (const char* name : {"910b", "tiny"}) {
    for (std::uint32_t cpr : {2u, 3u}) {
      // The datapath alone: vadd's operands share banks (bank conflicts are tested below).
      const auto cfg = load(name, {"vector.cycles_per_repeat=" + std::to_string(cpr), "vector.latency.add=9",
                                   "vector.bank_conflicts=false"});
      for (std::uint32_t repeat : {1u, 7u, 64u}) {
        StandaloneHost host(cfg);
        CoreEngine e(cfg, aiv(), Mode::kTimingOnly, host);
        e.issue(vadd(repeat));
        e.finish();
        // Issued after one scalar cycle, then 9 + cpr * repeat - 1 cycles on V.
        EXPECT_EQ(e.end_cycle(), 1 + 9 + cpr * repeat - 1) << name << " cpr " << cpr << " repeat " << repeat;
        EXPECT_EQ(e.pipe_stats(Pipe::kV).busy, 9 + cpr * repeat - 1);
      }
    }
  }
}

TEST(CoreEngineTiming, MmadCostsFractalStepsPlusLatency) {
  const auto cfg = load("910b", {"cube.latency=5"});
  struct Case {
    isa::DType in, acc;
    std::uint32_t m, k, n;
    std::uint64_t steps;
  };
  const Case cases[] = {{isa::DType::kFp16, isa::DType::kFp32, 128, 128, 128, 8 * 8 * 8},
                        {isa::DType::kFp16, isa::DType::kFp32, 17, 33, 16, 2 * 3 * 1},
                        {isa::DType::kInt8, isa::DType::kInt32, 64, 64, 32, 4 * 2 * 2},
                        {isa::DType::kFp32, isa::DType::kFp32, 16, 64, 32, 1 * 8 * 2}};
  for (const Case& c : cases) {
    StandaloneHost host(cfg);
    CoreEngine e(cfg, aic(), Mode::kTimingOnly, host);
    Instr in;
    in.op = Op::kMmad;
    in.src_dtype = c.in;
    in.dtype = c.acc;
    in.cube.m = c.m;
    in.cube.k = c.k;
    in.cube.n = c.n;
    e.issue(in);
    e.finish();
    const config::FractalParams& f = c.in == isa::DType::kFp16 ? cfg.cube.fp16 : c.in == isa::DType::kInt8 ? cfg.cube.int8 : cfg.cube.fp32;
    EXPECT_EQ(e.end_cycle(), 1 + c.steps * f.cycles + 5) << c.m << "x" << c.k << "x" << c.n;
  }
}

TEST(CoreEngineTiming, LocalCopyCostsSetupPlusBytesOverRate) {
  const auto cfg = load("910b", {"mte.l1_to_l0a.bytes_per_cycle=100", "mte.l1_to_l0a.setup_cycles=7"});
  StandaloneHost host(cfg);
  CoreEngine e(cfg, aic(), Mode::kTimingOnly, host);
  Instr in;
  in.op = Op::kLoad2d;
  in.src_space = Space::kL1;
  in.dst_space = Space::kL0A;
  in.copy.repeat = 10;  // 5120 B
  e.issue(in);
  e.finish();
  EXPECT_EQ(e.end_cycle(), 1 + 7 + 52);  // ceil(5120 / 100) = 52
}

TEST(CoreEngineTiming, FlagChainCostsTheSumAndIndependentPipesOverlap) {
  const auto cfg = load("910b", {"vector.bank_conflicts=false"});  // the datapath formula alone
  const std::uint32_t bytes = 16384;
  const std::uint64_t setup = cfg.mte.gm_to_ub.setup_cycles;
  const auto gm_cycles = static_cast<std::uint64_t>(std::ceil(bytes / cfg.simple_gm.bytes_per_cycle));
  const auto path_cycles = static_cast<std::uint64_t>(std::ceil(bytes / cfg.mte.gm_to_ub.bytes_per_cycle));
  const std::uint64_t vec = cfg.vector.latency.add + cfg.vector.cycles_per_repeat * 64 - 1;
  ASSERT_GT(gm_cycles, path_cycles);  // 910b: the GM port (32 B/cycle) is slower than the MTE path
  {
    StandaloneHost host(cfg);
    CoreEngine e(cfg, aiv(), Mode::kTimingOnly, host);
    e.issue(copy_in(0x4000, 0, bytes));
    e.issue(flag(Op::kSetFlag, Pipe::kMte2, Pipe::kV, 0));
    e.issue(flag(Op::kWaitFlag, Pipe::kMte2, Pipe::kV, 0));
    e.issue(vadd(64));
    e.finish();
    // copy issued at 1; its data is done after setup, the GM transfer and the read latency; then the Add.
    EXPECT_EQ(e.end_cycle(), 1 + setup + gm_cycles + cfg.simple_gm.read_latency + vec);
    // The copy occupies MTE2 until its data has landed (SetFlag semantics: its reads and writes are complete).
    EXPECT_EQ(e.pipe_stats(Pipe::kMte2).busy, setup + gm_cycles + cfg.simple_gm.read_latency);
  }
  {
    StandaloneHost host(cfg);
    CoreEngine e(cfg, aiv(), Mode::kTimingOnly, host);
    e.issue(copy_in(0x4000, 0, bytes));
    e.issue(vadd(64, 0x10000, 0x10000, 0x10000));
    e.finish();
    // No flag: the Add runs while the copy is in flight.
    EXPECT_EQ(e.end_cycle(), 1 + setup + gm_cycles + cfg.simple_gm.read_latency);
    EXPECT_EQ(e.pipe_stats(Pipe::kV).intervals.front().first, 2u);
  }
}

TEST(CoreEngineTiming, FullQueueStallsTheScalarUnit) {
  const auto cfg = load("910b", {"queues.v=2", "vector.bank_conflicts=false"});  // the datapath formula alone
  StandaloneHost host(cfg);
  CoreEngine e(cfg, aiv(), Mode::kTimingOnly, host);
  const std::uint64_t c = cfg.vector.latency.add + cfg.vector.cycles_per_repeat * 100 - 1;
  for (int i = 0; i < 5; ++i) e.issue(vadd(100));
  // The fifth Add enters the queue when the third starts (1 + 2c).
  EXPECT_EQ(e.scalar_time(), 1 + 2 * c);
  e.finish();
  EXPECT_EQ(e.end_cycle(), 1 + 5 * c);
}

// HARDWARE.md's UB banking (910B: 48 banks of 4 KiB in 16 groups of 3): per cycle a group serves one block read and
// one block write, a bank one of the two; a repeat costs its busiest group or bank, distinct blocks counted once.
TEST(CoreEngineTiming, BankConflictsChargeTheBusiestGroup) {
  const auto cfg = load("910b");
  ASSERT_TRUE(cfg.vector.bank_conflicts);  // on by default
  StandaloneHost host(cfg);
  CoreEngine e(cfg, aiv(), Mode::kTimingOnly, host);
  Instr in = vadd(4, 0, 0x8000, 0x10000);
  in.vec.src0.blk_stride = 512;  // all eight blocks in bank group 0 ...
  in.vec.src0.rep_stride = 4096;
  in.vec.dst.addr = 0x20000;
  EXPECT_EQ(vector_bank_cycles_per_repeat(cfg, in), 9u);  // ... plus src1's block in group 0
  e.issue(in);
  e.issue(vadd(4, 0x0, 0x10000, 0x20000));  // a 64 KiB stripe (bank) each: no conflict beyond cycles_per_repeat
  e.finish();
  EXPECT_EQ(e.end_cycle(), 1 + (cfg.vector.latency.add + 9 * 4 - 1) + (cfg.vector.latency.add + 2 * 4 - 1));
}

// A broadcast operand (block stride 0: one block for all eight) is one read, not eight.
TEST(CoreEngineTiming, ABroadcastBlockIsReadOnce) {
  const auto cfg = load("910b");
  Instr in =
      vadd(4, 0x0, 0x100, 0x10000);  // src0 groups 8..15, src1 one block in group 0 (its second bank), dst groups 0..7
  in.vec.src1.blk_stride = 0;
  in.vec.src1.rep_stride = 0;
  EXPECT_EQ(vector_bank_cycles_per_repeat(cfg, in), 1u);
}

// A read and a write of one bank take two cycles: src0 (block 0) and src1 (block 16) are both in group 0, bank 0,
// so writing dst's block 0 there too makes three accesses of bank 0 (3 cycles a repeat); dst one 64 KiB stripe
// further is in group 0's second bank, and the group's two reads set the pace (2).
TEST(CoreEngineTiming, AReadAndAWriteOfOneBankConflict) {
  const auto cfg = load("910b");
  Instr in = vadd(4, 0x0, 0x0, 0x200);
  in.vec.src0.blk_stride = in.vec.src1.blk_stride = in.vec.dst.blk_stride = 32;
  EXPECT_EQ(vector_bank_cycles_per_repeat(cfg, in), 3u);
  in.vec.dst.addr = 0x10000;
  EXPECT_EQ(vector_bank_cycles_per_repeat(cfg, in), 2u);
  const auto off = load("910b", {"vector.bank_conflicts=false"});
  EXPECT_EQ(vector_bank_cycles_per_repeat(off, in), 0u);
}

TEST(CoreEngineModes, FunctionalAndTimingOnlyGiveTheSameCycles) {
  const auto cfg = load("tiny");
  std::uint64_t cycles[2];
  for (int m = 0; m < 2; ++m) {
    StandaloneHost host(cfg);
    CoreEngine e(cfg, aiv(), m ? Mode::kFunctional : Mode::kTimingOnly, host);
    for (int i = 0; i < 4; ++i) {
      e.issue(copy_in(0x1000, i * 8192, 8192));
      e.issue(flag(Op::kSetFlag, Pipe::kMte2, Pipe::kV, 1));
      e.issue(flag(Op::kWaitFlag, Pipe::kMte2, Pipe::kV, 1));
      e.issue(vadd(32, 0x3000, 0x1000, 0x1000));
    }
    e.finish();
    cycles[m] = e.end_cycle();
  }
  EXPECT_EQ(cycles[0], cycles[1]);
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const KernelError& e) {
    return e.what();
  }
  return "";
}

TEST(CoreEngineErrors, WaitThatCanNeverBeSatisfiedIsADeadlock) {
  const auto cfg = load("tiny");
  StandaloneHost host(cfg);
  CoreEngine e(cfg, aiv(), Mode::kTimingOnly, host);
  e.issue(flag(Op::kWaitFlag, Pipe::kMte2, Pipe::kV, 3, 77));
  e.issue(vadd(1));
  const std::string msg = error_of([&] { e.finish(); });
  EXPECT_NE(msg.find("deadlock on core aiv0 (block 0)"), std::string::npos) << msg;
  EXPECT_NE(msg.find("pipe V waits at wait_flag(MTE2->V, id 3) (kernel.cpp:77)"), std::string::npos) << msg;
  EXPECT_NE(msg.find("the kernel has ended"), std::string::npos) << msg;
}

TEST(CoreEngineErrors, StallBehindABlockedQueueIsADeadlock) {
  const auto cfg = load("tiny", {"queues.v=2"});
  StandaloneHost host(cfg);
  CoreEngine e(cfg, aiv(), Mode::kTimingOnly, host);
  e.issue(flag(Op::kWaitFlag, Pipe::kMte2, Pipe::kV, 0, 5));
  e.issue(vadd(1));
  const std::string msg = error_of([&] { e.issue(vadd(1)); });
  EXPECT_NE(msg.find("stalled issuing Add"), std::string::npos) << msg;
  EXPECT_NE(msg.find("full V queue (depth 2)"), std::string::npos) << msg;
}

TEST(CoreEngineErrors, FlagMisuseBadAccessesAndIllegalBarriers) {
  const auto cfg = load("tiny");
  auto run = [&](CoreIdentity id, const std::vector<Instr>& prog) {
    return error_of([&] {
      StandaloneHost host(cfg);
      CoreEngine e(cfg, id, Mode::kTimingOnly, host);
      for (const Instr& in : prog) e.issue(in);
      e.finish();
    });
  };
  EXPECT_NE(run(aiv(), {flag(Op::kSetFlag, Pipe::kMte2, Pipe::kV, 0, 1), flag(Op::kSetFlag, Pipe::kMte2, Pipe::kV, 0, 2)})
                .find("already set (by kernel.cpp:1) and never waited for"),
            std::string::npos);
  EXPECT_NE(run(aiv(), {vadd(1, 32 * 1024)}).find("out of range of UB (32768 B)"), std::string::npos);
  EXPECT_NE(run(aiv(), {vadd(1, 16)}).find("is not 32-byte aligned"), std::string::npos) << run(aiv(), {vadd(1, 16)});
  EXPECT_NE(run(aiv(), {copy_in(0, 1ULL << 40, 64)}).find("out of range of GM"), std::string::npos);
  Instr mm;
  mm.op = Op::kMmad;
  mm.cube.m = mm.cube.k = mm.cube.n = 16;
  EXPECT_NE(run(aiv(), {mm}).find("an AIV has no M pipe"), std::string::npos);
  Instr bar;
  bar.op = Op::kBarrier;
  bar.pipe = bar.sync.src = Pipe::kS;
  EXPECT_NE(run(aiv(), {bar}).find("pipe_barrier(PIPE_S) is illegal"), std::string::npos);
  bar.pipe = bar.sync.src = Pipe::kM;
  EXPECT_NE(run(aiv(), {bar}).find("an AIV has no M pipe"), std::string::npos);
  EXPECT_NE(run(aiv(), {flag(Op::kSetFlag, Pipe::kMte2, Pipe::kV, 8)}).find("event id 8 is out of range"),
            std::string::npos);
  Instr l0a;
  l0a.op = Op::kLoad2d;
  l0a.src_space = Space::kL1;
  l0a.dst_space = Space::kL0A;
  l0a.dst = 256;  // L0A needs 512 B alignment
  l0a.copy.repeat = 1;
  EXPECT_NE(run(aic(), {l0a}).find("is not 512-byte aligned"), std::string::npos);
}

TEST(CoreEngineErrors, BarrierAllDrainsEveryPipe) {
  const auto cfg = load("tiny", {"vector.bank_conflicts=false"});  // the datapath formula alone
  StandaloneHost host(cfg);
  CoreEngine e(cfg, aiv(), Mode::kTimingOnly, host);
  e.issue(vadd(10));
  Instr bar;
  bar.op = Op::kBarrier;
  bar.pipe = bar.sync.src = Pipe::kAll;
  e.issue(bar);
  EXPECT_EQ(e.scalar_time(), 1 + cfg.vector.latency.add + cfg.vector.cycles_per_repeat * 10 - 1);
  e.finish();
}

}  // namespace
}  // namespace npusim::hw::core

// --- The synchronisation checker (sim.sanitize): happens-before between pipes, independent of timing -------------

namespace npusim::hw::core {
namespace {

std::string finish_error(CoreEngine& e) {
  try {
    e.finish();
  } catch (const KernelError& err) {
    return err.what();
  }
  return "";
}

Instr copy_out(std::uint64_t gm, std::uint64_t ub, std::uint32_t bytes) {
  Instr in = copy_in(ub, gm, bytes);
  std::swap(in.src_space, in.dst_space);
  in.src0 = ub;
  in.dst = gm;
  in.where = {"test.cpp", 40};
  return in;
}

TEST(Sanitizer, ACopyInReadByTheVectorUnitWithoutAFlagIsARaceNamingBothLines) {
  const auto cfg = load("910b", {"sim.sanitize=true"});
  StandaloneHost host(cfg);
  CoreEngine e(cfg, aiv(), Mode::kTimingOnly, host);
  e.issue(copy_in(0x1000, 0, 256));
  e.scalar_work(100000);  // long after the copy is done: timing does not hide the missing flag
  e.issue(vadd(1, 0x3000, 0x1000, 0x2000));
  const std::string err = finish_error(e);
  EXPECT_NE(err.find("read-after-write race on UB [0x1000"), std::string::npos) << err;
  EXPECT_NE(err.find("V Add at test.cpp:10 reads what MTE2 DataCopy at test.cpp:20 writes"), std::string::npos) << err;
  EXPECT_NE(err.find("HardEvent::MTE2_V"), std::string::npos) << err;
}

TEST(Sanitizer, AFlagPairOrdersThePipesAndWithoutSanitizeNothingIsChecked) {
  for (bool sanitize : {true, false}) {
    const auto cfg = load("910b", {std::string("sim.sanitize=") + (sanitize ? "true" : "false")});
    StandaloneHost host(cfg);
    CoreEngine e(cfg, aiv(), Mode::kTimingOnly, host);
    e.issue(copy_in(0x1000, 0, 256));
    if (sanitize) {
      e.issue(flag(Op::kSetFlag, Pipe::kMte2, Pipe::kV, 0));
      e.issue(flag(Op::kWaitFlag, Pipe::kMte2, Pipe::kV, 0));
    }
    e.issue(vadd(1, 0x3000, 0x1000, 0x2000));
    EXPECT_EQ(finish_error(e), "") << sanitize;
  }
}

TEST(Sanitizer, OverwritingWhatAnotherPipeStillReadsIsAWriteAfterReadRace) {
  const auto cfg = load("910b", {"sim.sanitize=true"});
  StandaloneHost host(cfg);
  CoreEngine e(cfg, aiv(), Mode::kTimingOnly, host);
  e.issue(copy_out(0, 0x3000, 256));   // MTE3 reads UB 0x3000
  e.issue(vadd(1, 0x3000, 0x1000, 0x2000));  // V writes it, no MTE3 -> V flag
  const std::string err = finish_error(e);
  EXPECT_NE(err.find("write-after-read race on UB [0x3000"), std::string::npos) << err;
  EXPECT_NE(err.find("V Add at test.cpp:10 writes where MTE3 DataCopy at test.cpp:40 reads"), std::string::npos) << err;
}

TEST(Sanitizer, ABarrierOfAllPipesOrdersEverything) {
  const auto cfg = load("910b", {"sim.sanitize=true"});
  StandaloneHost host(cfg);
  CoreEngine e(cfg, aiv(), Mode::kTimingOnly, host);
  e.issue(copy_in(0x1000, 0, 256));
  Instr bar;
  bar.op = Op::kBarrier;
  bar.pipe = Pipe::kAll;
  bar.sync.src = Pipe::kAll;
  e.issue(bar);
  e.issue(vadd(1, 0x3000, 0x1000, 0x2000));
  EXPECT_EQ(finish_error(e), "");
}

TEST(Sanitizer, TheScalarUnitReadsVectorResultsOnlyAfterAFlagButOrdersWhatItIssuesLater) {
  const auto cfg = load("910b", {"sim.sanitize=true"});
  {
    StandaloneHost host(cfg);
    CoreEngine e(cfg, aiv(), Mode::kTimingOnly, host);
    e.issue(vadd(1, 0x3000, 0x1000, 0x2000));
    float v = 0;
    e.scalar_read(Space::kUb, 0x3000, &v, 4, {"test.cpp", 50});
    const std::string err = finish_error(e);
    EXPECT_NE(err.find("S scalar access at test.cpp:50 reads what V Add at test.cpp:10 writes"), std::string::npos) << err;
  }
  {
    // A scalar write, then an instruction issued after it reads the value: issue order is enough.
    StandaloneHost host(cfg);
    CoreEngine e(cfg, aiv(), Mode::kTimingOnly, host);
    const float one = 1;
    e.scalar_write(Space::kUb, 0x1000, &one, 4, {"test.cpp", 60});
    e.issue(vadd(1, 0x3000, 0x1000, 0x2000));
    EXPECT_EQ(finish_error(e), "");
  }
}

TEST(Sanitizer, AFlagNeverWaitedForIsReportedUnlessExpectedToStaySet) {
  for (bool expected : {false, true}) {
    const auto cfg = load("910b", {"sim.sanitize=true"});
    StandaloneHost host(cfg);
    CoreEngine e(cfg, aiv(), Mode::kTimingOnly, host);
    e.issue(flag(Op::kSetFlag, Pipe::kV, Pipe::kMte2, 3, 77));
    if (expected) e.sanitizer()->forget_pending(Pipe::kV, Pipe::kMte2, 3);
    const std::string err = finish_error(e);
    if (expected) {
      EXPECT_EQ(err, "");
    } else {
      EXPECT_NE(err.find("flag V->MTE2 id 3 set by V set_flag at kernel.cpp:77 is still set when the kernel ends"),
                std::string::npos) << err;
    }
  }
}

}  // namespace
}  // namespace npusim::hw::core
