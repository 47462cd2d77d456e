// FlashAttention forward (the op in flash_attention.cpp): O = softmax(scale Q K^T + mask) V per (batch, head), with
// online softmax (running max and sum in fp32) over blocks of keys, so the S x SK score matrix never exists whole.
//
// Work: the query rows of all heads, in 16-row fractals head after head, are cut into one contiguous range per
// block, balanced by an estimate of their cost (balance_rows, flash_attention.cpp); a block cuts its range into
// units (batch, head, at most Bq query rows) from the range's start and at each head's end, and runs each unit over
// its key blocks of Bk (causal units near the end of a sequence have the most).
// Two kernels share what is here (shapes, layouts, the work order and the cube side's buffers): split chips
// (fa_split.cpp: a mix kernel, one block = 1 AIC + 2 AIV, exchanging S, P and PV through GM workspace slots) and
// coupled chips (fa_coupled.cpp: one core, S and PV through L0C -> UB, P through UB -> L1).
#pragma once

#include <algorithm>
#include <string>
#include <vector>

#include "stack/ops/kernel_util.hpp"
#include "stack/ops/op.hpp"

namespace npusim::stack::ops::attention {

using hw::isa::DType;

constexpr float kMasked = -1e30f;  // a masked score: exp(kMasked - m) is 0 for any finite m
constexpr float kMinSum = 1e-30f;  // the softmax sum's floor: a row with any key visible has a sum >= 1
constexpr std::uint32_t kSReady = 0, kPReady = 1, kPvReady = 2, kCombine = 3;

// Where a tensor's rows are: element (b, n, s, d) of Q, K, V or O sits at off + b*bs + n*ns + s*ss + d (elements).
// BNSD and BSND are two such layouts; a graph passes others (a head's rows inside a fused QKV projection, the
// output straight into the [B, S, N*D] tensor the next MatMul reads), absorbing the Transposes and Reshapes.
struct FaLayout {
  std::uint64_t bs = 0, ns = 0, ss = 0, off = 0;
  std::uint64_t at(std::uint64_t b, std::uint64_t n, std::uint64_t row) const {
    return off + b * bs + n * ns + row * ss;
  }
};

struct FaShape {
  std::uint32_t B = 1, N = 1, KVN = 1, S = 1, SK = 1, D = 64;
  bool causal = false, mask = false;
  // The mask is [MB, MN, MS, SK], each of MB, MN, MS either 1 (shared) or B, N, S: one S x SK table, one per batch
  // or head, or a key-padding row per batch (MS = 1) that every query row adds.
  std::uint32_t MB = 1, MN = 1, MS = 1;
  float scale = 1.0f;
  bool bsnd = false;    // -p layout=bsnd: Q, K, V and O are [B, S, heads, D]
  FaLayout q, k, v, o;  // K and V index heads 0..KVN-1

  // Decoding (paged_attention.cpp). Each batch's keys (empty: SK each); K and V in pages of `page` rows (0: the
  // layouts k and v above), page p's row r of head h at k.off + h k.ns + (p page + r) k.ss, batch b's pages listed
  // by the block table's row b (table_cols entries, each below `pages`); the keys of a head cut into `splits`
  // ranges whose partial results (O and the log-sum-exp per row) go to the workspace and are combined at the end
  // (split chips); `partials` reserves the UB for that.
  std::vector<std::uint32_t> lens;
  std::uint32_t page = 0, table_cols = 0, pages = 0, splits = 1;
  bool partials = false;
  std::uint32_t keys(std::uint32_t b) const { return lens.empty() ? SK : lens[b]; }
  // Causal: query row i of batch b sees keys j <= i + shift(b) (decoding: the new rows are the cache's last).
  std::uint32_t shift(std::uint32_t b) const { return lens.empty() || lens[b] < S ? 0 : lens[b] - S; }

