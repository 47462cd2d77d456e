// The runtime, driver rings and task-scheduler firmware on the chip: stream order and events decide results,
// waves, copy/compute overlap across streams, host overheads on the timeline. One simulation per test process.
#include <gtest/gtest.h>

#include <cmath>
#include <set>
#include <vector>

#include "common/config/loader.hpp"
#include "common/util/error.hpp"
#include "firmware/kernel/kernel_api.hpp"
#include "stack/runtime/runtime.hpp"

namespace npusim::stack::runtime {
namespace {

using namespace fw::kernel;

config::ChipConfig tiny() {
  return config::load_config("tiny", {}).chip;
}

// The device path of one empty kernel task: dispatch + core start-up + kernel init + completion (keys launch.*).
double launch_path(const config::ChipConfig& cfg) {
  return cfg.launch.dispatch + cfg.launch.core_startup + cfg.launch.kernel_init + cfg.launch.completion;
}

// y = x * a + b over n floats, one block per 256 elements.
std::function<void()> axpb(std::uint64_t x, std::uint64_t y, std::uint32_t n, float a, float b) {
  return [=] {
    const std::uint32_t per = n / GetBlockNum(), off = GetBlockIdx() * per;
    GlobalTensor<float> gx, gy;
    gx.SetGlobalBuffer(x + off * 4);
    gy.SetGlobalBuffer(y + off * 4);
    TPipe pipe;
    TBuf<TPosition::VECCALC> buf;
    pipe.InitBuffer(buf, per * 4);
    LocalTensor<float> t = buf.Get<float>();
    DataCopy(t, gx, per);
    SetFlag<HardEvent::MTE2_V>(0);
    WaitFlag<HardEvent::MTE2_V>(0);
    Muls(t, t, a, per);
    Adds(t, t, b, per);
    SetFlag<HardEvent::V_MTE3>(0);
    WaitFlag<HardEvent::V_MTE3>(0);
    DataCopy(gy, t, per);
  };
}

const fw::ts::TaskRecord* find(const Device& dev, const std::string& name) {
  for (const auto& t : dev.tasks())
    if (t.name == name) return &t;
  return nullptr;
}

TEST(Runtime, StreamOrderAndEventsDecideTheResults) {
  Device dev(tiny(), hw::core::Mode::kFunctional);
  const std::uint32_t n = 1024;
  std::vector<float> x(n), out(n);
  for (std::uint32_t i = 0; i < n; ++i) x[i] = static_cast<float>(i);
  dev.run([&](Device& d) {
    const std::uint64_t dx = d.malloc(n * 4), dy = d.malloc(n * 4), dz = d.malloc(n * 4);
    Stream copy = d.create_stream(), compute = d.create_stream();
    Event in = d.create_event(), mid = d.create_event();
    d.memcpy_async(dx, x.data(), n * 4, copy);
    d.record(in, copy);
    d.wait(in, compute);  // x is on the device
    d.launch("scale", KernelType::kVector, 4, axpb(dx, dy, n, 2.0f, 0.0f), compute);
    d.launch("shift", KernelType::kVector, 4, axpb(dy, dz, n, 1.0f, 1.0f), compute);  // stream order: after scale
    d.record(mid, compute);
    d.wait(mid, copy);
    d.memcpy_async(out.data(), dz, n * 4, copy);
    d.synchronize();
  });
  for (std::uint32_t i = 0; i < n; ++i) ASSERT_EQ(out[i], 2.0f * static_cast<float>(i) + 1.0f) << i;
  const auto* scale = find(dev, "scale");
  const auto* shift = find(dev, "shift");
  const auto* h2d = find(dev, "memcpy H2D");
  ASSERT_TRUE(scale && shift && h2d);
  EXPECT_GE(scale->start_ns, h2d->end_ns);
  EXPECT_GE(shift->start_ns, scale->end_ns);
}

TEST(Runtime, BlocksBeyondTheCoresRunInWaves) {
  Device dev(tiny(), hw::core::Mode::kTimingOnly);
  dev.run([&](Device& d) {
    const std::uint64_t dx = d.malloc(1 << 16), dy = d.malloc(1 << 16);
    Stream s = d.create_stream();
    d.launch("waves", KernelType::kVector, 8, axpb(dx, dy, 8 * 1024, 1.0f, 0.0f), s);  // tiny has 4 AIV
    d.synchronize();
  });
  const auto* t = find(dev, "waves");
  ASSERT_TRUE(t);
  EXPECT_EQ(t->waves, 2u);
  ASSERT_EQ(t->runs.size(), 8u);
  // On every core the second block starts after the first one ended.
  for (const auto& a : t->runs) {
    for (const auto& b : t->runs) {
      if (a.core == b.core && a.block < b.block) {
        EXPECT_GE(b.start, a.end);
      }
    }
  }
}

TEST(Runtime, CopiesOnOneStreamOverlapComputeOnAnother) {
  Device dev(tiny(), hw::core::Mode::kTimingOnly);
  dev.run([&](Device& d) {
    const std::uint64_t big = d.malloc(8 << 20), dx = d.malloc(1 << 16), dy = d.malloc(1 << 16);
    static std::vector<std::uint8_t> host(8 << 20);
    Stream a = d.create_stream(), b = d.create_stream();
    d.memcpy_async(big, host.data(), host.size(), a);  // 8 MiB over a 32 GB/s link: ~260 us
    for (int i = 0; i < 4; ++i)
      d.launch("k" + std::to_string(i), KernelType::kVector, 4, axpb(dx, dy, 4096, 1.0f, 0.0f), b);
    d.synchronize();
  });
  const auto* copy = find(dev, "memcpy H2D");
  const auto* k3 = find(dev, "k3");
  ASSERT_TRUE(copy && k3);
  // 8 MiB at host_link.bandwidth plus its latency.
  const auto cfg = tiny();
  EXPECT_NEAR(copy->end_ns - copy->start_ns, cfg.host_link.latency + (8 << 20) / cfg.host_link.bandwidth * 1e9, 1.0);
  EXPECT_LT(k3->end_ns, copy->end_ns);  // all four kernels ran while the copy was in flight
}

TEST(Runtime, HostOverheadsAndLaunchLatenciesAreOnTheTimeline) {
  const auto cfg = tiny();
  Device dev(cfg, hw::core::Mode::kTimingOnly);
  double host_after_launch = 0;
  dev.run([&](Device& d) {
    Stream s = d.create_stream();
    d.launch(
        "empty", KernelType::kVector, 1, [] {}, s);
    host_after_launch = d.now_ns();
    d.synchronize();
  });
  EXPECT_DOUBLE_EQ(host_after_launch, cfg.host.launch_overhead);
  const auto* t = find(dev, "empty");
  ASSERT_TRUE(t);
  ASSERT_EQ(t->runs.size(), 1u);
  // The block starts dispatch after the scheduler took the task; its body starts after start-up and init.
  const double core_start_ns = static_cast<double>(t->runs[0].start) / cfg.clock.core_hz * 1e9;
  EXPECT_NEAR(core_start_ns, cfg.host.launch_overhead + cfg.launch.dispatch, 1.0);
  // The empty kernel spends core_startup + kernel_init (scalar time), then completion is reported.
  EXPECT_NEAR(t->end_ns, core_start_ns + cfg.launch.core_startup + cfg.launch.kernel_init + cfg.launch.completion, 2.0);
}

TEST(Runtime, WaitingOnAnUnrecordedEventIsAClearError) {
  Device dev(tiny(), hw::core::Mode::kTimingOnly);
  try {
    dev.run([&](Device& d) {
      d.create_stream();
      Stream s = d.create_stream();
      Event never = d.create_event();
      d.wait(never, s);  // nobody records it
      d.synchronize();
    });
    FAIL();
  } catch (const hw::core::KernelError& e) {
    EXPECT_NE(std::string(e.what()).find("stream 1 waits for event 0, which is never recorded"), std::string::npos)
        << e.what();
  }
}

TEST(Runtime, MemoryAndStreamMisuseAreClearErrors) {
  Device dev(tiny(), hw::core::Mode::kTimingOnly);
  std::vector<std::string> errors;
  auto expect_error = [&](const std::function<void()>& f) {
    try {
      f();
      errors.push_back("(no error)");
    } catch (const InputError& e) {
      errors.push_back(e.what());
    }
  };
  dev.run([&](Device& d) {
    expect_error([&] { d.malloc(2ULL << 30); });  // tiny has 1 GiB
    const std::uint64_t p = d.malloc(4096);
    d.free(p);
    expect_error([&] { d.free(p); });
    Stream s = d.create_stream();
    d.destroy_stream(s);
    expect_error([&] {
      d.launch(
          "late", KernelType::kVector, 1, [] {}, s);
    });
  });
  ASSERT_EQ(errors.size(), 3u);
  EXPECT_NE(errors[0].find("out of device memory: cannot allocate 2147483648 B"), std::string::npos) << errors[0];
  EXPECT_NE(errors[1].find("not a live allocation (double free"), std::string::npos) << errors[1];
  EXPECT_NE(errors[2].find("launch late: stream 0 was destroyed"), std::string::npos) << errors[2];
}

TEST(Runtime, HundredTinyLaunchesCostAHundredLaunchPaths) {
  // Host-bound: each launch call costs host.launch_overhead; the device path (dispatch, start-up, init,
  // completion, 1.7 us) hides under it.
  const auto cfg = tiny();
  Device dev(cfg, hw::core::Mode::kTimingOnly);
  double end = 0;
  dev.run([&](Device& d) {
    Stream s = d.create_stream();
    for (int i = 0; i < 100; ++i)
      d.launch(
          "tiny", KernelType::kVector, 1, [] {}, s);
    d.synchronize();
    end = d.now_ns();
  });
  const double device_path = launch_path(cfg);
  const double last_done = dev.tasks().back().end_ns;
  EXPECT_NEAR(last_done, 100 * cfg.host.launch_overhead + device_path, 0.02 * 100 * cfg.host.launch_overhead);
  EXPECT_GT(end, last_done);
}

TEST(Runtime, WithoutHostOverheadTinyLaunchesCostTheDevicePath) {
  const auto cfg = config::load_config("tiny", {"host.launch_overhead=0ns"}).chip;
  Device dev(cfg, hw::core::Mode::kTimingOnly);
  dev.run([&](Device& d) {
    Stream s = d.create_stream();
    for (int i = 0; i < 100; ++i)
      d.launch(
          "tiny", KernelType::kVector, 1, [] {}, s);
    d.synchronize();
  });
  // In one stream each launch waits for the previous completion: 100 x (dispatch + start-up + init + completion).
  const double device_path = launch_path(cfg);
  EXPECT_NEAR(dev.tasks().back().end_ns, 100 * device_path, 0.05 * 100 * device_path);
}

// Issue 23: more tasks than the completion ring has slots (256), with a host that does not wait until the end.
// The firmware holds completions back until the host drains the ring; the device is never delayed by it, so the
// host-bound formula of HundredTinyLaunchesCostAHundredLaunchPaths holds for 10,000 launches.
TEST(Runtime, TenThousandTasksOnOneStreamPastTheCompletionRing) {
  const auto cfg = tiny();
  Device dev(cfg, hw::core::Mode::kTimingOnly);
  dev.run([&](Device& d) {
    Stream s = d.create_stream();
    for (int i = 0; i < 10000; ++i)
      d.launch(
          "tiny", KernelType::kVector, 1, [] {}, s);
    d.synchronize();
  });
  ASSERT_EQ(dev.tasks().size(), 10000u);
  const double device_path = launch_path(cfg);
  EXPECT_NEAR(dev.tasks().back().end_ns, 10000 * cfg.host.launch_overhead + device_path,
              0.02 * 10000 * cfg.host.launch_overhead);
  EXPECT_EQ(dev.chip().stats().count("chip.ts.kernels"), 10000u);
  EXPECT_EQ(dev.chip().stats().count("chip.ts.blocks_dispatched"), 10000u);
  // The host drains only at the end: every completion past the ring's slots waited for room.
  EXPECT_EQ(dev.chip().stats().count("chip.ts.completions_waited"), 10000u - fw::Platform::kRingEntries);
}

// Four streams and events between them, the submission rings never full (no host overhead, the device drains
// them): 10,000 tasks complete, and each stream's chain of launches takes its device paths one after another.
TEST(Runtime, TenThousandTasksOnFourStreamsWithEvents) {
  const auto cfg = config::load_config("tiny", {"host.launch_overhead=0ns", "host.event_overhead=0ns"}).chip;
  Device dev(cfg, hw::core::Mode::kTimingOnly);
  dev.run([&](Device& d) {
    std::vector<Stream> s(4);
    for (Stream& st : s) st = d.create_stream();
    for (int i = 0; i < 2400; ++i)
      for (int k = 0; k < 4; ++k)
        d.launch(
            "tiny", KernelType::kVector, 1, [] {}, s[static_cast<std::size_t>(k)]);
    for (int k = 1; k < 4; ++k) {  // streams 1..3 wait for stream 0's work
      const Event e = d.create_event();
      d.record(e, s[0]);
      d.wait(e, s[static_cast<std::size_t>(k)]);
    }
    for (int i = 0; i < 100; ++i)
      for (int k = 0; k < 4; ++k)
        d.launch(
            "tail", KernelType::kVector, 1, [] {}, s[static_cast<std::size_t>(k)]);
    d.synchronize();
  });
  ASSERT_EQ(dev.tasks().size(), 10000u + 6u);
  const double device_path = launch_path(cfg);
  double last = 0;
  for (const auto& t : dev.tasks()) last = std::max(last, t.end_ns);
  // tiny has 4 vector cores: the streams run side by side, 2,500 launches each.
  EXPECT_NEAR(last, 2500 * device_path, 0.05 * 2500 * device_path);
}

TEST(Runtime, MixedKernelsTakeCubeVectorGroupsAndVectorKernelsAllVectorCores) {
  const auto cfg = tiny();  // 2 AIC + 4 AIV
  Device dev(cfg, hw::core::Mode::kTimingOnly);
  dev.run([&](Device& d) {
    Stream s = d.create_stream();
    d.launch(
        "mix", KernelType::kMix, 2, [] {}, s);
    d.launch(
        "vec", KernelType::kVector, 4, [] {}, s);
    d.synchronize();
  });
  std::set<std::string> mix, vec;
  for (const auto& t : dev.tasks()) {
    for (const auto& r : t.runs) (t.name == "mix" ? mix : vec).insert(r.core + "/" + std::to_string(r.block));
  }
  EXPECT_EQ(mix, (std::set<std::string>{"aic0/0", "aiv0/0", "aiv1/0", "aic1/1", "aiv2/1", "aiv3/1"}));
  EXPECT_EQ(vec, (std::set<std::string>{"aiv0/0", "aiv1/1", "aiv2/2", "aiv3/3"}));
}

TEST(Runtime, EventsTimeTheDeviceAndTheHostLearnsByInterruptOrPolling) {
  const auto cfg = config::load_config("tiny", {"driver.completion=interrupt", "driver.interrupt_latency=3us"}).chip;
  Device dev(cfg, hw::core::Mode::kTimingOnly);
  double elapsed = 0, host_after_sync = 0, copy_end = 0;
  bool early = true, late = false;
  static std::vector<std::uint8_t> host(1 << 20);
  dev.run([&](Device& d) {
    const std::uint64_t buf = d.malloc(host.size());
    Stream s = d.create_stream();
    Event a = d.create_event(), b = d.create_event();
    d.record(a, s);
    d.memcpy_async(buf, host.data(), host.size(), s);
    d.record(b, s);
    early = d.query(b);
    d.synchronize(b);
    host_after_sync = d.now_ns();
    late = d.query(b);
    elapsed = d.elapsed_ms(a, b);
  });
  for (const auto& t : dev.tasks())
    if (t.name == "memcpy H2D") copy_end = t.end_ns;
  EXPECT_FALSE(early);
  EXPECT_TRUE(late);
  // a..b spans the host's memcpy call (the device waits for the submission) and the copy: 1 MiB over the host
  // link plus its latency.
  EXPECT_NEAR(elapsed * 1e6,
              cfg.host.memcpy_overhead + cfg.host_link.latency + (1 << 20) / cfg.host_link.bandwidth * 1e9, 1e-3);
  // The host wakes interrupt_latency after the completion of b.
  EXPECT_GE(host_after_sync, copy_end + 3000.0);
}

TEST(Runtime, PollingFindsCompletionsAtThePollInterval) {
  const auto cfg = config::load_config("tiny", {"driver.completion=poll", "driver.poll_interval=10us"}).chip;
  Device dev(cfg, hw::core::Mode::kTimingOnly);
  double host_after_sync = 0;
  dev.run([&](Device& d) {
    Stream s = d.create_stream();
    d.launch(
        "empty", KernelType::kVector, 1, [] {}, s);
    d.synchronize();
    host_after_sync = d.now_ns();
  });
  const double done = dev.tasks().front().end_ns;
  // synchronize starts at launch_overhead + sync_overhead and reads the ring every 10 us.
  const double first_poll = cfg.host.launch_overhead + cfg.host.sync_overhead;
  const double polls = std::ceil((done - first_poll) / 10000.0);
  EXPECT_NEAR(host_after_sync, first_poll + polls * 10000.0, 1e-6);
}

TEST(Runtime, HighPriorityStreamsAreServedFirst) {
  Device dev(tiny(), hw::core::Mode::kTimingOnly);
  dev.run([&](Device& d) {
    const std::uint64_t dx = d.malloc(1 << 16), dy = d.malloc(1 << 16);
    Stream low = d.create_stream(), high = d.create_stream(Priority::kHigh);
    Event go = d.create_event();
    Stream gate = d.create_stream();
    // Both streams wait for one event, then each has a kernel that needs all 4 AIV.
    d.wait(go, low);
    d.wait(go, high);
    d.launch("low", KernelType::kVector, 4, axpb(dx, dy, 4096, 1.0f, 0.0f), low);
    d.launch("high", KernelType::kVector, 4, axpb(dx, dy, 4096, 1.0f, 0.0f), high);
    d.record(go, gate);
    d.synchronize();
  });
  const auto* low = find(dev, "low");
  const auto* high = find(dev, "high");
  ASSERT_TRUE(low && high);
  EXPECT_LE(high->start_ns, low->start_ns);
}

}  // namespace
}  // namespace npusim::stack::runtime

