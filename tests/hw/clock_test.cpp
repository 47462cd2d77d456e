// Cycles to SystemC time and back, and that simulated time advances by exactly the converted amount.
#include "hw/sim/clock.hpp"

#include <gtest/gtest.h>

namespace npusim::hw {
namespace {

TEST(Clock, PeriodFromFrequency) {
  EXPECT_EQ(Clock(1e9).period(), sc_core::sc_time(1000, sc_core::SC_PS));
  EXPECT_EQ(Clock(1.8e9).period(), sc_core::sc_time(556, sc_core::SC_PS));  // 555.6 ps rounded to 1 ps
  EXPECT_THROW(Clock(0.0), std::invalid_argument);
}

TEST(Clock, RoundTrip) {
  Clock c(1e9);
  EXPECT_EQ(c.cycles(150), sc_core::sc_time(150, sc_core::SC_NS));
  EXPECT_EQ(c.to_cycles(sc_core::sc_time(150, sc_core::SC_NS)), 150u);
  EXPECT_EQ(c.to_cycles(sc_core::sc_time(150.5, sc_core::SC_NS)), 150u);
  EXPECT_EQ(c.to_cycles_ceil(sc_core::sc_time(150.5, sc_core::SC_NS)), 151u);
  EXPECT_EQ(c.to_cycles_ceil(sc_core::sc_time(150, sc_core::SC_NS)), 150u);
  // Long spans stay exact: 2x10^13 cycles at 556 ps is past 2^53 ps, where a double product would round.
  Clock f(1.8e9);
  const std::uint64_t n = 20'000'000'000'123ull;
  EXPECT_EQ(f.cycles(n).value(), 556ull * n);
  EXPECT_EQ(f.to_cycles(f.cycles(n)), n);
}

// A thread that waits n cycles ends at exactly n periods of simulated time.
SC_MODULE(Waiter) {
  const Clock* clock = nullptr;
  sc_core::sc_time finished;
  void run() {
    wait(clock->cycles(1234));
    finished = sc_core::sc_time_stamp();
  }
  SC_CTOR(Waiter) { SC_THREAD(run); }
};

TEST(Clock, DrivesSimulatedTime) {
  Clock c(2e9);
  Waiter w("waiter");
  w.clock = &c;
  sc_core::sc_start();
  EXPECT_EQ(w.finished, sc_core::sc_time(617, sc_core::SC_NS));
  EXPECT_EQ(c.to_cycles(w.finished), 1234u);
}

}  // namespace
}  // namespace npusim::hw
