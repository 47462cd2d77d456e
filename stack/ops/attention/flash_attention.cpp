// The flash_attention op (fa_common.hpp has the kernels' shared parts): the text form, the typed call checked into
// the kernel's shape, the tiling, the plan and the fp32 reference.
#include <cmath>
#include <sstream>

#include "common/util/error.hpp"
#include "stack/ops/attention/fa_common.hpp"

namespace npusim::stack::ops::attention {

namespace {

// A parameter the call cannot do without.
std::uint32_t required_uint(const Params& p, const std::string& key, std::uint32_t max) {
  if (!p.count(key))
    throw InputError("flash_attention: parameter '" + key +
                     "' is required (B, N, S, D; KVN, SK, causal, mask, mask_shape, scale optional)");
  return param_uint(p, key, 0, max);
}

// -p KEY=x,y,z: three integers, or an empty vector when KEY is not given.
std::vector<std::uint64_t> uint_triple(const Params& p, const std::string& key, const char* what) {
  const auto it = p.find(key);
  if (it == p.end()) return {};
  std::vector<std::uint64_t> v;
  std::stringstream ss(it->second);
  for (std::string part; std::getline(ss, part, ',');) {
    Params one{{key, part}};
    v.push_back(param_uint(one, key, 0, 1u << 31));
  }
  if (v.size() != 3) throw InputError("flash_attention: " + key + "='" + it->second + "' is not " + what);
  return v;
}

// The strides of a tensor of `heads` heads and `seq` rows in the call's layout.
FaLayout natural_layout(const FlashAttentionCall& c, std::uint64_t heads, std::uint64_t seq) {
  const std::uint64_t D = c.D;
  return c.layout == AttentionLayout::kBsnd ? FaLayout{seq * heads * D, D, heads * D, 0}
                                            : FaLayout{heads * seq * D, seq * D, D, 0};
}

}  // namespace

// The text form: -p B, N, S, D (required), KVN, SK, causal, mask, mask_shape=MB,MN,MS, scale, layout=bnsd|bsnd, and
// explicit layouts q_strides=bs,ns,ss and q_offset=off (also k, v, o), in elements.
FlashAttentionCall parse_call(const Params& p) {
  FlashAttentionCall c;
  c.B = required_uint(p, "B", 1u << 16);
  c.N = required_uint(p, "N", 1u << 12);
  c.S = required_uint(p, "S", 1u << 20);
  c.D = required_uint(p, "D", 256);
  c.KVN = param_uint(p, "KVN", c.N, 1u << 12);
  c.SK = param_uint(p, "SK", c.S, 1u << 20);
  if (!c.B || !c.N || !c.S || !c.D || !c.KVN || !c.SK)
    throw InputError("flash_attention: B, N, KVN, S, SK and D must be positive");
  c.causal = param_uint(p, "causal", 0, 1);
  c.mask = param_uint(p, "mask", 0, 1);
  if (const auto ms = uint_triple(p, "mask_shape", "MB,MN,MS"); !ms.empty())
    c.mask_shape = std::vector<std::uint32_t>{u32(ms[0]), u32(ms[1]), u32(ms[2])};
  if (p.count("scale")) c.scale = param_real(p, "scale", 1.0, false);
  const auto lay = p.find("layout");
  if (lay != p.end() && lay->second != "bnsd" && lay->second != "bsnd")
    throw InputError("flash_attention: layout='" + lay->second + "' is not bnsd or bsnd");
  c.layout = lay != p.end() && lay->second == "bsnd" ? AttentionLayout::kBsnd : AttentionLayout::kBnsd;
  for (auto [name, strides] : {std::pair{"q", &c.q}, {"k", &c.k}, {"v", &c.v}, {"o", &c.o}}) {
    const auto st = uint_triple(p, std::string(name) + "_strides", "b,n,s");
    const std::string off = std::string(name) + "_offset";
    if (st.empty() && !p.count(off)) continue;
    const bool kv = name[0] == 'k' || name[0] == 'v';
    const FaLayout nat = natural_layout(c, kv ? c.KVN : c.N, kv ? c.SK : c.S);
    *strides = AttentionStrides{st.empty() ? nat.bs : st[0], st.empty() ? nat.ns : st[1], st.empty() ? nat.ss : st[2],
                                param_uint(p, off, 0, 1u << 31)};
  }
  return c;
}

// The typed call checked and completed (defaults, natural layouts) into the kernel's shape.
FaShape resolve(const FlashAttentionCall& c) {
  FaShape s;
  const std::pair<const char*, std::pair<std::uint32_t, std::uint32_t>> dims[] = {
      {"B", {c.B, 1u << 16}}, {"N", {c.N, 1u << 12}},     {"S", {c.S, 1u << 20}},
      {"D", {c.D, 256}},      {"KVN", {c.KVN, 1u << 12}}, {"SK", {c.SK, 1u << 20}}};
  for (const auto& [name, v] : dims)
    if (v.first > v.second)
      throw InputError(std::string("flash_attention: ") + name + "=" + std::to_string(v.first) + " is more than " +
                       std::to_string(v.second));
  s.B = c.B;
  s.N = c.N;
  s.S = c.S;
  s.D = c.D;
  s.KVN = c.KVN ? c.KVN : c.N;
  s.SK = c.SK ? c.SK : c.S;
  s.causal = c.causal;
  s.mask = c.mask;
  if (!s.B || !s.N || !s.S || !s.D) throw InputError("flash_attention: B, N, KVN, S, SK and D must be positive");
  if (s.D % 16 != 0)
    throw InputError("flash_attention: D=" + std::to_string(s.D) + " must be a multiple of 16 (at most 256)");
  if (s.N % s.KVN != 0)
    throw InputError("flash_attention: N=" + std::to_string(s.N) +
                     " query heads cannot be grouped over KVN=" + std::to_string(s.KVN) + " key/value heads");
  s.MS = s.S;
  if (c.mask_shape) {
    const auto& ms = *c.mask_shape;
    std::string text;
    for (std::size_t i = 0; i < ms.size(); ++i) text += (i ? "," : "") + std::to_string(ms[i]);
    if (!s.mask) throw InputError("flash_attention: mask_shape is given without mask=1");
    if (ms.size() != 3) throw InputError("flash_attention: mask_shape='" + text + "' is not MB,MN,MS");
    const std::uint32_t full[] = {s.B, s.N, s.S};
    for (int i = 0; i < 3; ++i)
      if (ms[i] != 1 && ms[i] != full[i])
        throw InputError("flash_attention: mask_shape='" + text + "': " + "BNS"[i] + " of the mask must be 1 or " +
                         std::to_string(full[i]));
    s.MB = ms[0];
    s.MN = ms[1];
    s.MS = ms[2];
  }
  const double scale = c.scale ? *c.scale : 1.0 / std::sqrt(static_cast<double>(s.D));
  if (!std::isfinite(scale) || scale <= 0)
    throw InputError("flash_attention: scale=" + std::to_string(scale) + " is not a positive number");
  s.scale = static_cast<float>(scale);
  s.bsnd = c.layout == AttentionLayout::kBsnd;
  FlashAttentionCall full = c;
  full.KVN = s.KVN;
  full.SK = s.SK;
  s.q = s.o = natural_layout(full, s.N, s.S);
  s.k = s.v = natural_layout(full, s.KVN, s.SK);
  const std::uint64_t D = s.D;
  const std::pair<const char*, std::pair<const std::optional<AttentionStrides>*, FaLayout*>> lays[] = {
      {"q", {&c.q, &s.q}}, {"k", {&c.k, &s.k}}, {"v", {&c.v, &s.v}}, {"o", {&c.o, &s.o}}};
  for (const auto& [name, l] : lays) {
    if (*l.first) *l.second = FaLayout{(*l.first)->batch, (*l.first)->head, (*l.first)->row, (*l.first)->offset};
    if (l.second->ss < D || l.second->ss > 65535)
      throw InputError(std::string("flash_attention: ") + name + " rows are " + std::to_string(l.second->ss) +
                       " elements apart (D=" + std::to_string(D) + " to 65535 allowed)");
    if (l.second->bs > (1ull << 40) || l.second->ns > (1ull << 40) || l.second->off > (1ull << 40))
      throw InputError(std::string("flash_attention: the ") + name + " strides or offset are more than 2^40 elements");
  }
  return s;
}

namespace {

// The mask's shape: S x SK for one table (the usual call), else [MB, MN, MS, SK].
Shape mask_shape(const FaShape& s) {
  if (s.MB == 1 && s.MN == 1 && s.MS == s.S) return Shape{s.S, s.SK};
  return Shape{s.MB, s.MN, s.MS, s.SK};
}

// Elements a tensor of `heads` heads and `seq` rows spans in its layout.
std::uint64_t extent(const FaLayout& l, std::uint64_t B, std::uint64_t heads, std::uint64_t seq, std::uint64_t D) {
  return l.at(B - 1, heads - 1, seq - 1) + D;
}

}  // namespace

// The largest blocks (Bq rows, Bk columns) whose buffers fit the chip: the cube side's L1/L0 ping-pong buffers and
// the vector side's UB (scores in two buffers, P, PV, two output accumulators and per-row vectors).
FaBuffers fa_buffers(const FaShape& s, const FaTiling& t, std::uint64_t es, bool split) {
  FaBuffers b;
  const std::uint64_t d = s.D, bq = t.bq, bk = t.bk, ck = t.ck;
  // Cube side: Q for the unit, K and V of a block (one V on coupled chips), P; L0A/L0B/L0C ping-pong, each holding
  // a sub-block of ck keys.
  b.l1.add("q", bq * d * es);
  b.l1.add("k", bk * d * es, 2);
  b.l1.add("v", bk * d * es, split ? 2 : 1);
  b.l0a.add("a2", std::max(bq * d, bq * ck) * es, 2);
  b.l0b.add("b2", ck * d * es, 2);
  b.l0c.add("c", std::max(bq * ck, bq * d) * 4, 2);
  b.l1.add("p", bq * bk * es, split ? 2 : 1);
  if (split) {
    // One AIV's half of the rows (fa_split.cpp), a block's scores streamed in chunks of rc rows: S in (two
    // chunks), PV in, P chunks and O out through one double-buffered queue (O leaves once a unit, so sharing costs
    // little); per unit parity the fp32 output accumulator and the running max, sum and rescale factor; reduction
    // scratch for a chunk and a broadcast block per row.
    const std::uint64_t r = ceil_div(bq, 2), vec = ceil_to(r * 4, 32), rc = t.rc;
    b.ub.add("s", rc * bk * 4, 2);
    b.ub.add("pv", r * d * 4);
    b.ub.add("out", std::max(rc * bk * es, r * ceil_to(d * es, 32)), 2);  // P, and at a unit's end O, in T
    for (int p = 0; p < 2; ++p) {
      b.ub.add(per_unit("o", p), r * d * 4);
      b.ub.add(per_unit("m", p), vec);
      b.ub.add(per_unit("l", p), vec);
      b.ub.add(per_unit("alpha", p), vec);
    }
    b.ub.add("mx", rc * 4 * ceil_div(bk, 64));
    b.ub.add("rs", rc * 4 * ceil_div(bk, 64));
    // The scale block before the broadcast rows: a FusedMulAdd reads both with the score row, and placed after
    // the 64-row broadcast area the scale fell in the bank group of its first row (a bank conflict).
    b.ub.add("scale", 32);  // one block of the softmax scale, the factor of a FusedMulAdd
    b.ub.add("bc", ceil_to(r, 8) * 32);
    if (s.mask) {
      b.ub.add("mask", rc * bk * es);
      b.ub.add("mask_f", rc * 64 * 4);
    }
    // Split keys (paged_attention): the combine's four per-row vectors broadcast over 8 lanes (log-sum-exp in, its
    // max, the weights' sum, a weight); the first also stages a unit's log-sum-exp out.
    if (s.partials) b.ub.add("combine", 4 * ceil_to(r, 8) * 32);
  } else {
    // One core (fa_coupled.cpp): S, PV and the accumulator in fp32; reduction scratch and a broadcast column block;
    // P, and O as NZ and as rows, in T; the running max, sum, rescale factor and block max.
    b.ub.add("s", bq * bk * 4);
    b.ub.add("pv", bq * d * 4);
    b.ub.add("o", bq * d * 4);
    b.ub.add("part", bq * 16 * 4);
    b.ub.add("bc", bq * 16 * 4 + kBankSkew);  // skewed: a row op reads it with a column block of S, PV or O
    b.ub.add("p", bq * bk * es);
    b.ub.add("o_nz", bq * d * es);
    b.ub.add("o_t", bq * d * es);
    for (const char* v : {"m", "l", "alpha", "mx"}) b.ub.add(v, bq * 4);
    if (s.mask) b.ub.add("mask", bq * bk * es);
  }
  return b;
}

namespace {

// Estimated cycles of one step: a unit of qr rows against one key block, the slowest of the Cube (the Q K^T and
// P V fractals), the cube core's GM feed (K and V, and P on split chips), the drain of S and PV (the FixPipe to GM
// on split chips, L0C -> UB on coupled chips) and the softmax's five fp32 passes per score (max, scale and
// subtract, exp, sum, cast) over the rows of one Vector unit, each from the chip's rates. The row balance below
// only compares estimates with each other: a unit of few rows still pays for reading its K and V blocks.
class StepCost {
 public:
  StepCost(const FaShape& s, const FaTiling& t, std::uint64_t es, const config::ChipConfig& chip)
      : d_(s.D), bk_(t.bk), es_(es), split_(chip.split()), f_(chip.cube.fp16) {
    auto rate = [](double r) { return std::max(r, 1e-9); };
    feed_rate_ = rate(chip.mte.gm_to_l1.bytes_per_cycle);
    const double write = chip.noc.core_write_bytes_per_cycle > 0 ? chip.noc.core_write_bytes_per_cycle : 1e30;
    drain_rate_ = rate(split_ ? std::min(chip.fixpipe.bytes_per_cycle, write) : chip.mte.l0c_to_ub.bytes_per_cycle);
    vector_rate_ = rate(static_cast<double>(chip.vector.bytes_per_repeat) /
                        static_cast<double>(std::max<std::uint64_t>(chip.vector.cycles_per_repeat, 1)));
  }