  // Element offset of the mask row that query row `row` of head (b, n) adds.
  std::uint64_t mask_at(std::uint64_t b, std::uint64_t n, std::uint64_t row) const {
    return ((MB > 1 ? b : 0) * MN + (MN > 1 ? n : 0)) * MS * SK + (MS > 1 ? row : 0) * SK;
  }
  bool mask_rows_shared() const { return MS == 1 && S > 1; }
};

struct FaTiling {
  std::uint32_t bq = 0, bk = 0;  // query rows and key columns per block
  // Keys per pass through L0 (a divisor of bk; bk on coupled chips): the cube computes S a sub-block at a time and
  // P V over the sub-blocks into one accumulator, so a block can be longer than L0 holds.
  std::uint32_t ck = 0;
  // Rows per pass of an AIV's softmax (split chips; a multiple of 8, at most ceil(bq / 2)): the vector side streams
  // a block's scores through the UB in row chunks, so a block can be longer than the UB holds whole.
  std::uint32_t rc = 0;
  std::uint32_t block_dim = 1;
  std::uint64_t slot_bytes = 0;  // GM workspace per block (split chips)
  std::uint64_t part_off = 0;    // splits > 1: where the partial results start in the workspace (bytes)
  // Block i runs the fractals [first[i], first[i + 1]) of the row stream: fractal f is rows 16 j .. 16 j + 15 of
  // head h = f / F, j = f % F, F = ceil(S / 16), heads in (batch, head) order. block_dim + 1 entries.
  // With splits > 1 the stream is of units instead: unit e is split e % splits of head e / splits, all S rows.
  std::vector<std::uint64_t> first;
};

struct FaArgs {
  GM_ADDR q = 0, k = 0, v = 0, mask = 0, o = 0, workspace = 0;
  GM_ADDR table = 0;  // paged K and V: the block table (int32)
  FaShape s;
  FaTiling t;
};

// One block of work: unit (batch, head, query block) and one of its key blocks.
struct FaStep {
  std::uint32_t b, n, q0, qr;  // query rows [q0, q0 + qr)
  std::uint32_t kv0, w;        // key columns [kv0, kv0 + w)
  bool first, last;            // first / last key block of the unit
  std::uint32_t split;         // the unit's key range (splits > 1)
};

// A unit: query rows [q0, q0 + qr) of head bn (= b N + n).
struct FaUnit {
  std::uint64_t bn;
  std::uint32_t q0, qr;
  std::uint32_t split = 0;
};

inline std::uint64_t fractals_per_head(const FaShape& s) {
  return ceil_div(s.S, 16);
}

// The units of block blk, in order: its range cut every Bq rows from the range's start and at each head's end.
inline std::vector<FaUnit> units_of(const FaShape& s, const FaTiling& t, std::uint32_t blk) {
  std::vector<FaUnit> out;
  if (blk + 1 >= t.first.size()) return out;
  if (s.splits > 1) {
    for (std::uint64_t e = t.first[blk]; e < t.first[blk + 1]; ++e)
      out.push_back({e / s.splits, 0, s.S, u32(e % s.splits)});
    return out;
  }
  const std::uint64_t F = fractals_per_head(s), end = t.first[blk + 1];
  for (std::uint64_t f = t.first[blk]; f < end;) {
    const std::uint64_t head = f / F, stop = std::min(end, (head + 1) * F);
    const std::uint32_t q0 = u32((f % F) * 16);
    const std::uint32_t limit = u32(std::min<std::uint64_t>(s.S, (stop - head * F) * 16));
    const std::uint32_t qr = std::min(t.bq, limit - q0);
    out.push_back({head, q0, qr});
    f += ceil_div(qr, 16);
  }
  return out;
}

// The keys [lo, hi) of split `split` of batch b: its keys cut into s.splits ranges of whole key blocks (the last
// ones may be empty when the batch has few keys).
inline std::pair<std::uint32_t, std::uint32_t> split_keys(const FaShape& s, const FaTiling& t, std::uint32_t b,
                                                          std::uint32_t split) {
  const std::uint32_t len = s.keys(b);
  if (s.splits <= 1) return {0, len};
  const std::uint64_t chunk = ceil_to(ceil_div(len, s.splits), t.bk);
  const auto lo = u32(std::min<std::uint64_t>(len, split * chunk));
  return {lo, u32(std::min<std::uint64_t>(len, lo + chunk))};
}
// The splits of batch b that hold keys (the combine reads theirs).
inline std::uint32_t splits_used(const FaShape& s, const FaTiling& t, std::uint32_t b) {
  if (s.splits <= 1) return 1;
  return u32(ceil_div(s.keys(b), ceil_to(ceil_div(s.keys(b), s.splits), t.bk)));
}

// Key blocks of a unit: all of its range, or (causal, query i sees keys j <= i + shift) up to the one holding its
// last row's last key.
inline std::uint32_t key_blocks(const FaShape& s, const FaTiling& t, std::uint32_t b, std::uint32_t q0,
                                std::uint32_t qr, std::uint32_t split = 0) {
  auto [lo, hi] = split_keys(s, t, b, split);
  if (s.causal) hi = u32(std::min<std::uint64_t>(hi, static_cast<std::uint64_t>(q0) + qr + s.shift(b)));
  return hi > lo ? u32(ceil_div(hi - lo, t.bk)) : 0;
}

// The steps of block `blk`, in order.
inline std::vector<FaStep> steps_of(const FaArgs& g, std::uint32_t blk) {
  std::vector<FaStep> out;
  for (const FaUnit& u : units_of(g.s, g.t, blk)) {
    const std::uint32_t b = u32(u.bn / g.s.N), n = u32(u.bn % g.s.N);
    const std::uint32_t nk = key_blocks(g.s, g.t, b, u.q0, u.qr, u.split);
    const auto [lo, hi] = split_keys(g.s, g.t, b, u.split);
    for (std::uint32_t j = 0; j < nk; ++j) {
      const std::uint32_t kv0 = lo + j * g.t.bk;
      out.push_back({b, n, u.q0, u.qr, kv0, std::min(g.t.bk, hi - kv0), j == 0, j + 1 == nk, u.split});
    }
  }
  return out;
}

// GM addresses of a head's rows.
template <class T>
GM_ADDR q_at(const FaArgs& g, const FaStep& st, std::uint32_t row) {
  return g.q + g.s.q.at(st.b, st.n, row) * sizeof(T);
}
template <class T>
GM_ADDR o_at(const FaArgs& g, const FaStep& st, std::uint32_t row) {
  return g.o + g.s.o.at(st.b, st.n, row) * sizeof(T);
}
// The page holding key row `row` of batch b (paged K and V): the block table's entry, read by the scalar unit. In
// timing-only mode the table holds no values and the pages are taken in order (batch b's i-th page is
// b * table_cols + i, as a fresh cache hands them out).
std::uint32_t page_of(const FaArgs& g, std::uint32_t b, std::uint32_t row);

// Rows [row, row + n) of the K (or V) head of a step as runs contiguous in GM: f(address, first row, rows) per run
// (one run unless the cache is paged and the rows cross a page).
template <class T, class F>
void kv_runs(const FaArgs& g, bool is_v, const FaStep& st, std::uint32_t row, std::uint32_t n, F&& f) {
  const std::uint32_t kvh = st.n / (g.s.N / g.s.KVN);
  const FaLayout& l = is_v ? g.s.v : g.s.k;
  const GM_ADDR base = is_v ? g.v : g.k;
  if (!g.s.page) {
    f(base + l.at(st.b, kvh, row) * sizeof(T), 0u, n);
    return;
  }
  for (std::uint32_t r = 0; r < n;) {
    const std::uint32_t at = row + r, m = std::min(n - r, g.s.page - at % g.s.page);
    const std::uint64_t global_row = static_cast<std::uint64_t>(page_of(g, st.b, at)) * g.s.page + at % g.s.page;
    f(base + (l.off + kvh * l.ns + global_row * l.ss) * sizeof(T), r, m);
    r += m;
  }
}

// O rows [row, row + rows) of a head from the UB: one copy when they are contiguous in GM, else one burst a row.
template <class T>
void store_o(const FaArgs& g, const FaStep& st, std::uint32_t row, const LocalTensor<T>& ot, std::uint32_t rows) {
  if (g.s.o.ss == g.s.D) {
    GlobalTensor<T> go;
    go.SetGlobalBuffer(o_at<T>(g, st, row));
    DataCopy(go, ot, static_cast<std::uint64_t>(rows) * g.s.D);
  } else {
    copy_rows_out(o_at<T>(g, st, row), ot, rows, g.s.D, g.s.o.ss);
  }
}

// Where the partial results of a unit go (splits > 1): O as fp32 rows of D, and per row its log-sum-exp
// broadcast over 8 floats (one 32 B block), S rows per (head, split).
inline GM_ADDR part_o(const FaArgs& g, std::uint64_t bn, std::uint32_t split, std::uint32_t row) {
  return g.workspace + g.t.part_off + ((bn * g.s.splits + split) * g.s.S + row) * g.s.D * 4ULL;
}
inline GM_ADDR part_lse(const FaArgs& g, std::uint64_t bn, std::uint32_t split, std::uint32_t row) {
  const std::uint64_t units = static_cast<std::uint64_t>(g.s.B) * g.s.N * g.s.splits;
  return g.workspace + g.t.part_off + units * g.s.S * g.s.D * 4ULL + ((bn * g.s.splits + split) * g.s.S + row) * 32ULL;
}

// Workspace slots of a block: S (fp32 Bq x Bk), P (T Bq x Bk), PV (fp32 Bq x D), two of each.
struct Slots {
  GM_ADDR base;
  std::uint32_t bq, bk, d;
  GM_ADDR s(std::size_t i) const { return base + (i % 2) * bq * bk * 4ULL; }
  GM_ADDR p(std::size_t i) const { return base + 2ULL * bq * bk * 4 + (i % 2) * bq * bk * 2ULL; }
  GM_ADDR pv(std::size_t i) const { return base + 2ULL * bq * bk * 6 + (i % 2) * bq * d * 4ULL; }
};
inline Slots slots_of(const FaArgs& g) {
  return Slots{g.workspace + GetBlockIdx() * g.t.slot_bytes, g.t.bq, g.t.bk, g.s.D};
}

// The buffers the kernels allocate for blocks of bq x bk, one plan per space; on split chips l1 .. l0c are the
// AIC's and ub each AIV's, on coupled chips all are the one core's. plan_fa checks each against its buffer, the
// kernels allocate from them (names in fa_buffers, flash_attention.cpp).
struct FaBuffers {
  BufferPlan l1, l0a, l0b, l0c, ub;
};
FaBuffers fa_buffers(const FaShape& s, const FaTiling& t, std::uint64_t es, bool split);
// The name of a split AIV's per-unit buffer `name` ("o", "m", "l", "alpha") of unit parity p: "o.0", "o.1"...
inline std::string per_unit(const char* name, int p) {
  return std::string(name) + (p ? ".1" : ".0");
}
// The plans of a kernel's call, for elements of T.
template <class T>
FaBuffers planned_buffers(const FaArgs& g, bool split) {
  return fa_buffers(g.s, g.t, sizeof(T), split);
}

// --- Cube side ----------------------------------------------------------------------------------------------------

// The cube queues of either chip kind. L1: Q (kept for the unit), K, P, V; L0A/L0B/L0C ping-pong.
template <class T>
struct CubeBuffers {
  TQue<TPosition::A1, 1> qq;
  TQue<TPosition::A1, 2> qp;
  TQue<TPosition::B1, 2> qk, qv;
  TQue<TPosition::A2, 2> qa2;
  TQue<TPosition::B2, 2> qb2;
  TQue<TPosition::CO1, 2> qc;
  LocalTensor<T> q1;

