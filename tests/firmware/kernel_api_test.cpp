// The kernel API on the SystemC chip, kernels run through the task scheduler (fw::Platform::run_kernel): TQue flag
// mapping (a missing EnQue deadlocks and is reported), cross-core flags between an AIC and its AIVs, waves, scalar
// access and buffer allocation errors. Each test is its own process (one SystemC elaboration each).
#include <gtest/gtest.h>

#include <cstring>

#include "common/config/loader.hpp"
#include "firmware/kernel/kernel_api.hpp"
#include "firmware/kernel/launch_spec.hpp"
#include "firmware/platform/platform.hpp"

namespace npusim::fw::kernel {
namespace {

config::ChipConfig tiny(const std::vector<std::string>& sets = {}) {
  return config::load_config("tiny", sets).chip;
}

std::string launch_error(fw::Platform& chip, const LaunchSpec& spec) {
  try {
    chip.run_kernel(spec);
  } catch (const hw::core::KernelError& e) {
    return e.what();
  }
  return "";
}

int g_line = 0;

TEST(KernelApi, MissingEnQueDeadlocksAndIsReported) {
  const auto cfg = tiny();
  fw::Platform chip(cfg, hw::core::Mode::kTimingOnly);
  LaunchSpec spec{"missing_enque", KernelType::kVector, 1, [] {
                    TPipe pipe;
                    TQue<TPosition::VECIN, 1> in;
                    pipe.InitBuffer(in, 1, 1024);
                    GlobalTensor<float> g;
                    g.SetGlobalBuffer(0, 256);
                    LocalTensor<float> t = in.AllocTensor<float>();
                    DataCopy(t, g, 256);
                    // in.EnQue(t) is missing.
                    g_line = __LINE__ + 1;
                    LocalTensor<float> u = in.DeQue<float>();
                    Adds(u, u, 1.0f, 256);
                  }};
  const std::string msg = launch_error(chip, spec);
  EXPECT_NE(msg.find("deadlock on core aiv0 (block 0)"), std::string::npos) << msg;
  EXPECT_NE(msg.find("pipe V waits at wait_flag(MTE2->V, id 0) (kernel_api_test.cpp:" + std::to_string(g_line) + ")"),
            std::string::npos)
      << msg;
}

TEST(KernelApi, MissingDeQueIsASetTwice) {
  const auto cfg = tiny();
  fw::Platform chip(cfg, hw::core::Mode::kTimingOnly);
  LaunchSpec spec{"missing_deque", KernelType::kVector, 1, [] {
                    TPipe pipe;
                    TQue<TPosition::VECIN, 1> in;
                    pipe.InitBuffer(in, 1, 1024);
                    GlobalTensor<float> g;
                    g.SetGlobalBuffer(0, 256);
                    for (int i = 0; i < 2; ++i) {
                      LocalTensor<float> t = in.AllocTensor<float>();
                      DataCopy(t, g, 256);
                      in.EnQue(t);
                      in.FreeTensor(t);  // freed from the scalar side without DeQue: the V side never waits
                    }
                  }};
  const std::string msg = launch_error(chip, spec);
  // The second FreeTensor's set fires while the first one has not been waited for (the Alloc waits behind the copy).
  EXPECT_NE(msg.find("while the flag was still set"), std::string::npos) << msg;
  EXPECT_NE(msg.find("a flag must be waited for before it is set again"), std::string::npos) << msg;
}

TEST(KernelApi, CrossCoreMode2HandsOffBetweenCubeAndVectorCores) {
  const auto cfg = tiny({"scalar.cycles_per_instruction=1"});
  fw::Platform chip(cfg, hw::core::Mode::kTimingOnly);
  LaunchSpec spec{"handoff", KernelType::kMix, 1, [] {
                    if (IsAic()) {
                      ScalarWork(1000);
                      CrossCoreSetFlag<2, PIPE_FIX>(3);  // both AIVs may go
                      CrossCoreWaitFlag(4);              // until both AIVs have set 4
                    } else {
                      CrossCoreWaitFlag(3);
                      ScalarWork(GetSubBlockIdx() == 0 ? 500 : 2000);
                      CrossCoreSetFlag<2, PIPE_MTE3>(4);
                    }
                  }};
  const LaunchResult r = chip.run_kernel(spec);
  ASSERT_EQ(r.runs.size(), 3u);
  std::uint64_t aic_end = 0, aiv_end[2] = {0, 0};
  for (const CoreRun& run : r.runs) {
    if (run.core == "aic0") aic_end = run.end;
    if (run.core == "aiv0") aiv_end[0] = run.end;
    if (run.core == "aiv1") aiv_end[1] = run.end;
  }
  // AIV i: waits for the AIC's set (after 1000 + 1 cycles of scalar work and issue), works, sets.
  EXPECT_GE(aiv_end[0], 1000u + 500u);
  EXPECT_GE(aiv_end[1], 1000u + 2000u);
  EXPECT_LT(aiv_end[0], aiv_end[1]);
  // The AIC continues only after the slower AIV has set.
  EXPECT_GE(aic_end, aiv_end[1]);
  EXPECT_LE(aic_end, aiv_end[1] + 10);
}

// flags.cross_core_latency: a count arrives that many cycles after its set fires. A ping-pong of R round trips
// (AIC sets, both AIV wait and set back, the AIC waits) then takes 2 R latencies more than with no latency, which
// is what the AIC's time is made of here besides a few cycles of issue per round (the core's start-up and kernel
// init are set to 0).
TEST(KernelApi, CrossCoreCountsArriveAfterTheConfiguredLatency) {
  constexpr std::uint64_t latency = 700, rounds = 3;
  const auto cfg = tiny({"scalar.cycles_per_instruction=1", "launch.core_startup=0ns", "launch.kernel_init=0ns",
                         "flags.cross_core_latency=" + std::to_string(latency)});
  fw::Platform chip(cfg, hw::core::Mode::kTimingOnly);
  LaunchSpec spec{"ping_pong", KernelType::kMix, 1, [] {
                    for (std::uint64_t r = 0; r < rounds; ++r) {
                      if (IsAic()) {
                        CrossCoreSetFlag<2, PIPE_FIX>(3);
                        CrossCoreWaitFlag(4);
                      } else {
                        CrossCoreWaitFlag(3);
                        CrossCoreSetFlag<2, PIPE_MTE3>(4);
                      }
                    }
                  }};
  const LaunchResult r = chip.run_kernel(spec);
  std::uint64_t aic_start = 0, aic_end = 0;
  for (const CoreRun& run : r.runs) {
    if (run.core != "aic0") continue;
    aic_start = run.start;
    aic_end = run.end;
  }
  const std::uint64_t took = aic_end - aic_start;
  EXPECT_GE(took, 2 * rounds * latency);
  EXPECT_LE(took, 2 * rounds * latency + 10 * rounds) << "a round trip costs more than its two latencies";
}

// scalar.api_call_cycles and scalar.queue_call_cycles: each API call that issues a pipe instruction costs the scalar
// unit its call cycles plus scalar.cycles_per_instruction per instruction it issues, each TQue call its call cycles
// plus its flag instruction (AllocTensor waits for a flag only once its buffer was used before). The scalar unit's
// busy time is that sum exactly; with 40 cycles a call the vector loop is bound by the scalar unit (an Adds of one
// repeat takes 7 cycles on the Vector pipe), so the core takes at least N (40 + 1) cycles.
TEST(KernelApi, ApiAndQueueCallsCostTheConfiguredScalarWork) {
  constexpr std::uint64_t api = 40, queue = 25, adds = 50, rounds = 6;
  const auto cfg =
      tiny({"scalar.cycles_per_instruction=1", "launch.core_startup=0ns", "launch.kernel_init=0ns",
            "scalar.api_call_cycles=" + std::to_string(api), "scalar.queue_call_cycles=" + std::to_string(queue)});
  fw::Platform chip(cfg, hw::core::Mode::kTimingOnly);
  LaunchSpec spec{"scalar_bound", KernelType::kVector, 1, [] {
                    TPipe pipe;
                    TBuf<TPosition::VECCALC> buf;
                    TQue<TPosition::VECIN, 1> q;
                    pipe.InitBuffer(buf, 256);
                    pipe.InitBuffer(q, 1, 256);
                    const LocalTensor<float> t = buf.Get<float>();
                    for (std::uint64_t i = 0; i < adds; ++i) Adds(t, t, 1.0f, 64);  // one instruction each
                    for (std::uint64_t r = 0; r < rounds; ++r) {
                      LocalTensor<float> x = q.AllocTensor<float>();
                      q.EnQue(x);
                      x = q.DeQue<float>();
                      q.FreeTensor(x);
                    }
                  }};
  const LaunchResult r = chip.run_kernel(spec);
  ASSERT_EQ(r.runs.size(), 1u);
  const CoreRun& run = r.runs[0];
  // Per round: four calls, three flags (EnQue's set, DeQue's wait, FreeTensor's set) and, after the first, the
  // AllocTensor's wait.
  const std::uint64_t expected = adds * (api + 1) + rounds * (4 * queue + 3) + (rounds - 1);
  EXPECT_EQ(run.pipes[static_cast<int>(hw::isa::Pipe::kS)].busy, expected);
  EXPECT_GE(run.end - run.start, adds * (api + 1));
}

TEST(KernelApi, CrossCoreWaitNobodySetsIsADeadlockBetweenCores) {
  const auto cfg = tiny();
  fw::Platform chip(cfg, hw::core::Mode::kTimingOnly);
  LaunchSpec spec{"stuck", KernelType::kMix, 1, [] {
                    if (IsAiv()) CrossCoreWaitFlag(5);
                  }};
  const std::string msg = launch_error(chip, spec);
  EXPECT_NE(msg.find("deadlock: no core can make progress"), std::string::npos) << msg;
  EXPECT_NE(msg.find("aiv0 (block 0)"), std::string::npos) << msg;
}

TEST(KernelApi, BlocksBeyondTheCoresRunInWavesAndComputeCorrectly) {
  const auto cfg = tiny();
  fw::Platform chip(cfg, hw::core::Mode::kFunctional);
  const std::uint64_t per_block = 512, blocks = 8;  // 4 AIV: two waves
  std::vector<float> x(per_block * blocks);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i) * 0.5f;
  chip.chip().memory().write(0, x.data(), x.size() * 4);
  LaunchSpec spec{"scale", KernelType::kVector, static_cast<std::uint32_t>(blocks), [=] {
                    GlobalTensor<float> in, out;
                    in.SetGlobalBuffer(GetBlockIdx() * per_block * 4);
                    out.SetGlobalBuffer(0x100000 + GetBlockIdx() * per_block * 4);
                    TPipe pipe;
                    TQue<TPosition::VECIN, 1> qi;
                    TQue<TPosition::VECOUT, 1> qo;
                    pipe.InitBuffer(qi, 1, per_block * 4);
                    pipe.InitBuffer(qo, 1, per_block * 4);
                    LocalTensor<float> a = qi.AllocTensor<float>();
                    DataCopy(a, in, per_block);
                    qi.EnQue(a);
                    a = qi.DeQue<float>();
                    LocalTensor<float> b = qo.AllocTensor<float>();
                    Muls(b, a, 3.0f, per_block);
                    qo.EnQue(b);
                    qi.FreeTensor(a);
                    b = qo.DeQue<float>();
                    DataCopy(out, b, per_block);
                    qo.FreeTensor(b);
                  }};
  const LaunchResult r = chip.run_kernel(spec);
  EXPECT_EQ(r.runs.size(), blocks);
  EXPECT_EQ(r.cores_used, 4u);
  // On every core, its second-wave block starts after its first-wave block ended.
  int checked = 0;
  for (const CoreRun& first : r.runs) {
    for (const CoreRun& second : r.runs) {
      if (first.core == second.core && first.block < 4 && second.block >= 4) {
        EXPECT_GE(second.start, first.end) << first.core;
        ++checked;
      }
    }
  }
  EXPECT_EQ(checked, 4);
  std::vector<float> y(x.size());
  chip.chip().memory().read(0x100000, y.data(), y.size() * 4);
  for (std::size_t i = 0; i < y.size(); ++i) ASSERT_EQ(y[i], x[i] * 3.0f) << i;
}

TEST(KernelApi, CoresAddEachBlocksPipeStatisticsToTheChipsStats) {
  const auto cfg = tiny();
  fw::Platform chip(cfg, hw::core::Mode::kTimingOnly);
  const std::uint64_t per_block = 512, blocks = 8;  // 4 AIV: two blocks each
  LaunchSpec spec{"copy", KernelType::kVector, static_cast<std::uint32_t>(blocks), [=] {
                    GlobalTensor<float> in, out;
                    in.SetGlobalBuffer(GetBlockIdx() * per_block * 4);
                    out.SetGlobalBuffer(0x100000 + GetBlockIdx() * per_block * 4);
                    TPipe pipe;
                    TQue<TPosition::VECIN, 1> q;
                    pipe.InitBuffer(q, 1, per_block * 4);
                    LocalTensor<float> a = q.AllocTensor<float>();
                    DataCopy(a, in, per_block);
                    q.EnQue(a);
                    a = q.DeQue<float>();
                    DataCopy(out, a, per_block);
                    q.FreeTensor(a);
                  }};
  const LaunchResult r = chip.run_kernel(spec);
  const traces::StatsRegistry& s = chip.chip().stats();
  std::uint64_t mte2 = 0, mte3 = 0;
  for (std::uint32_t c = 0; c < 4; ++c) {
    const std::string core = "chip.aiv" + std::to_string(c);
    EXPECT_EQ(s.count(core + ".blocks"), 2u) << core;
    mte2 += s.count(core + ".mte2.bytes");
    mte3 += s.count(core + ".mte3.bytes");
    // The same busy cycles and instructions the task's records give, summed over the core's blocks.
    std::uint64_t busy = 0, instructions = 0;
    for (const CoreRun& run : r.runs) {
      if (run.core != "aiv" + std::to_string(c)) continue;
      busy += run.pipes[static_cast<int>(hw::isa::Pipe::kMte2)].busy;
      instructions += run.pipes[static_cast<int>(hw::isa::Pipe::kMte2)].instructions;
    }
    EXPECT_EQ(s.count(core + ".mte2.busy_cycles"), busy) << core;
    EXPECT_EQ(s.count(core + ".mte2.instructions"), instructions) << core;
  }
  const std::uint64_t total = per_block * blocks * 4;
  EXPECT_EQ(mte2, total);
  EXPECT_EQ(mte3, total);
  EXPECT_EQ(s.count("chip.gm.read_bytes"), total);
  EXPECT_EQ(s.count("chip.gm.write_bytes"), total);
  EXPECT_EQ(s.count("chip.aic0.blocks"), 0u);  // a vector kernel leaves the AIC idle
}

TEST(KernelApi, ScalarAccessAfterAVectorToScalarFlag) {
  const auto cfg = tiny();
  fw::Platform chip(cfg, hw::core::Mode::kFunctional);
  float seen = 0;
  LaunchSpec spec{"scalar", KernelType::kVector, 1, [&] {
                    TPipe pipe;
                    TBuf<TPosition::VECCALC> buf;
                    pipe.InitBuffer(buf, 1024);
                    LocalTensor<float> t = buf.Get<float>();
                    t.SetValue(3, 2.0f);
                    SetFlag<HardEvent::S_V>(0);
                    WaitFlag<HardEvent::S_V>(0);
                    Muls(t, t, 4.0f, 64);
                    SetFlag<HardEvent::V_S>(0);
                    WaitFlag<HardEvent::V_S>(0);
                    seen = t.GetValue(3);
                  }};
  chip.run_kernel(spec);
  EXPECT_EQ(seen, 8.0f);
}

TEST(KernelApi, BufferThatDoesNotFitNamesTheSpace) {
  const auto cfg = tiny();
  fw::Platform chip(cfg, hw::core::Mode::kTimingOnly);
  LaunchSpec spec{"too_big", KernelType::kVector, 1, [] {
                    TPipe pipe;
                    TQue<TPosition::VECIN, 2> q;
                    pipe.InitBuffer(q, 2, 20 * 1024);
                  }};
  const std::string msg = launch_error(chip, spec);
  EXPECT_NE(msg.find("TPipe::InitBuffer"), std::string::npos) << msg;
  EXPECT_NE(msg.find("in UB does not fit"), std::string::npos) << msg;
}

TEST(KernelApi, PaddedCopiesAndCountFormTailsOnOddSizes) {
  const auto cfg = tiny();
  fw::Platform chip(cfg, hw::core::Mode::kFunctional);
  const std::uint32_t rows = 3, cols = 37;  // 74 B per row: not whole 32 B blocks
  std::vector<half> x(rows * cols);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = hw::isa::to_half(static_cast<float>(i) - 50.0f);
  chip.chip().memory().write(0, x.data(), x.size() * 2);
  LaunchSpec spec{"pad", KernelType::kVector, 1, [&] {
                    GlobalTensor<half> in, out;
                    in.SetGlobalBuffer(0);
                    out.SetGlobalBuffer(0x10000);
                    TPipe pipe;
                    TBuf<TPosition::VECCALC> a, f, g, mask;
                    pipe.InitBuffer(a, 4096);
                    pipe.InitBuffer(f, 8192);
                    pipe.InitBuffer(g, 4096);
                    pipe.InitBuffer(mask, 256);
                    LocalTensor<half> la = a.Get<half>(), lg = g.Get<half>();
                    LocalTensor<float> lf = f.Get<float>();
                    // Each 74 B row lands in a 96 B (32 B-aligned) UB row: 37 elements + 11 pad elements.
                    DataCopyPad(la, in, DataCopyExtParams{static_cast<std::uint16_t>(rows), cols * 2, 0, 0},
                                DataCopyPadExtParams<half>{true, 0, 11, hw::isa::to_half(-1.0f)});
                    SetFlag<HardEvent::MTE2_V>(0);
                    WaitFlag<HardEvent::MTE2_V>(0);
                    const std::uint64_t n = rows * 48;  // 144 elements: a full repeat and a masked tail
                    Cast(lf, la, RoundMode::CAST_NONE, n);
                    Muls(lf, lf, 2.0f, n);
                    Cast(lg, lf, RoundMode::CAST_RINT, n);
                    // Compare's count form takes whole 32 B blocks of bit mask: 256 elements.
                    Compare(mask.Get<std::uint8_t>(), lg, la, CMPMODE::GT, 256);
                    Select(lg, mask.Get<std::uint8_t>(), lg, la, 256);  // max(2x, x)
                    SetFlag<HardEvent::V_MTE3>(0);
                    WaitFlag<HardEvent::V_MTE3>(0);
                    DataCopyPad(out, lg, DataCopyExtParams{static_cast<std::uint16_t>(rows), cols * 2, 0, 0});
                  }};
  chip.run_kernel(spec);
  std::vector<half> y(rows * cols);
  chip.chip().memory().read(0x10000, y.data(), y.size() * 2);
  for (std::size_t i = 0; i < y.size(); ++i) {
    const float v = hw::isa::to_float(x[i]);
    ASSERT_EQ(hw::isa::to_float(y[i]), std::max(2 * v, v)) << i;
  }
}

TEST(KernelApi, CoupledCoreMovesL0cToUb) {
  const auto cfg = config::load_config("910", {}).chip;
  fw::Platform chip(cfg, hw::core::Mode::kFunctional);
  float first = 0;
  LaunchSpec spec{"l0c_to_ub", KernelType::kMix, 1, [&] {
                    TPipe pipe;
                    TBuf<TPosition::A2> a;
                    TBuf<TPosition::B2> b;
                    TBuf<TPosition::CO1> c;
                    TBuf<TPosition::VECCALC> u;
                    pipe.InitBuffer(a, 512);
                    pipe.InitBuffer(b, 512);
                    pipe.InitBuffer(c, 1024);
                    pipe.InitBuffer(u, 1024);
                    LocalTensor<half> la = a.Get<half>(), lb = b.Get<half>();
                    for (int i = 0; i < 16; ++i) {
                      la.SetValue(i * 16 + i, hw::isa::to_half(1.0f));   // A = I
                      lb.SetValue(i * 16 + i, hw::isa::to_half(3.0f));   // B = 3 I
                    }
                    Mmad(c.Get<float>(), la, lb, MmadParams{16, 16, 16, true});
                    SetFlag<HardEvent::M_V>(0);
                    WaitFlag<HardEvent::M_V>(0);
                    DataCopy(u.Get<float>(), c.Get<float>(), 256);
                    SetFlag<HardEvent::V_S>(0);
                    WaitFlag<HardEvent::V_S>(0);
                    first = u.Get<float>().GetValue(0);
                  }};
  chip.run_kernel(spec);
  EXPECT_EQ(first, 3.0f);
}

}  // namespace
}  // namespace npusim::fw::kernel