  double operator()(std::uint32_t qr) const {
    constexpr double softmax_passes = 5;
    const double m = static_cast<double>(ceil_div(qr, f_.m)), rows = m * static_cast<double>(f_.m);
    const double d = static_cast<double>(d_), bk = static_cast<double>(bk_), es = static_cast<double>(es_);
    const double cube =
        m * static_cast<double>(ceil_div(bk_, f_.n) * ceil_div(d_, f_.k) + ceil_div(d_, f_.n) * ceil_div(bk_, f_.k)) *
        static_cast<double>(f_.cycles);
    const double feed = (2 * bk * d + (split_ ? rows * bk : 0)) * es / feed_rate_;
    const double drain = rows * (bk + d) * 4 / drain_rate_;
    const double vec_rows = split_ ? std::ceil(qr / 2.0) : qr;
    const double vector = vec_rows * bk * 4 * softmax_passes / vector_rate_;
    return std::max({cube, feed, drain, vector});
  }

 private:
  std::uint64_t d_, bk_, es_;
  bool split_;
  config::FractalParams f_;
  double feed_rate_ = 1, drain_rate_ = 1, vector_rate_ = 1;
};

// The row chunk (a multiple of 8 up to t.rc, which fits the UB) whose estimated vector-side time per step is the
// least: each chunk pays its instructions' latencies (the vendor cost model's `latency + 2 repeats - 1` per
// instruction: the chunk's row reductions, combines, per-row updates and full-row passes, as fa_split.cpp issues
// them), and the first chunk's scores in and the last chunk's P out are not hidden behind vector work. Larger
// chunks pay fewer latencies but expose more copy time: on 910b the best is 32 rows for 64-row halves.
std::uint32_t fastest_row_chunk(const FaTiling& t, std::uint64_t es, const config::ChipConfig& chip) {
  const auto& lat = chip.vector.latency;
  const double parts = static_cast<double>(ceil_div(t.bk, 64));  // 64-column pieces of a score row
  const double chunk_latency =
      2 * parts * static_cast<double>(lat.reduce) + 2 * (parts - 1) * static_cast<double>(lat.max) +
      static_cast<double>(3 * lat.muls + lat.max + lat.sub + lat.exp + lat.adds + lat.duplicate + lat.mul + lat.add) +
      parts * static_cast<double>(lat.mul) + static_cast<double>(lat.exp + lat.cast);
  const double in_rate = std::max(chip.mte.gm_to_ub.bytes_per_cycle, 1e-9);
  const double out_rate = std::max(chip.mte.ub_to_gm.bytes_per_cycle, 1e-9);
  const double rows = static_cast<double>(ceil_div(t.bq, 2)), bk = static_cast<double>(t.bk);
  std::uint32_t best = t.rc;
  double best_cost = 0;
  for (std::uint32_t rc = t.rc; rc >= 8; rc -= 8) {
    const double exposed = rc * bk * 4 / in_rate + rc * bk * static_cast<double>(es) / out_rate;
    const double cost = std::ceil(rows / rc) * chunk_latency + exposed;
    if (rc == t.rc || cost < best_cost * 0.999) {
      best = rc;
      best_cost = cost;
    }
  }
  return best;
}

// Cuts the row stream (all heads' query rows in 16-row fractals) into at most `cores` contiguous ranges whose
// estimated costs (units' key blocks x StepCost) are as even as a bisection on the largest finds. Cutting at
// fractals rather than at whole Bq blocks fills the last wave: 64 blocks of 128 rows on 24 cores are 3 waves of
// 89 % filled, 352-row ranges (128 + 128 + 96) even them out, and a few units spread over all cores.
std::vector<std::uint64_t> balance_rows(const FaShape& s, const FaTiling& t, const StepCost& step,
                                        std::uint64_t cores) {
  const std::uint64_t F = fractals_per_head(s), heads = static_cast<std::uint64_t>(s.B) * s.N, total = heads * F;
  auto unit = [&](std::uint32_t q0, std::uint32_t qr) { return key_blocks(s, t, 0, q0, qr) * step(qr); };
  double head_cost = 0;
  for (std::uint32_t q0 = 0; q0 < s.S; q0 += t.bq) head_cost += unit(q0, std::min(t.bq, s.S - q0));
  // The end of a range that starts at `pos` and costs at most `budget` (at least one fractal): whole heads while
  // they fit, then whole units, then the most fractals of the next unit that fit.
  auto advance = [&](std::uint64_t pos, double budget) {
    const std::uint64_t start = pos;
    while (pos < total) {
      const std::uint64_t head = pos / F, j = pos % F;
      if (j == 0 && head_cost <= budget) {
        const auto k =
            static_cast<std::uint64_t>(std::min(static_cast<double>(heads - head), std::floor(budget / head_cost)));
        pos += k * F;
        budget -= static_cast<double>(k) * head_cost;
        continue;
      }
      const std::uint32_t q0 = u32(j * 16), qr = std::min(t.bq, s.S - q0);
      const double c = unit(q0, qr);
      if (c <= budget) {
        budget -= c;
        pos += ceil_div(qr, 16);
        continue;
      }
      std::uint64_t f = ceil_div(qr, 16) - 1;
      while (f > 0 && unit(q0, u32(f * 16)) > budget) --f;
      return pos + (f == 0 && pos == start ? 1 : f);
    }
    return pos;
  };
  auto ranges = [&](double budget) {
    std::vector<std::uint64_t> first{0};
    while (first.back() < total && first.size() <= cores) first.push_back(advance(first.back(), budget));
    return first;
  };
  // The largest range costs at least an even share and at most everything (which one range can always take).
  double hi = head_cost * static_cast<double>(heads) * (1.0 + 1e-9), lo = hi / static_cast<double>(cores) / 1.01;
  while (hi - lo > 1e-4 * hi) {
    const double mid = (lo + hi) / 2;
    const std::vector<std::uint64_t> r = ranges(mid);
    (r.back() == total ? hi : lo) = mid;
  }
  return ranges(hi);
}

}  // namespace

FaTiling plan_fa(const FaShape& s, std::uint64_t es, const config::ChipConfig& chip, std::uint32_t min_rows) {
  const auto& buf = chip.buffers;
  const std::uint64_t d = s.D;
  auto fits = [](const BufferPlan& plan, const config::BufferParams& space) {
    return plan.total(space.align) <= space.size;
  };
  // Blocks no larger than the sequences need (a short sequence gets a small block and a small workspace). On split
  // chips a block's keys pass through L0 in sub-blocks of ck and its rows through the UB in chunks of rc, so the
  // largest block comes with the largest ck, then the largest rc, that fit; coupled chips keep a block whole.
  const std::uint64_t sq16 = ceil_to(s.S, 16), sk16 = ceil_to(s.SK, 16);
  const bool split = chip.split();
  for (std::uint64_t bq : {128, 64, 32, 16}) {
    if (bq > sq16 && bq > 16 && bq / 2 >= sq16) continue;
    const std::uint32_t r8 = u32(ceil_to(ceil_div(bq, 2), 8));
    for (std::uint64_t bk : {256, 128, 64, 32, 16}) {
      if (bk > sk16 && bk > 16 && bk / 2 >= sk16) continue;
      for (std::uint64_t ck = bk; ck >= 16; ck /= 2) {
        if (!split && ck < bk) break;
        // A Q K^T's L0B load is one LoadData of (D / 16)(ck / 16) fractals, at most 255 repeats.
        if ((d / 16) * (ck / 16) > 255) continue;
        for (std::uint32_t rc = split ? r8 : 8; rc >= 8; rc -= 8) {
          FaTiling t;
          t.bq = u32(bq);
          t.bk = u32(bk);
          t.ck = u32(ck);
          t.rc = split ? rc : 0;
          const FaBuffers b = fa_buffers(s, t, es, split);
          if (!fits(b.l1, buf.l1) || !fits(b.l0a, buf.l0a) || !fits(b.l0b, buf.l0b) || !fits(b.l0c, buf.l0c))
            break;  // no smaller rc helps
          if (!fits(b.ub, buf.ub)) continue;
          t.first = balance_rows(s, t, StepCost(s, t, es, chip), chip.cube_cores());
          t.block_dim = u32(t.first.size() - 1);
          // Blocks as tall as the tallest unit the ranges were cut into (spread over many cores, a short sequence
          // gives every core a few fractals): smaller buffers and workspace slots, the same units. Then the row
          // chunk for those blocks (every chunk up to the one that fit the taller blocks fits).
          std::uint64_t longest = 0;  // fractals of the longest range: no unit is taller
          for (std::uint32_t blk = 0; blk < t.block_dim; ++blk)
            longest = std::max(longest, t.first[blk + 1] - t.first[blk]);
          t.bq = u32(std::min<std::uint64_t>(t.bq, std::max<std::uint64_t>(longest * 16, min_rows)));
          if (split) {
            t.rc = std::min(t.rc, u32(ceil_to(ceil_div(t.bq, 2), 8)));
            t.rc = fastest_row_chunk(t, es, chip);
          }
          const std::uint64_t rows = t.bq;
          t.slot_bytes = ceil_to(2 * (rows * bk * 4 + rows * bk * es + rows * d * 4), 512);
          return t;
        }
      }
    }
  }
  throw InputError("flash_attention: no block of D=" + std::to_string(s.D) + " fits the buffers of chip " + chip.name);
}

namespace {

// fp32 reference: softmax in double over each query row, from the same fp16/bf16 inputs.
std::vector<HostTensor> fa_reference(const std::vector<TensorDesc>&, const Call& call,
                                     const std::vector<HostTensor>& v) {
  const FaShape s = resolve(call_as<FlashAttentionCall>(call, "flash_attention"));
  HostTensor out(extent(s.o, s.B, s.N, s.S, s.D));
  std::vector<double> score(s.SK), acc(s.D);
  for (std::uint32_t b = 0; b < s.B; ++b) {
    for (std::uint32_t n = 0; n < s.N; ++n) {
      const std::uint32_t kvh = n / (s.N / s.KVN);
      const float* q = v[0].data() + s.q.at(b, n, 0);
      const float* k = v[1].data() + s.k.at(b, kvh, 0);
      const float* vv = v[2].data() + s.v.at(b, kvh, 0);
      float* o = out.data() + s.o.at(b, n, 0);
      for (std::uint32_t i = 0; i < s.S; ++i) {
        const std::uint32_t keys = s.causal ? std::min(s.SK, i + 1) : s.SK;
        double mx = -INFINITY;
        for (std::uint32_t j = 0; j < keys; ++j) {
          double dot = 0;
          for (std::uint32_t c = 0; c < s.D; ++c) dot += static_cast<double>(q[i * s.q.ss + c]) * k[j * s.k.ss + c];
          score[j] = dot * s.scale + (s.mask ? v[3][s.mask_at(b, n, i) + j] : 0.0);
          mx = std::max(mx, score[j]);
        }
        double sum = 0;
        std::fill(acc.begin(), acc.end(), 0.0);
        for (std::uint32_t j = 0; j < keys; ++j) {
          const double e = std::exp(score[j] - mx);
          sum += e;
          for (std::uint32_t c = 0; c < s.D; ++c) acc[c] += e * vv[j * s.v.ss + c];
        }
        // A row the mask hides whole (every score -inf, or below the -1e30 the kernel floors the row max at) is 0, as
        // PyTorch's SDPA gives for -inf and the kernel for both.
        const bool hidden = s.mask && mx <= kMasked;
        for (std::uint32_t c = 0; c < s.D; ++c) o[i * s.o.ss + c] = hidden ? 0.0f : static_cast<float>(acc[c] / sum);
      }
    }
  }
  return {out};
}

OpDef flash_attention_op() {
  OpDef d;
  d.name = "flash_attention";
  d.summary =
      "O = softmax(scale Q K^T + mask) V, BNSD or BSND layout (or explicit strides), grouped-query heads (KVN), "
      "causal, online softmax in fp32";
  d.params = {{"B", kRequired},         {"N", kRequired},  {"KVN", "N"},
              {"S", kRequired},         {"SK", "S"},       {"D", kRequired},
              {"causal", "0"},          {"mask", "0"},     {"mask_shape", "(one S x SK table)"},
              {"scale", "(1/sqrt(D))"}, {"layout", "bnsd"}};
  for (const char* t : {"q", "k", "v", "o"}) {
    d.params.push_back({std::string(t) + "_strides", "(the layout's)"});
    d.params.push_back({std::string(t) + "_offset", "0"});
  }
  d.parse = [](const Params& p) -> Call { return parse_call(p); };
  d.inputs = [](const Params& p, DType t) {
    if (t == DType::kFp32) throw InputError("flash_attention takes fp16 or bf16");
    const FaShape s = resolve(parse_call(p));
    // The natural shapes of the layout (explicit strides come with the graph's own shapes).
    auto shape = [&](std::uint64_t heads, std::uint64_t seq, const FaLayout& l) {
      return s.bsnd                 ? Shape{s.B, seq, heads, s.D}
             : l.off || l.ss != s.D ? Shape{extent(l, s.B, heads, seq, s.D)}
                                    : Shape{s.B, heads, seq, s.D};
    };
    std::vector<TensorDesc> in{{shape(s.N, s.S, s.q), t}, {shape(s.KVN, s.SK, s.k), t}, {shape(s.KVN, s.SK, s.v), t}};
    if (s.mask) in.push_back({mask_shape(s), t});
    return in;
  };
  d.plan = [](const std::vector<TensorDesc>& in, const Call& call, const config::ChipConfig& chip) {
    FaArgs g;
    g.s = resolve(call_as<FlashAttentionCall>(call, "flash_attention"));
    g.t = plan_fa(g.s, hw::isa::dtype_bytes(in[0].dtype), chip);
    const FaShape& s = g.s;
    const std::pair<const FaLayout*, std::uint64_t> spans[] = {{&s.q, s.N}, {&s.k, s.KVN}, {&s.v, s.KVN}};
    for (std::size_t i = 0; i < 3; ++i) {
      const std::uint64_t need = extent(*spans[i].first, s.B, spans[i].second, i ? s.SK : s.S, s.D);
      if (in.size() <= i || elements(in[i].shape) < need)
        throw InputError("flash_attention: input " + std::to_string(i) + " (" +
                         (in.size() > i ? shape_string(in[i].shape) : "missing") + ") is smaller than the " +
                         std::to_string(need) + " elements its layout reaches");
    }
    if (s.mask && (in.size() < 4 || elements(in[3].shape) != elements(mask_shape(s))))
      throw InputError("flash_attention: the mask must be MB x MN x MS x SK = " + shape_string(mask_shape(s)) +
                       (in.size() < 4 ? std::string(", none given") : ", not " + shape_string(in[3].shape)));
    OpPlan plan;
    const std::uint64_t o_span = extent(s.o, s.B, s.N, s.S, s.D);
    plan.outputs = {{s.bsnd ? Shape{s.B, s.S, s.N, s.D}
                     : o_span == static_cast<std::uint64_t>(s.B) * s.N * s.S * s.D && s.o.ss == s.D
                         ? Shape{s.B, s.N, s.S, s.D}
                         : Shape{o_span},
                     in[0].dtype}};
    plan.type = KernelType::kMix;
    plan.block_dim = g.t.block_dim;
    plan.workspace_bytes = chip.split() ? g.t.slot_bytes * g.t.block_dim : 0;
    // FLOPs of the two matmuls over the visible score entries (2 D each for Q K^T and P V): the usual count.
    double entries = 0;
    for (std::uint32_t i = 0; i < g.s.S; ++i) entries += g.s.causal ? std::min(g.s.SK, i + 1) : g.s.SK;
    plan.flops = 4.0 * g.s.D * entries * g.s.B * g.s.N;
    std::uint64_t units = 0, steps = 0;
    for (std::uint32_t blk = 0; blk < g.t.block_dim; ++blk) {
      for (const FaUnit& u : units_of(g.s, g.t, blk)) {
        ++units;
        steps += key_blocks(g.s, g.t, u32(u.bn / g.s.N), u.q0, u.qr, u.split);
      }
    }
    // Each step issues at least its Q K^T Mmad, its P V Mmad and one softmax pass (about 125 instructions at D = 64
    // on tiny): a lower bound, so a call refused by it would have run past the limit too.
    plan.min_instructions = 3 * steps;
    plan.tiling = {{"block_q", g.t.bq},
                   {"block_k", g.t.bk},
                   {"key_pass", g.t.ck},
                   {"row_chunk", g.t.rc},
                   {"workspace_per_block", static_cast<double>(g.t.slot_bytes)},
                   {"units", static_cast<double>(units)},
                   {"causal", g.s.causal ? 1.0 : 0.0}};
    // The additive mask's batch, head and row dims (each 1 or full; its key dim is SK): 0 without a mask.
    plan.tiling["mask_batches"] = g.s.mask ? g.s.MB : 0;
    plan.tiling["mask_heads"] = g.s.mask ? g.s.MN : 0;
    plan.tiling["mask_rows"] = g.s.mask ? g.s.MS : 0;
    const DType t = in[0].dtype;
    const bool split = chip.split();
    plan.kernel = [g, t, split](const std::vector<std::uint64_t>& buf) -> std::function<void()> {
      FaArgs a = g;
      a.q = buf[0];
      a.k = buf[1];
      a.v = buf[2];
      std::size_t i = 3;
      if (g.s.mask) a.mask = buf[i++];
      a.o = buf[i++];
      a.workspace = i < buf.size() ? buf[i] : 0;  // coupled chips plan no workspace
      if (t == DType::kBf16) return [a, split] { fa_kernel<bfloat16_t>(a, split); };
      return [a, split] { fa_kernel<half>(a, split); };
    };
    return plan;
  };
  d.reference = fa_reference;
  return d;
}

}  // namespace

}  // namespace npusim::stack::ops::attention

namespace npusim::stack::ops {

std::vector<OpDef> attention_ops() {
  return {attention::flash_attention_op()};
}

}  // namespace npusim::stack::ops