// The per-instruction cost formulas of the AI core, in cycles of clock.core. Pure arithmetic over the chip config,
// so tests check them exactly without SystemC; the pipe models call these and wait the result once.
#pragma once

#include <cstdint>

#include "common/config/chip_config.hpp"

namespace npusim::hw::core {

// Cube: an m x k x n Mmad runs ceil(m/M0) x ceil(n/N0) x ceil(k/K0) fractal steps of `cycles` each, plus the
// pipeline fill once.  Keys: cube.<dtype>.{m,k,n,cycles}, cube.latency.
std::uint64_t mmad_cycles(const config::CubeParams& cube, const config::FractalParams& fractal, std::uint64_t m,
                          std::uint64_t k, std::uint64_t n);

// Vector: latency + cycles_per_repeat x repeats - 1 (the vendor cost model's `latency + 2*repeats - 1` with
// vector.cycles_per_repeat = 2). Zero repeats issue nothing and cost nothing.
// Keys: vector.latency.<op>, vector.cycles_per_repeat.
std::uint64_t vector_cycles(const config::VectorParams& vec, std::uint64_t op_latency, std::uint64_t repeats);

// Copy path: setup_cycles + ceil(bytes / bytes_per_cycle). Keys: mte.<path>.{setup_cycles,bytes_per_cycle},
// fixpipe.{setup_cycles,bytes_per_cycle}.
std::uint64_t copy_cycles(const config::PathParams& path, std::uint64_t bytes);

// Scalar unit: cycles_per_instruction per issued instruction. Key: scalar.cycles_per_instruction.
inline std::uint64_t scalar_cycles(const config::ScalarParams& s, std::uint64_t instructions) {
  return s.cycles_per_instruction * instructions;
}

}  // namespace npusim::hw::core
