// The per-instruction cost formulas of the AI core, in cycles of clock.core. Pure arithmetic over the chip config,
// so tests check them exactly without SystemC; the pipe models call these and wait the result once.
#pragma once

#include <cstdint>

#include "common/config/chip_config.hpp"
#include "hw/isa/instr.hpp"

namespace npusim::hw::core {

// Cube: an m x k x n Mmad runs ceil(m/M0) x ceil(n/N0) x ceil(k/K0) fractal steps of `cycles` each, plus the
// pipeline fill once.  Keys: cube.<dtype>.{m,k,n,cycles}, cube.latency.
std::uint64_t mmad_cycles(const config::CubeParams& cube, const config::FractalParams& fractal, std::uint64_t m,
                          std::uint64_t k, std::uint64_t n);

// Vector: latency + ceil(cycles_per_repeat x repeats x 256 / bytes_per_repeat) - 1. An instruction's repeat covers
// 256 B (isa::kRepeatBytes); the Vector unit's datapath takes vector.bytes_per_repeat bytes of it every
// vector.cycles_per_repeat cycles, so at the 910B's 256 B this is the vendor cost model's `latency + 2*repeats - 1`
// (vector.cycles_per_repeat = 2), and a datapath twice as wide halves the repeats' part. Zero repeats issue nothing
// and cost nothing. Keys: vector.latency.<op>, vector.cycles_per_repeat, vector.bytes_per_repeat.
std::uint64_t vector_cycles(const config::VectorParams& vec, std::uint64_t op_latency, std::uint64_t repeats);

// The repeats' part of that formula: ceil(cycles_per_repeat x repeats x 256 / bytes_per_repeat).
std::uint64_t vector_datapath_cycles(const config::VectorParams& vec, std::uint64_t repeats);

// Copy path: setup_cycles + ceil(bytes / bytes_per_cycle). Keys: mte.<path>.{setup_cycles,bytes_per_cycle},
// fixpipe.{setup_cycles,bytes_per_cycle}.
std::uint64_t copy_cycles(const config::PathParams& path, std::uint64_t bytes);

// Scalar unit: cycles_per_instruction per issued instruction. Key: scalar.cycles_per_instruction.
inline std::uint64_t scalar_cycles(const config::ScalarParams& s, std::uint64_t instructions) {
  return s.cycles_per_instruction * instructions;
}

// The per-op latency key of a vector instruction: vector.latency.<op> (Cast: cast, reductions: reduce, ...).
std::uint64_t vector_op_latency(const config::VectorLatencies& lat, isa::Op op);

// UB bank conflicts (vector.bank_conflicts, on by default): a bank group serves one 32 B block read and one block
// write per cycle, and a bank one of the two. The block at UB address a sits in group (a / vector.block_bytes) %
// buffers.ub.bank_groups, and in that group's bank (a / (bank_groups x bank_bytes)) % (banks / bank_groups). A
// repeat then needs at least max(most block reads in one group, most block writes in one group, most reads plus
// writes in one bank) cycles, each distinct block counted once (a block read by several lanes or operands, as a
// broadcast with block stride 0, is one access), evaluated on the instruction's first repeat (strides repeat the
// pattern); the repeats take the larger of that times the repeats and vector_datapath_cycles. Returns 0 when off.
std::uint64_t vector_bank_cycles_per_repeat(const config::ChipConfig& cfg, const isa::Instr& in);

// The copy path an instruction moves its data over (mte.<path> or fixpipe), or null for non-copies.
const config::PathParams* copy_path(const config::ChipConfig& cfg, const isa::Instr& in);

// What an instruction costs its pipe. `cycles` is the occupancy from the formulas above; a GM access additionally
// waits for the GM port (the pipe is busy until the port accepted the last byte) and its data is done when the port
// says so. The GM transfer starts `setup` cycles into the instruction.
struct InstrCost {
  std::uint64_t cycles = 0;
  std::uint64_t bank_cycles = 0;  // of `cycles`, what UB bank conflicts added (vector instructions)
  std::uint64_t setup = 0;
  bool gm = false;
  bool gm_write = false;
  std::uint64_t gm_addr = 0;
  std::uint64_t gm_bytes = 0;
};
InstrCost instr_cost(const config::ChipConfig& cfg, const isa::Instr& in);

}  // namespace npusim::hw::core
