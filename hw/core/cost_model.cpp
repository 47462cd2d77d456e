#include "hw/core/cost_model.hpp"

#include <cmath>

namespace npusim::hw::core {
namespace {
std::uint64_t ceil_div(std::uint64_t a, std::uint64_t b) { return (a + b - 1) / b; }
}  // namespace

std::uint64_t mmad_cycles(const config::CubeParams& cube, const config::FractalParams& f, std::uint64_t m,
                          std::uint64_t k, std::uint64_t n) {
  if (m == 0 || k == 0 || n == 0) return 0;
  return ceil_div(m, f.m) * ceil_div(n, f.n) * ceil_div(k, f.k) * f.cycles + cube.latency;
}

std::uint64_t vector_cycles(const config::VectorParams& vec, std::uint64_t op_latency, std::uint64_t repeats) {
  if (repeats == 0) return 0;
  return op_latency + vec.cycles_per_repeat * repeats - 1;
}

std::uint64_t copy_cycles(const config::PathParams& path, std::uint64_t bytes) {
  if (bytes == 0) return 0;
  // A fractional rate (e.g. 86 B/cycle) still moves whole bytes: the last cycle is partly used.
  return path.setup_cycles + static_cast<std::uint64_t>(std::ceil(static_cast<double>(bytes) / path.bytes_per_cycle));
}

}  // namespace npusim::hw::core