namespace npusim::stack::runtime {
namespace {

// launch.dispatch_order with two kernels of two waves each (tiny: 4 AIV) on two streams, the second submitted
// while the first's first wave runs. Each block is 20,000 cycles of scalar work, far longer than the host's launch
// overhead, so B is waiting when A's first wave ends: under fifo A's second wave takes the freed cores and B's first
// block starts only after every block of A has started; under fair the freed cores go to the kernel running fewer
// blocks, so B's blocks interleave with A's second wave and some of A's blocks start after B's first.
std::pair<std::uint64_t, std::uint64_t> a_blocks_after_b(const std::string& order) {
  const auto cfg = config::load_config("tiny", {"launch.dispatch_order=" + order}).chip;
  Device dev(cfg, hw::core::Mode::kTimingOnly);
  dev.run([&](Device& d) {
    const Stream s1 = d.create_stream(), s2 = d.create_stream();
    d.launch(
        "A", KernelType::kVector, 8, [] { fw::kernel::ScalarWork(20000); }, s1);
    d.launch(
        "B", KernelType::kVector, 8, [] { fw::kernel::ScalarWork(20000); }, s2);
    d.synchronize();
  });
  const auto& t = dev.tasks();
  EXPECT_EQ(t.size(), 2u);
  std::uint64_t b_first = UINT64_MAX;
  for (const auto& r : t[1].runs) b_first = std::min(b_first, r.start);
  std::uint64_t after = 0;
  for (const auto& r : t[0].runs) after += r.start > b_first;
  return {after, t[0].runs.size()};
}

TEST(Runtime, FifoDispatchRunsTheOlderKernelsWavesFirst) {
  const auto [after, blocks] = a_blocks_after_b("fifo");
  EXPECT_EQ(blocks, 8u);
  EXPECT_EQ(after, 0u);
}

TEST(Runtime, FairDispatchSharesTheCoresBetweenKernels) {
  const auto [after, blocks] = a_blocks_after_b("fair");
  EXPECT_EQ(blocks, 8u);
  // The four cores freed together by A's first wave go A, B, A, B (ties to the older kernel); A's last two blocks
  // start when those end, after B's first.
  EXPECT_EQ(after, 2u);
}

TEST(Runtime, AnUnknownDispatchOrderIsRefusedByTheConfig) {
  EXPECT_THROW(config::load_config("tiny", {"launch.dispatch_order=lifo"}), InputError);
}

}  // namespace
}  // namespace npusim::stack::runtime