  // Split chips: P arrives in L1 through its own queue and L0C drains through the CO1 queue. Coupled chips
  // (flags.event_ids may be 4) manage P and L0C with explicit flags and keep one V buffer.
  void init(TPipe& pipe, const FaBuffers& b, bool split) {
    init_buffer(pipe, qq, b.l1, "q");
    init_buffer(pipe, qk, b.l1, "k");
    init_buffer(pipe, qv, b.l1, "v");
    init_buffer(pipe, qa2, b.l0a, "a2");
    init_buffer(pipe, qb2, b.l0b, "b2");
    if (split) {
      init_buffer(pipe, qp, b.l1, "p");
      init_buffer(pipe, qc, b.l0c, "c");
    }
  }

  // Q (at a unit's first step) and the step's K rows into L1, one NZ block per sub-block of ck keys: sub-block j
  // holds (D / 16) x ceil(w_j / 16) fractals, (fk, fn) at fk * ceil(w_j / 16) + fn, as L0B wants them.
  void load_k(const FaArgs& g, const FaStep& st) {
    const std::uint32_t d = g.s.D, M1 = u32(ceil_div(st.qr, 16));
    if (st.first) {
      q1 = qq.AllocTensor<T>();
      GlobalTensor<T> gq;
      gq.SetGlobalBuffer(q_at<T>(g, st, st.q0));
      DataCopy(q1, gq, Nd2NzParams{1, u16(st.qr), u16(d), 0, u16(g.s.q.ss), u16(M1 * 16), 1, 0});
      qq.EnQue(q1);
      q1 = qq.DeQue<T>();
    }
    LocalTensor<T> k1 = qk.AllocTensor<T>();
    for (std::uint32_t c0 = 0; c0 < st.w; c0 += g.t.ck) {
      const std::uint32_t wj = std::min(g.t.ck, st.w - c0);
      // A run starting r rows into the sub-block lands r rows into each of its column blocks.
      kv_runs<T>(g, false, st, st.kv0 + c0, wj, [&](GM_ADDR at, std::uint32_t r, std::uint32_t rows) {
        GlobalTensor<T> gk;
        gk.SetGlobalBuffer(at);
        DataCopy(k1[static_cast<std::uint64_t>(c0) * d + r * 16ULL], gk,
                 Nd2NzParams{1, u16(rows), u16(d), 0, u16(g.s.k.ss), u16(ceil_to(wj, 16)), 1, 0});
      });
    }
    qk.EnQue(k1);
    k1_ = qk.DeQue<T>();
  }

