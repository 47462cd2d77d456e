#include "hw/sim/clock.hpp"

#include <cmath>

namespace npusim::hw {

Clock::Clock(double hz) : hz_(hz) {
  if (!(hz > 0.0)) throw std::invalid_argument("clock frequency must be positive");
  period_ = sc_core::sc_time(1e12 / hz, sc_core::SC_PS);
}

std::uint64_t Clock::to_cycles(const sc_core::sc_time& t) const {
  return static_cast<std::uint64_t>(std::floor(t.value() / static_cast<double>(period_.value()) + 1e-9));
}

std::uint64_t Clock::to_cycles_ceil(const sc_core::sc_time& t) const {
  return static_cast<std::uint64_t>(std::ceil(t.value() / static_cast<double>(period_.value()) - 1e-9));
}

}  // namespace npusim::hw
