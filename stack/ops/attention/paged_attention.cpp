// The paged_attention op: decoding attention, a few new query rows per sequence against a long key/value cache held
// in pages (vLLM's PagedAttention, Ascend's IncreFlashAttention), on the FlashAttention kernels (fa_common.hpp):
//   - the cache is [pages, page, KVN, D]; a block table [B, table_cols] (int32) lists each sequence's pages in order,
//     and the cube core reads K and V a page run at a time after the scalar unit has read the page's entry;
//   - grouped-query heads are packed: with one new row per sequence, the G = N / KVN query heads that share a
//     key/value head are the G rows of one unit, so K and V are read once per group, not G times;
//   - split-K (flash decoding): at batch 1 the B KVN units are fewer than the cores, so each head's keys are cut
//     into `splits` ranges, one unit each; each unit writes its partial O and log-sum-exp to the workspace, and
//     after a cross-core barrier the vector cores combine them (split chips; coupled chips run one unit per head).
#include <algorithm>
#include <cmath>
#include <sstream>

#include "common/util/error.hpp"
#include "stack/ops/attention/fa_common.hpp"

namespace npusim::stack::ops::attention {

std::uint32_t page_of(const FaArgs& g, std::uint32_t b, std::uint32_t row) {
  const std::uint64_t at = static_cast<std::uint64_t>(b) * g.s.table_cols + row / g.s.page;
  GlobalTensor<std::int32_t> table;
  table.SetGlobalBuffer(g.table);
  const std::int32_t p = table.GetValue(at);  // the scalar unit's read, timed in either mode
  if (!functional_mode()) return u32(at % g.s.pages);
  if (p < 0 || static_cast<std::uint64_t>(p) >= g.s.pages)
    throw InputError("paged_attention: block table entry [" + std::to_string(b) + ", " +
                     std::to_string(row / g.s.page) + "] is page " + std::to_string(p) + ", outside the cache's " +
                     std::to_string(g.s.pages) + " pages");
  return u32(p);
}

namespace {

constexpr const char* kOp = "paged_attention";

std::uint32_t required(const Params& p, const std::string& key, std::uint32_t max) {
  if (!p.count(key))
    throw InputError(std::string(kOp) + ": parameter '" + key +
                     "' is required (B, N, D, kv_len; KVN, S, page, pages, table_cols, scale, splits optional)");
  return param_uint(p, key, 0, max);
}

PagedAttentionCall parse(const Params& p) {
  PagedAttentionCall c;
  c.B = required(p, "B", 1u << 12);
  c.N = required(p, "N", 1u << 10);
  c.D = required(p, "D", 256);
  c.KVN = param_uint(p, "KVN", c.N, 1u << 10);
  c.S = param_uint(p, "S", 1, 1u << 10);
  if (!p.count("kv_len"))
    throw InputError(std::string(kOp) +
                     ": parameter 'kv_len' (the keys in the cache, one value or one per sequence) "
                     "is required");
  const std::vector<std::uint32_t> lens = param_uints(p, "kv_len", c.B, 0, 1, 1u << 20);
  c.lens = lens;
  c.page = param_uint(p, "page", 128, 4096);
  c.pages = param_uint(p, "pages", 0, 1u << 24);
  c.table_cols = param_uint(p, "table_cols", 0, 1u << 20);
  if (p.count("scale")) c.scale = param_real(p, "scale", 1.0, false);
  c.splits = param_uint(p, "splits", 0, 256);
  return c;
}

}  // namespace

// The call checked and turned into the kernels' shape: one unit row per query head of a group when S = 1.
FaShape resolve_paged(const PagedAttentionCall& c) {
  auto bad = [](const std::string& what) { return InputError(std::string(kOp) + ": " + what); };
  if (!c.B || !c.N || !c.KVN || !c.S || !c.D) throw bad("B, N, KVN, S and D must be positive");
  if (c.D % 16 != 0 || c.D > 256) throw bad("D=" + std::to_string(c.D) + " must be a multiple of 16, at most 256");
  if (c.N % c.KVN != 0)
    throw bad("N=" + std::to_string(c.N) + " query heads cannot be grouped over KVN=" + std::to_string(c.KVN) +
              " key/value heads");
  if (c.lens.size() != c.B)
    throw bad(std::to_string(c.lens.size()) + " kv_len values for B=" + std::to_string(c.B) + " sequences");
  if (c.page < 16 || c.page % 16 != 0 || c.page > 4096)
    throw bad("page=" + std::to_string(c.page) + " must be a multiple of 16 from 16 to 4096 rows");
  FaShape s;
  std::uint32_t longest = 0;
  for (std::size_t b = 0; b < c.lens.size(); ++b) {
    if (c.lens[b] < c.S)
      throw bad("kv_len of sequence " + std::to_string(b) + " is " + std::to_string(c.lens[b]) +
                ", fewer than its S=" + std::to_string(c.S) + " new rows (which are in the cache)");
    longest = std::max(longest, c.lens[b]);
  }
  // A block table row holds at least the longest sequence's pages; a runner's table holds its sequences' final
  // length (table_cols) while the keys grow step by step.
  const auto needed = u32(ceil_div(longest, c.page));
  if (c.table_cols && c.table_cols < needed)
    throw bad("table_cols=" + std::to_string(c.table_cols) + " block table entries cannot list the " +
              std::to_string(needed) + " pages of a sequence of " + std::to_string(longest) + " keys");
  s.table_cols = c.table_cols ? c.table_cols : needed;
  s.pages = c.pages ? c.pages : c.B * s.table_cols;
  if (s.pages < s.table_cols)
    throw bad("pages=" + std::to_string(s.pages) + " cannot hold the " + std::to_string(s.table_cols) +
              " pages of a sequence of " + std::to_string(longest) + " keys");
  const std::uint64_t D = c.D, G = c.N / c.KVN;
  s.B = c.B;
  s.D = c.D;
  s.KVN = c.KVN;
  s.SK = longest;
  s.lens = c.lens;
  s.page = c.page;
  const double scale = c.scale ? *c.scale : 1.0 / std::sqrt(static_cast<double>(c.D));
  if (!std::isfinite(scale) || scale <= 0) throw bad("scale=" + std::to_string(scale) + " is not a positive number");
  s.scale = static_cast<float>(scale);
  if (c.S == 1) {
    // Q and O are [B, 1, N, D]: the G heads of a group are G consecutive rows D apart, one unit of S = G rows.
    s.N = c.KVN;
    s.S = u32(G);
    s.q = s.o = FaLayout{c.N * D, G * D, D, 0};
  } else {
    s.N = c.N;
    s.S = c.S;
    s.causal = true;
    s.q = s.o = FaLayout{static_cast<std::uint64_t>(c.S) * c.N * D, D, c.N * D, 0};
    if (s.q.ss > 65535)
      throw bad("N x D = " + std::to_string(s.q.ss) + " elements per query row is more than 65535 (with S > 1)");
  }
  // K and V: page row r of head h at (p page + r) KVN D + h D.
  s.k = s.v = FaLayout{0, D, c.KVN * D, 0};
  if (s.k.ss > 65535) throw bad("KVN x D = " + std::to_string(s.k.ss) + " elements per cache row is more than 65535");
  return s;
}

namespace {

// Contiguous ranges of the unit stream, at most `cores`, whose costs (key blocks + 1 for the unit's own work) are as
// even as a bisection on the largest finds.
std::vector<std::uint64_t> balance_units(const std::vector<double>& cost, std::uint64_t cores) {
  auto ranges = [&](double budget) {
    std::vector<std::uint64_t> first{0};
    double used = 0;
    for (std::uint64_t e = 0; e < cost.size(); ++e) {
      if (e > first.back() && used + cost[e] > budget) {
        first.push_back(e);
        used = 0;
      }
      used += cost[e];
    }
    first.push_back(cost.size());
    return first;
  };
  double hi = 0;
  for (double c : cost) hi += c;
  double lo = 0;
  while (hi - lo > 1e-3 * hi) {
    const double mid = (lo + hi) / 2;
    (ranges(mid).size() - 1 <= cores ? hi : lo) = mid;
  }
  return ranges(hi);
}

// Whether a head's keys may be split: the combine needs every AIV of the chip in the kernel (a mode-0 barrier),
// two per group as the FlashAttention kernel has them.
bool can_split(const config::ChipConfig& chip) {
  return chip.split() && chip.cores.aiv_per_aic == 2 && chip.cores.aiv == 2 * chip.cores.aic &&
         chip.flags.cross_core_ids > kCombine;
}

}  // namespace

FaTiling plan_paged(FaShape& s, const PagedAttentionCall& c, std::uint64_t es, const config::ChipConfig& chip) {
  s.partials = can_split(chip);
  if (s.causal && !chip.split())
    throw InputError(std::string(kOp) + ": S=" + std::to_string(c.S) + " new rows per sequence need a split chip (" +
                     chip.name + " is coupled; its kernel masks causally only from the first key)");
  FaTiling t;
  try {
    t = plan_fa(s, es, chip, s.partials ? u32(ceil_to(s.S, 16)) : 0);
  } catch (const InputError& e) {
    throw InputError(std::string(kOp) + " (on the FlashAttention kernels): " + e.what());
  }
  const std::uint64_t heads = static_cast<std::uint64_t>(s.B) * s.N, cores = chip.cube_cores();
  const std::uint32_t most = u32(ceil_div(s.SK, t.bk));  // key blocks of the longest sequence
  std::uint32_t splits = 1;
  if (c.splits) {
    splits = c.splits;
    if (splits > 1 && !s.partials)
      throw InputError(std::string(kOp) + ": splits=" + std::to_string(splits) + " needs a split chip with two AIV " +
                       "per AIC and at least " + std::to_string(kCombine + 1) + " cross-core flag ids (" + chip.name +
                       " is not one)");
  } else if (s.partials && heads < cores) {
    splits = u32(std::min<std::uint64_t>(cores / heads, most));
  }
  if (splits > 1 && s.S > t.bq) {
    if (c.splits)
      throw InputError(std::string(kOp) + ": split keys need a head's " + std::to_string(s.S) +
                       " rows in one unit, at most " + std::to_string(t.bq));
    splits = 1;
  }
  s.splits = std::max(1u, splits);
  if (s.splits > 1) {
    std::vector<double> cost;
    for (std::uint64_t e = 0; e < heads * s.splits; ++e)
      cost.push_back(1.0 + key_blocks(s, t, u32(e / s.splits / s.N), 0, s.S, u32(e % s.splits)));
    t.first = balance_units(cost, cores);
    while (t.first.size() < cores + 1) t.first.push_back(t.first.back());  // every group joins the barrier
    t.block_dim = u32(cores);
  }
  t.part_off = t.slot_bytes * t.block_dim;
  return t;
}

namespace {

// fp32 reference: softmax in double per query row over the keys the block table and lengths give.
std::vector<HostTensor> paged_reference(const std::vector<TensorDesc>& in, const Call& call,
                                        const std::vector<HostTensor>& v) {
  const auto& c = call_as<PagedAttentionCall>(call, kOp);
  const FaShape s = resolve_paged(c);
  const std::uint64_t D = c.D, G = c.N / c.KVN;
  HostTensor out(static_cast<std::uint64_t>(c.B) * c.S * c.N * D);
  const double scale = s.scale;
  std::vector<double> score, acc(D);
  for (std::uint32_t b = 0; b < c.B; ++b) {
    const std::uint32_t len = c.lens[b];
    score.assign(len, 0.0);
    for (std::uint32_t n = 0; n < c.N; ++n) {
      const std::uint64_t kvh = n / G;
      for (std::uint32_t i = 0; i < c.S; ++i) {
        const float* q = v[0].data() + ((static_cast<std::uint64_t>(b) * c.S + i) * c.N + n) * D;
        const std::uint32_t keys = len - c.S + i + 1;  // the new rows are the cache's last
        double mx = -INFINITY;
        auto row = [&](const HostTensor& cache, std::uint32_t j) {
          const auto page = static_cast<std::uint64_t>(v[3][static_cast<std::uint64_t>(b) * s.table_cols + j / c.page]);
          if (page >= s.pages) throw InputError("paged_attention reference: a block table entry is outside the cache");
          return cache.data() + ((page * c.page + j % c.page) * c.KVN + kvh) * D;
        };
        for (std::uint32_t j = 0; j < keys; ++j) {
          const float* k = row(v[1], j);
          double dot = 0;
          for (std::uint64_t d = 0; d < D; ++d) dot += static_cast<double>(q[d]) * k[d];
          score[j] = dot * scale;
          mx = std::max(mx, score[j]);
        }
        double sum = 0;
        std::fill(acc.begin(), acc.end(), 0.0);
        for (std::uint32_t j = 0; j < keys; ++j) {
          const double e = std::exp(score[j] - mx);
          sum += e;
          const float* vv = row(v[2], j);
          for (std::uint64_t d = 0; d < D; ++d) acc[d] += e * vv[d];
        }
        float* o = out.data() + ((static_cast<std::uint64_t>(b) * c.S + i) * c.N + n) * D;
        for (std::uint64_t d = 0; d < D; ++d) o[d] = static_cast<float>(acc[d] / sum);
      }
    }
  }
  (void)in;
  return {out};
}

std::vector<TensorDesc> operands(const PagedAttentionCall& c, DType t) {
  const FaShape s = resolve_paged(c);
  const Shape cache{s.pages, c.page, c.KVN, c.D};
  return {{{c.B, c.S, c.N, c.D}, t}, {cache, t}, {cache, t}, {{c.B, s.table_cols}, DType::kInt32}};
}

OpDef paged_attention_op() {
  OpDef d;
  d.name = kOp;
  d.summary =
      "decoding attention: S new query rows [B, S, N, D] against a paged K/V cache [pages, page, KVN, D] through a "
      "block table [B, pages per sequence] (int32), kv_len keys per sequence; grouped heads packed, keys split "
      "across the cores and combined (flash decoding)";
  d.params = {{"B", kRequired},
              {"N", kRequired},
              {"KVN", "N"},
              {"S", "1"},
              {"D", kRequired},
              {"kv_len", kRequired},
              {"page", "128"},
              {"pages", "0 (B x table_cols)"},
              {"table_cols", "0 (ceil(max kv_len / page))"},
              {"scale", "(1/sqrt(D))"},
              {"splits", "0 (chosen by the tiling)"}};
  d.takes_integers = true;  // the block table; plan checks the others are fp16 or bf16
  d.parse = [](const Params& p) -> Call { return parse(p); };
  d.inputs = [](const Params& p, DType t) {
    if (t != DType::kFp16 && t != DType::kBf16) throw InputError(std::string(kOp) + " takes fp16 or bf16");
    return operands(parse(p), t);
  };
  d.plan = [](const std::vector<TensorDesc>& in, const Call& call, const config::ChipConfig& chip) {
    const auto& c = call_as<PagedAttentionCall>(call, kOp);
    const DType t = in.empty() ? DType::kFp16 : in[0].dtype;
    const std::vector<TensorDesc> want = operands(c, t);
    const char* names[] = {"the query", "the key cache", "the value cache", "the block table"};
    if (in.size() != want.size())
      throw InputError(std::string(kOp) + " takes 4 inputs (query, key cache, value cache, block table), given " +
                       std::to_string(in.size()));
    if (t != DType::kFp16 && t != DType::kBf16) throw InputError(std::string(kOp) + ": the query must be fp16 or bf16");
    for (std::size_t i = 0; i < want.size(); ++i)
      if (elements(in[i].shape) != elements(want[i].shape) || in[i].dtype != want[i].dtype)
        throw InputError(std::string(kOp) + ": " + names[i] + " must be " + shape_string(want[i].shape) + " " +
                         std::string(hw::isa::dtype_name(want[i].dtype)) + ", not " + shape_string(in[i].shape) + " " +
                         std::string(hw::isa::dtype_name(in[i].dtype)));
    FaArgs g;
    g.s = resolve_paged(c);
    g.t = plan_paged(g.s, c, hw::isa::dtype_bytes(t), chip);
    OpPlan plan;
    plan.outputs = {{{c.B, c.S, c.N, c.D}, t}};
    plan.type = KernelType::kMix;
    plan.block_dim = g.t.block_dim;
    const std::uint64_t heads = static_cast<std::uint64_t>(g.s.B) * g.s.N;
    const std::uint64_t parts = g.s.splits > 1 ? heads * g.s.splits * g.s.S * (g.s.D * 4ULL + 32) : 0;
    plan.workspace_bytes = chip.split() ? g.t.part_off + parts : 0;
    // FLOPs over the visible scores (2 D each for Q K^T and P V); the compulsory traffic: Q, O, the table, and the
    // K and V rows each sequence reads once (the cache as a whole may hold more).
    double entries = 0;
    std::uint64_t kv_rows = 0;
    for (std::uint32_t b = 0; b < c.B; ++b) {
      kv_rows += c.lens[b];
      for (std::uint32_t i = 0; i < c.S; ++i) entries += c.lens[b] - c.S + i + 1;
    }
    plan.flops = 4.0 * c.D * entries * c.N;
    const std::uint64_t es = hw::isa::dtype_bytes(t);
    plan.compulsory_bytes = 2 * in[0].bytes() + in[3].bytes() + 2 * kv_rows * c.KVN * c.D * es;
    std::uint64_t units = 0;
    for (std::uint32_t blk = 0; blk < g.t.block_dim; ++blk) units += units_of(g.s, g.t, blk).size();
    plan.tiling = {{"block_q", g.t.bq},
                   {"block_k", g.t.bk},
                   {"key_pass", g.t.ck},
                   {"row_chunk", g.t.rc},
                   {"rows_per_unit", g.s.S},
                   {"splits", g.s.splits},
                   {"units", static_cast<double>(units)},
                   {"workspace_per_block", static_cast<double>(g.t.slot_bytes)}};
    const bool split = chip.split();
    plan.kernel = [g, t, split](const std::vector<std::uint64_t>& buf) -> std::function<void()> {
      FaArgs a = g;
      a.q = buf.at(0);
      a.k = buf.at(1);
      a.v = buf.at(2);
      a.table = buf.at(3);
      a.o = buf.at(4);
      a.workspace = buf.size() > 5 ? buf[5] : 0;
      if (t == DType::kBf16) return [a, split] { fa_kernel<bfloat16_t>(a, split); };
      return [a, split] { fa_kernel<half>(a, split); };
    };
    return plan;
  };
  d.reference = paged_reference;
  // The block table's entries within the cache.
  d.ranges_of = [](const std::vector<TensorDesc>& in) {
    const auto pages = static_cast<float>(in.at(1).shape.at(0));
    return std::vector<std::pair<float, float>>{{-1.0f, 1.0f}, {-1.0f, 1.0f}, {-1.0f, 1.0f}, {0.0f, pages - 0.5f}};
  };
  return d;
}

}  // namespace

}  // namespace npusim::stack::ops::attention

namespace npusim::stack::ops {

std::vector<OpDef> paged_attention_ops() {
  return {attention::paged_attention_op()};
}

}  // namespace npusim::stack::ops