  // S for keys [c0, c0 + ck) of the step (load_k's) into the L0C tensor c; the step's last sub-block frees K (and,
  // at a unit's last step, Q).
  void scores(const FaArgs& g, const FaStep& st, std::uint32_t c0, const LocalTensor<float>& c) {
    const std::uint32_t d = g.s.D, M1 = u32(ceil_div(st.qr, 16)), wj = std::min(g.t.ck, st.w - c0);
    const std::uint32_t N1 = u32(ceil_div(wj, 16)), K1 = d / 16;
    LocalTensor<T> a2 = qa2.AllocTensor<T>(), b2 = qb2.AllocTensor<T>();
    for (std::uint32_t fm = 0; fm < M1; ++fm)
      LoadData(a2[static_cast<std::uint64_t>(fm) * K1 * 256], q1, LoadData2DParams{u16(fm), u8(K1), u16(M1), false});
    LoadData(b2, k1_[static_cast<std::uint64_t>(c0) * d], LoadData2DParams{0, u8(K1 * N1), 1, false});
    if (c0 + g.t.ck >= st.w) {
      qk.FreeTensor(k1_);
      if (st.last) qq.FreeTensor(q1);
    }
    qa2.EnQue(a2);
    qb2.EnQue(b2);
    a2 = qa2.DeQue<T>();
    b2 = qb2.DeQue<T>();
    Mmad(c, a2, b2, MmadParams{u16(st.qr), u16(wj), u16(d), true, false});
    qa2.FreeTensor(a2);
    qb2.FreeTensor(b2);
  }

