// MatMul's host tiling (matmul_common.hpp): the buffer plans of a tiling and the search for the tile shape.
#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

#include "common/util/error.hpp"
#include "stack/ops/matmul/matmul_common.hpp"

namespace npusim::stack::ops::matmul {

MatmulBuffers matmul_buffers(const MatmulShape& s, const MatmulTiling& t, std::uint64_t es) {
  MatmulBuffers b;
  const std::uint64_t m = t.base_m, n = t.base_n;
  b.l1.add("a1", m * t.step_k * es, 2);
  b.l1.add("b1", t.step_k * n * es, 2);
  b.l0a.add("a2", m * t.base_k * es, 2);
  b.l0b.add("b2", t.base_k * n * es, 2);
  b.l0c.add("c", m * n * 4, t.l0c_buffers);
  if (t.bias_table) {
    b.l1.add("bias", ceil_to(n * es, 32));
    b.bias_table.add("bt", ceil_to(n * 4, 64));
  }
  if (t.vector_epilogue) {
    const std::uint64_t rows = t.epi_rows, row = ceil_to(n * es, 32), frow = ceil_to(n * 4, 32);
    b.ub.add("in", rows * row, 2);
    b.ub.add("out", rows * row, 2);
    for (const char* name : {"x", "a", "b", "c"}) b.ub.add(name, rows * frow);
    if (s.bias && !t.bias_table) {
      b.ub.add("bias", frow);
      b.ub.add("bias_t", ceil_to(n * es, 32));
    }
  }
  return b;
}

// Host tiling: the tile shape that minimises the estimated time (waves x per-tile time, the slower of the Cube
// and the GM feed), among those whose buffers fit the chip's L0A/L0B/L0C and L1.
MatmulTiling plan_tiling(const MatmulShape& s, std::uint64_t es, const config::ChipConfig& chip) {
  const auto& buf = chip.buffers;
  const std::uint64_t cores = chip.cube_cores();
  MatmulTiling best;
  double best_cost = 0;
  const std::uint32_t max_m = u32(ceil_to(s.M, 16)), max_n = u32(ceil_to(s.N, 16));
  for (std::uint32_t bm = 16; bm <= std::min<std::uint32_t>(max_m, 512); bm *= 2) {
    for (std::uint32_t bn = 16; bn <= std::min<std::uint32_t>(max_n, 512); bn *= 2) {
      const std::uint32_t m = std::min(bm, max_m), n = std::min(bn, max_n);
      if (m != bm && bm / 2 >= max_m) continue;  // clipped to the same size as a smaller candidate
      if (n != bn && bn / 2 >= max_n) continue;
      if (s.bias && buf.bias_table.size > 0 && n * 4ULL > buf.bias_table.size) continue;  // the bias row fits the table
      const std::uint64_t acc = static_cast<std::uint64_t>(m) * n * 4;
      if (acc > buf.l0c.size) continue;
      const std::uint32_t l0c_buffers = 2 * acc <= buf.l0c.size ? 2 : 1;
      // base_k: the largest multiple of 16 whose double buffers fit L0A and L0B.
      const std::uint64_t kmax = std::min(buf.l0a.size / (2 * m * es), buf.l0b.size / (2 * n * es));
      std::uint32_t k = u32(std::min<std::uint64_t>(kmax / 16 * 16, ceil_to(s.K, 16)));
      k = std::min<std::uint32_t>(k, 255 / std::max<std::uint32_t>(1, n / 16) * 16);  // one LoadData per L0B
      if (k < 16) continue;
      // step_k: as many base_k as the double-buffered A1/B1 (and a bias row) leave room for in L1.
      const std::uint64_t l1 = buf.l1.size - (s.bias ? ceil_to(n * es, 32) : 0);
      const std::uint64_t steps = l1 / (2 * (m + n) * es * k);
      if (steps == 0) continue;
      const std::uint32_t step = u32(std::min<std::uint64_t>(steps * k, ceil_to(s.K, k)));
      const std::uint64_t tiles = static_cast<std::uint64_t>(s.batch) * ceil_div(s.M, m) * ceil_div(s.N, n);
      const double waves = std::ceil(static_cast<double>(tiles) / static_cast<double>(cores));
      const double cube = static_cast<double>(ceil_div(m, 16) * ceil_div(n, 16) * ceil_div(s.K, 16));
      const double feed = static_cast<double>((m + n) * s.K * es) / chip.mte.gm_to_l1.bytes_per_cycle;
      const double drain = l0c_buffers == 2 ? 0 : static_cast<double>(m * n * es) / chip.fixpipe.bytes_per_cycle;
      const double cost = waves * (std::max(cube, feed) + drain);
      if (best.base_m == 0 || cost < best_cost * 0.999 ||
          (cost <= best_cost * 1.001 && m * n > best.base_m * best.base_n)) {
        best = MatmulTiling{};
        best.base_m = m;
        best.base_n = n;
        best.base_k = k;
        best.step_k = step;
        best.l0c_buffers = l0c_buffers;
        best_cost = cost;
      }
    }
  }
  if (best.base_m == 0) throw InputError("matmul: no tile fits the L0/L1 buffers of chip " + chip.name);
  best.tiles_m = u32(ceil_div(s.M, best.base_m));
  best.tiles_n = u32(ceil_div(s.N, best.base_n));
  // A window of `cores` tiles about as tall as it is wide: group_m x base_m ~ (cores / group_m) x base_n.
  best.group_m = static_cast<std::uint32_t>(std::clamp<double>(  // in [1, tiles_m]
      std::round(std::sqrt(static_cast<double>(cores) * best.base_n / best.base_m)), 1.0, best.tiles_m));
  // Reversing every other group's sweep only pays when the operands outgrow the L2: then the B columns a group
  // starts on are still there from the previous group's end. While everything stays in the L2, the reversed sweep
  // puts more cores on the same B lines at the same time (a wave straddling two groups reads the same columns), which
  // costs about 3 % at 2048^3 in this model, so the plain order is kept there.
  const std::uint64_t operands = static_cast<std::uint64_t>(s.batch) *
                                 (static_cast<std::uint64_t>(s.M) * s.K + static_cast<std::uint64_t>(s.K) * s.N +
                                  static_cast<std::uint64_t>(s.M) * s.N) *
                                 es;
  best.serpentine = operands > chip.l2.capacity;
  best.block_dim =
      u32(std::min<std::uint64_t>(cores, static_cast<std::uint64_t>(s.batch) * best.tiles_m * best.tiles_n));
  best.bias_table = s.bias && buf.bias_table.size >= best.base_n * 4ULL;
  best.vector_epilogue = (s.act != Activation::kNone && s.act != Activation::kRelu) || (s.bias && !best.bias_table);
  if (best.vector_epilogue) {
    // Rows per epilogue chunk: two in and two out buffers of T plus four fp32 rows (and a bias row) in the UB.
    const std::uint64_t frow = ub_row<float>(best.base_n) * 4, trow = ceil_to(best.base_n * es, 32);
    const std::uint64_t ub = chip.buffers.ub.size - 2 * frow - 2 * trow;
    best.epi_rows = u32(std::min<std::uint64_t>(ub / (4 * trow + 4 * frow), best.base_m));
    if (best.epi_rows == 0)
      throw InputError("matmul: a row of the output tile does not fit the UB of chip " + chip.name);
  }
  // The kernels allocate exactly these plans: a tiling whose plan outgrows a buffer is a bug here, said as one.
  const MatmulBuffers planned = matmul_buffers(s, best, es);
  const std::pair<const BufferPlan*, const config::BufferParams*> spaces[] = {{&planned.l1, &buf.l1},
                                                                              {&planned.l0a, &buf.l0a},
                                                                              {&planned.l0b, &buf.l0b},
                                                                              {&planned.l0c, &buf.l0c},
                                                                              {&planned.bias_table, &buf.bias_table},
                                                                              {&planned.ub, &buf.ub}};
  for (const auto& [plan, space] : spaces) {
    const std::uint64_t total = plan->total(space->align);
    if (total > space->size)
      throw std::logic_error("matmul tiling " + std::to_string(best.base_m) + "x" + std::to_string(best.base_n) + "x" +
                             std::to_string(best.base_k) + ": its buffers take " + std::to_string(total) + " B of a " +
                             std::to_string(space->size) + " B buffer");
  }
  return best;
}

}  // namespace npusim::stack::ops::matmul
