// The control CPU's slot: where the task-scheduler firmware runs (the runtime issue puts it there). A SystemC
// thread that runs one program, on its own clock (clock.control_cpu); the program spends time with busy().
#pragma once

#include <systemc>

#include <exception>
#include <functional>

#include "hw/sim/clock.hpp"

namespace npusim::hw::chip {

class ControlCpu : public sc_core::sc_module {
 public:
  using Program = std::function<void(ControlCpu&)>;
  ControlCpu(sc_core::sc_module_name name, double hz);

  // Runs `program` from the current simulated time (call before or during simulation).
  void start(Program program);
  // Spends `cycles` of the control CPU (callable from the program only).
  void busy(std::uint64_t cycles) { wait(clock_.cycles(cycles)); }
  const Clock& clock() const { return clock_; }
  bool running() const { return running_; }
  std::exception_ptr error() const { return error_; }

 private:
  void run();
  Clock clock_;
  sc_core::sc_event start_;
  Program program_;
  bool running_ = false;
  bool pending_ = false;
  std::exception_ptr error_;
};

}  // namespace npusim::hw::chip