  // V rows of the step into L1 (issued early: they do not depend on P).
  void load_v(const FaArgs& g, const FaStep& st) {
    LocalTensor<T> v1 = qv.AllocTensor<T>();
    kv_runs<T>(g, true, st, st.kv0, st.w, [&](GM_ADDR at, std::uint32_t r, std::uint32_t rows) {
      GlobalTensor<T> gv;
      gv.SetGlobalBuffer(at);
      DataCopy(v1[r * 16ULL], gv,
               Nd2NzParams{1, u16(rows), u16(g.s.D), 0, u16(g.s.v.ss), u16(ceil_to(st.w, 16)), 1, 0});
    });
    qv.EnQue(v1);
  }

  // PV = P V with P (qr x w, NZ with 16-row column blocks) already in L1 and V from load_v, into the L0C tensor c:
  // one Mmad per sub-block of ck keys, accumulating.
  void pv(const FaArgs& g, const FaStep& st, const LocalTensor<T>& p1, const LocalTensor<float>& c) {
    const std::uint32_t d = g.s.D, M1 = u32(ceil_div(st.qr, 16));
    const std::uint32_t K1 = u32(ceil_div(st.w, 16)), N1 = d / 16, C1 = g.t.ck / 16;
    LocalTensor<T> v1 = qv.DeQue<T>();
    for (std::uint32_t f0 = 0; f0 < K1; f0 += C1) {
      const std::uint32_t kj = std::min(C1, K1 - f0);
      LocalTensor<T> a2 = qa2.AllocTensor<T>(), b2 = qb2.AllocTensor<T>();
      for (std::uint32_t fm = 0; fm < M1; ++fm)
        LoadData(a2[static_cast<std::uint64_t>(fm) * kj * 256], p1,
                 LoadData2DParams{u16(f0 * M1 + fm), u8(kj), u16(M1), false});
      for (std::uint32_t fk = 0; fk < kj; ++fk)
        LoadData(b2[static_cast<std::uint64_t>(fk) * N1 * 256], v1,
                 LoadData2DParams{u16(f0 + fk), u8(N1), u16(K1), true});
      if (f0 + C1 >= K1) qv.FreeTensor(v1);
      qa2.EnQue(a2);
      qb2.EnQue(b2);
      a2 = qa2.DeQue<T>();
      b2 = qb2.DeQue<T>();
      const std::uint32_t keys = std::min(st.w - f0 * 16, kj * 16);
      Mmad(c, a2, b2, MmadParams{u16(st.qr), u16(d), u16(keys), f0 == 0, false});
      qa2.FreeTensor(a2);
      qb2.FreeTensor(b2);
    }
  }

