// The one place where integer cycles become SystemC time (DESIGN.md, "Timing model"). Units compute durations as
// integer cycles of their clock; only this class converts them to sc_time.
#pragma once

#include <systemc>

#include <cstdint>
#include <stdexcept>

namespace npusim::hw {

class Clock {
 public:
  // Throws std::invalid_argument for a non-positive frequency.
  explicit Clock(double hz);

  double hz() const { return hz_; }
  // Duration of n cycles. The period is rounded to the SystemC time resolution (1 ps by default), once.
  sc_core::sc_time cycles(std::uint64_t n) const { return sc_core::sc_time::from_value(period_.value() * n); }
  // Whole cycles elapsed at time t (rounded down), e.g. for reports.
  std::uint64_t to_cycles(const sc_core::sc_time& t) const;
  // Cycles elapsed at time t, rounded up: the first cycle edge at or after t.
  std::uint64_t to_cycles_ceil(const sc_core::sc_time& t) const;
  const sc_core::sc_time& period() const { return period_; }

 private:
  double hz_;
  sc_core::sc_time period_;
};

}  // namespace npusim::hw
