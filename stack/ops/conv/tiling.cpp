// Conv2D's host tiling (conv_common.hpp): the buffer plans of a tiling and the search for the tile shape.
#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "common/util/error.hpp"
#include "stack/ops/conv/conv_common.hpp"

namespace npusim::stack::ops::conv {

namespace {

constexpr std::uint64_t kEs = 2;            // the Cube's 16-bit operand types
constexpr std::uint64_t kMaxBurst = 65535;  // 32 B blocks of one DataCopy burst (blockLen)

// Whether every plan of the tiling fits its buffer, each slot aligned as TPipe allocates it.
bool plans_fit(const ConvShape& s, const ConvTiling& t, const config::ChipConfig& chip) {
  const ConvBuffers b = conv_buffers(s, t);
  const auto& buf = chip.buffers;
  return b.l1.total(buf.l1.align) <= buf.l1.size && b.l0a.total(buf.l0a.align) <= buf.l0a.size &&
         b.l0b.total(buf.l0b.align) <= buf.l0b.size && b.l0c.total(buf.l0c.align) <= buf.l0c.size &&
         b.bias_table.total(buf.bias_table.align) <= buf.bias_table.size;
}

struct Candidate {
  ConvTiling t;
  double cost = 0;
};

// Estimated cycles of the call with a tiling: waves of tiles x the slowest of a tile's stages. A tile reads its
// band once per step (every channel plane once) and the weights of its output channels; the Cube does one fractal
// step per 16 x 16 x 16 of the tile's pixels, channels and K; the FixPipe drains the tile; MTE1 moves the img2col
// rows and the weights into L0 once per tile.
double estimate(const ConvShape& s, const ConvTiling& t, const config::ChipConfig& chip) {
  const double cores = static_cast<double>(chip.cube_cores());
  const double waves = std::ceil(static_cast<double>(t.tiles) / cores);
  const double k = static_cast<double>(s.cin_p) * s.taps();
  const std::uint32_t planes = s.cin_p / kC0;
  const double band = static_cast<double>(t.band_rows) * s.w * 32.0 * planes;
  const double weights = k * t.base_n * kEs;
  const double feed = (band + weights) / chip.mte.gm_to_l1.bytes_per_cycle;
  const double cube = (t.base_m / 16.0) * (t.base_n / 16.0) * (k / 16.0);
  const double mte1 = (t.base_m * k * kEs) / chip.mte.l1_to_l0a.bytes_per_cycle +
                      (k * t.base_n * kEs) / chip.mte.l1_to_l0b.bytes_per_cycle;
  const double drain = static_cast<double>(t.base_m) * t.base_n * kEs / chip.fixpipe.bytes_per_cycle;
  return waves * (std::max({feed, cube, mte1}) + drain);
}

// The tiling for base_m x base_n if its buffers fit: base_k as large as L0A/L0B take double-buffered, then as many
// channel planes per L1 step as two bands and two weight slices leave room for.
bool fit(const ConvShape& s, const config::ChipConfig& chip, std::uint32_t m, std::uint32_t n, ConvTiling& t) {
  const auto& buf = chip.buffers;
  const bool bias = s.call.bias;
  if (bias && n * 4ULL > buf.bias_table.size) return false;
  if (std::uint64_t{m} * n * 4 > buf.l0c.size) return false;
  const std::uint64_t k_all = std::uint64_t{s.cin_p} * s.taps();
  const std::uint64_t kmax = std::min(buf.l0a.size / (2 * m * kEs), buf.l0b.size / (2 * n * kEs));
  const std::uint64_t k = std::min<std::uint64_t>(kmax / 16 * 16, k_all);
  if (k < 16) return false;
  const std::uint32_t band = band_rows(s, m);
  const std::uint64_t band_plane = std::uint64_t{band} * s.w * 32;  // one channel plane of the band
  if (band_plane / 32 > kMaxBurst) return false;
  const std::uint64_t w_plane = std::uint64_t{s.taps()} * (n / 16) * 512;  // one plane's weights for n channels
  const std::uint64_t l1 = buf.l1.size - (bias ? ceil_to(n * kEs, 32) : 0);
  const std::uint64_t planes = std::min<std::uint64_t>(l1 / (2 * (band_plane + w_plane)), s.cin_p / kC0);
  if (planes == 0) return false;
  t = ConvTiling{};
  t.base_m = m;
  t.base_n = n;
  t.base_k = u32(k);
  t.step_planes = u32(planes);
  t.band_rows = band;
  t.tiles_m = u32(ceil_div(s.pixels(), m));
  t.tiles_n = u32(ceil_div(s.cout_p, n));
  t.tiles = std::uint64_t{s.n} * s.packs * t.tiles_m * t.tiles_n;
  t.block_dim = u32(std::min<std::uint64_t>(chip.cube_cores(), t.tiles));
  t.bias_table = bias;
  while (t.step_planes > 0 && !plans_fit(s, t, chip)) --t.step_planes;  // the slots' alignment
  return t.step_planes > 0;
}

}  // namespace

ConvBuffers conv_buffers(const ConvShape& s, const ConvTiling& t) {
  ConvBuffers b;
  b.l1.add("x1", std::uint64_t{t.step_planes} * t.band_rows * s.w * 32, 2);
  b.l1.add("w1", std::uint64_t{t.step_planes} * s.taps() * (t.base_n / 16) * 512, 2);
  b.l0a.add("a2", std::uint64_t{t.base_m} * t.base_k * kEs, 2);
  b.l0b.add("b2", std::uint64_t{t.base_k} * t.base_n * kEs, 2);
  b.l0c.add("c", std::uint64_t{t.base_m} * t.base_n * 4);
  if (t.bias_table) {
    b.l1.add("bias", ceil_to(t.base_n * kEs, 32));
    b.bias_table.add("bt", ceil_to(t.base_n * 4ULL, 64));
  }
  return b;
}

ConvTiling plan_conv(const ConvShape& s, const config::ChipConfig& chip) {
  if (s.call.bias && chip.buffers.bias_table.size == 0)
    throw InputError("conv2d: a bias is added through the Cube's bias table, which chip " + chip.name +
                     " does not have (buffers.bias_table.size is 0)");
  const std::uint64_t max_m = ceil_to(s.pixels(), 16), max_n = s.cout_p;
  Candidate best;
  for (std::uint32_t bm = 16; bm <= 512; bm *= 2) {
    for (std::uint32_t bn = 16; bn <= 512; bn *= 2) {
      const std::uint32_t m = u32(std::min<std::uint64_t>(bm, max_m)), n = u32(std::min<std::uint64_t>(bn, max_n));
      if ((m != bm && bm / 2 >= max_m) || (n != bn && bn / 2 >= max_n)) continue;  // same as a smaller candidate
      ConvTiling t;
      if (!fit(s, chip, m, n, t)) continue;
      const double cost = estimate(s, t, chip);
      const bool larger = std::uint64_t{m} * n > std::uint64_t{best.t.base_m} * best.t.base_n;
      if (best.t.base_m == 0 || cost < best.cost * 0.999 || (cost <= best.cost * 1.001 && larger)) best = {t, cost};
    }
  }
  if (best.t.base_m == 0)
    throw InputError("conv2d: no tile fits the L0/L1 buffers of chip " + chip.name + " (one band of " +
                     std::to_string(band_rows(s, 16)) + " input rows of " + std::to_string(s.w) +
                     " pixels and its weights must fit L1 twice)");
  // The kernel allocates exactly these plans: a tiling whose plan outgrows a buffer is a bug here, said as one.
  const ConvBuffers planned = conv_buffers(s, best.t);
  const auto& buf = chip.buffers;
  const std::pair<const BufferPlan*, const config::BufferParams*> spaces[] = {{&planned.l1, &buf.l1},
                                                                              {&planned.l0a, &buf.l0a},
                                                                              {&planned.l0b, &buf.l0b},
                                                                              {&planned.l0c, &buf.l0c},
                                                                              {&planned.bias_table, &buf.bias_table}};
  for (const auto& [plan, space] : spaces) {
    const std::uint64_t total = plan->total(space->align);
    if (total > space->size)
      throw std::logic_error("conv2d tiling " + std::to_string(best.t.base_m) + "x" + std::to_string(best.t.base_n) +
                             ": its buffers take " + std::to_string(total) + " B of a " + std::to_string(space->size) +
                             " B buffer");
  }
  return best.t;
}

}  // namespace npusim::stack::ops::conv