 private:
  LocalTensor<T> k1_;
};

// The kernels (fa_split.cpp, fa_coupled.cpp).
template <class T>
void fa_cube_split(const FaArgs& g);
template <class T>
void fa_vector_split(const FaArgs& g);
template <class T>
void fa_coupled(const FaArgs& g);
// A block of a call: the coupled kernel, or on split chips the cube or the vector side by the core's kind.
template <class T>
void fa_kernel(const FaArgs& g, bool split) {
  if (!split)
    fa_coupled<T>(g);
  else if (IsAic())
    fa_cube_split<T>(g);
  else
    fa_vector_split<T>(g);
}

// Host side (flash_attention.cpp): the text form, the typed call checked into the kernel's shape, the tiling.
FlashAttentionCall parse_call(const Params& p);
FaShape resolve(const FlashAttentionCall& c);
// The largest blocks (Bq rows, Bk columns) whose buffers fit the chip, and each block's range of query rows. Blocks
// are no taller than the longest range, nor shorter than `min_rows` when the buffers allow (paged_attention's split
// keys need a head's rows in one unit).
FaTiling plan_fa(const FaShape& s, std::uint64_t es, const config::ChipConfig& chip, std::uint32_t min_rows = 0);
// paged_attention (paged_attention.cpp): the call checked into the kernels' shape, and its tiling (plan_fa's blocks,
// then the split keys and the units' ranges; sets s.splits and s.partials).
FaShape resolve_paged(const PagedAttentionCall& c);
FaTiling plan_paged(FaShape& s, const PagedAttentionCall& c, std::uint64_t es, const config::ChipConfig& chip);

}  // namespace npusim::stack::ops::attention
