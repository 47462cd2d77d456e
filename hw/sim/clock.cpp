#include "hw/sim/clock.hpp"

namespace npusim::hw {

Clock::Clock(double hz) : hz_(hz) {
  if (!(hz > 0.0)) throw std::invalid_argument("clock frequency must be positive");
  period_ = sc_core::sc_time(1e12 / hz, sc_core::SC_PS);
}

// Both are whole numbers of resolution units, so integer division is exact.
std::uint64_t Clock::to_cycles(const sc_core::sc_time& t) const { return t.value() / period_.value(); }

std::uint64_t Clock::to_cycles_ceil(const sc_core::sc_time& t) const {
  return (t.value() + period_.value() - 1) / period_.value();
}

}  // namespace npusim::hw
