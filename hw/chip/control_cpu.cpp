#include "hw/chip/control_cpu.hpp"

namespace npusim::hw::chip {

ControlCpu::ControlCpu(sc_core::sc_module_name name, double hz) : sc_core::sc_module(name), clock_(hz) {
  SC_HAS_PROCESS(ControlCpu);
  SC_THREAD(run);
}

void ControlCpu::start(Program program) {
  program_ = std::move(program);
  running_ = pending_ = true;
  start_.notify(sc_core::SC_ZERO_TIME);
}

void ControlCpu::run() {
  for (;;) {
    while (!pending_) wait(start_);  // a start before the simulation began is not lost
    pending_ = false;
    try {
      program_(*this);
    } catch (const sc_core::sc_unwind_exception&) {
      throw;
    } catch (...) {
      error_ = std::current_exception();
      sc_core::sc_stop();
    }
    running_ = false;
  }
}

}  // namespace npusim::hw::chip
