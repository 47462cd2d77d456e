// FlashAttention forward: O = softmax(scale Q K^T + mask) V per (batch, head), with online softmax (running max and
// sum in fp32) over blocks of keys, so the S x SK score matrix never exists whole.
//
// Work: a unit is (batch, head, block of Bq query rows); units go round-robin to the blocks, heaviest first
// (causal units near the end of the sequence have the most key blocks). Each unit runs over its key blocks of Bk.
//
// Split chips (a mix kernel, one block = 1 AIC + 2 AIV): the cube core computes S_i = Q K_i^T into a GM workspace
// slot (fp32), the two vector cores (half the rows each) scale, mask, update the running max/sum, exponentiate and
// write P_i (fp16) back, and the cube core computes PV_i = P_i V_i into another slot, which the vector cores fold
// into their fp32 output accumulators (rescaled by exp(m_old - m_new)). Cross-core flags say a slot is ready
// (S: AIC -> AIV, P: AIV -> AIC, PV: AIC -> AIV); the cube core computes S_{i+1} before PV_i, so it works on the
// next block while the vector cores run the softmax of this one. Two slots of each kind suffice (see the
// ordering argument in docs/ops.md).
//
// Coupled chips: one core does both; S and PV go L0C -> UB (NZ fractals) and P goes UB -> L1, with no GM round
// trip. Row operations work on the NZ layout: a column block of 16 is contiguous, a per-row value broadcast into
// a 16-wide column block has the same shape, and a row reduction is a reduction over column blocks then over 16
// lanes.
#include <algorithm>
#include <sstream>
#include <cmath>

#include "common/util/error.hpp"
#include "stack/ops/kernel_util.hpp"
#include "stack/ops/op.hpp"

namespace npusim::stack::ops {

using hw::isa::DType;

namespace {

constexpr float kMasked = -1e30f;  // a masked score: exp(kMasked - m) is 0 for any finite m
constexpr std::uint32_t kSReady = 0, kPReady = 1, kPvReady = 2;

// Where a tensor's rows are: element (b, n, s, d) of Q, K, V or O sits at off + b*bs + n*ns + s*ss + d (elements).
// BNSD and BSND are two such layouts; a graph passes others (a head's rows inside a fused QKV projection, the
// output straight into the [B, S, N*D] tensor the next MatMul reads), absorbing the Transposes and Reshapes.
struct FaLayout {
  std::uint64_t bs = 0, ns = 0, ss = 0, off = 0;
  std::uint64_t at(std::uint64_t b, std::uint64_t n, std::uint64_t row) const { return off + b * bs + n * ns + row * ss; }
};

struct FaShape {
  std::uint32_t B = 1, N = 1, KVN = 1, S = 1, SK = 1, D = 64;
  bool causal = false, mask = false;
  // The mask is [MB, MN, MS, SK], each of MB, MN, MS either 1 (shared) or B, N, S: one S x SK table, one per batch
  // or head, or a key-padding row per batch (MS = 1) that every query row adds.
  std::uint32_t MB = 1, MN = 1, MS = 1;
  float scale = 1.0f;
  bool bsnd = false;      // -p layout=bsnd: Q, K, V and O are [B, S, heads, D]
  FaLayout q, k, v, o;    // K and V index heads 0..KVN-1

  // Element offset of the mask row that query row `row` of head (b, n) adds.
  std::uint64_t mask_at(std::uint64_t b, std::uint64_t n, std::uint64_t row) const {
    return ((MB > 1 ? b : 0) * MN + (MN > 1 ? n : 0)) * MS * SK + (MS > 1 ? row : 0) * SK;
  }
  bool mask_rows_shared() const { return MS == 1 && S > 1; }
};

struct FaTiling {
  std::uint32_t bq = 0, bk = 0;  // query rows and key columns per block
  std::uint32_t block_dim = 1;
  std::uint64_t slot_bytes = 0;  // GM workspace per block (split chips)
};

struct FaArgs {
  GM_ADDR q = 0, k = 0, v = 0, mask = 0, o = 0, workspace = 0;
  FaShape s;
  FaTiling t;
};

// One block of work: unit (batch, head, query block) and one of its key blocks.
struct FaStep {
  std::uint32_t b, n, q0, qr;  // query rows [q0, q0 + qr)
  std::uint32_t kv0, w;        // key columns [kv0, kv0 + w)
  bool first, last;            // first / last key block of the unit
};

std::uint32_t query_blocks(const FaArgs& g) { return static_cast<std::uint32_t>(ceil_div(g.s.S, g.t.bq)); }

// Key blocks of a unit: all of them, or (causal, query i sees keys j <= i) up to the one holding its last row.
std::uint32_t key_blocks(const FaArgs& g, std::uint32_t q0, std::uint32_t qr) {
  const std::uint32_t all = static_cast<std::uint32_t>(ceil_div(g.s.SK, g.t.bk));
  if (!g.s.causal) return all;
  return std::min(all, (q0 + qr - 1) / g.t.bk + 1);
}

// The steps of block `blk` of `blocks`, in order.
std::vector<FaStep> steps_of(const FaArgs& g, std::uint32_t blk, std::uint32_t blocks) {
  std::vector<FaStep> out;
  const std::uint32_t qb = query_blocks(g), heads = g.s.B * g.s.N;
  const std::uint64_t units = static_cast<std::uint64_t>(qb) * heads;
  for (std::uint64_t u = blk; u < units; u += blocks) {
    const std::uint32_t qi = qb - 1 - static_cast<std::uint32_t>(u / heads), bn = static_cast<std::uint32_t>(u % heads);
    const std::uint32_t q0 = qi * g.t.bq, qr = std::min(g.t.bq, g.s.S - q0);
    const std::uint32_t nk = key_blocks(g, q0, qr);
    for (std::uint32_t j = 0; j < nk; ++j) {
      const std::uint32_t kv0 = j * g.t.bk;
      out.push_back({bn / g.s.N, bn % g.s.N, q0, qr, kv0, std::min(g.t.bk, g.s.SK - kv0), j == 0, j + 1 == nk});
    }
  }
  return out;
}

std::uint16_t u16(std::uint64_t v) { return static_cast<std::uint16_t>(v); }
std::uint8_t u8(std::uint64_t v) { return static_cast<std::uint8_t>(v); }

// GM addresses of a head's rows.
template <class T>
GM_ADDR q_at(const FaArgs& g, const FaStep& st, std::uint32_t row) {
  return g.q + g.s.q.at(st.b, st.n, row) * sizeof(T);
}
template <class T>
GM_ADDR o_at(const FaArgs& g, const FaStep& st, std::uint32_t row) {
  return g.o + g.s.o.at(st.b, st.n, row) * sizeof(T);
}
template <class T>
GM_ADDR kv_at(const FaArgs& g, bool is_v, const FaStep& st, std::uint32_t row) {
  const std::uint32_t kvh = st.n / (g.s.N / g.s.KVN);
  return (is_v ? g.v : g.k) + (is_v ? g.s.v : g.s.k).at(st.b, kvh, row) * sizeof(T);
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

// Workspace slots of a block: S (fp32 Bq x Bk), P (T Bq x Bk), PV (fp32 Bq x D), two of each.
struct Slots {
  GM_ADDR base;
  std::uint32_t bq, bk, d;
  GM_ADDR s(std::size_t i) const { return base + (i % 2) * bq * bk * 4ULL; }
  GM_ADDR p(std::size_t i) const { return base + 2ULL * bq * bk * 4 + (i % 2) * bq * bk * 2ULL; }
  GM_ADDR pv(std::size_t i) const { return base + 2ULL * bq * bk * 6 + (i % 2) * bq * d * 4ULL; }
};
Slots slots_of(const FaArgs& g) { return Slots{g.workspace + GetBlockIdx() * g.t.slot_bytes, g.t.bq, g.t.bk, g.s.D}; }

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
  void init(TPipe& pipe, const FaArgs& g, bool split) {
    const std::uint64_t bq = g.t.bq, bk = g.t.bk, d = g.s.D, es = sizeof(T);
    pipe.InitBuffer(qq, 1, bq * d * es);
    pipe.InitBuffer(qk, 2, bk * d * es);
    pipe.InitBuffer(qv, split ? 2 : 1, bk * d * es);
    pipe.InitBuffer(qa2, 2, std::max(bq * d, bq * bk) * es);
    pipe.InitBuffer(qb2, 2, bk * d * es);
    if (split) {
      pipe.InitBuffer(qp, 2, bq * bk * es);
      pipe.InitBuffer(qc, 2, std::max(bq * bk, bq * d) * 4);
    }
  }

  // S = Q K^T for the step into the L0C tensor c.
  void scores(const FaArgs& g, const FaStep& st, const LocalTensor<float>& c) {
    const std::uint32_t d = g.s.D, M1 = static_cast<std::uint32_t>(ceil_div(st.qr, 16));
    const std::uint32_t N1 = static_cast<std::uint32_t>(ceil_div(st.w, 16)), K1 = d / 16;
    if (st.first) {
      q1 = qq.AllocTensor<T>();
      GlobalTensor<T> gq;
      gq.SetGlobalBuffer(q_at<T>(g, st, st.q0));
      DataCopy(q1, gq, Nd2NzParams{1, u16(st.qr), u16(d), 0, u16(g.s.q.ss), u16(M1 * 16), 1, 0});
      qq.EnQue(q1);
      q1 = qq.DeQue<T>();
    }
    LocalTensor<T> k1 = qk.AllocTensor<T>();
    GlobalTensor<T> gk;
    gk.SetGlobalBuffer(kv_at<T>(g, false, st, st.kv0));
    // K rows are B^T (n x k): in L1 NZ the fractal (fk, fn) sits at fk * N1 + fn, as L0B wants it.
    DataCopy(k1, gk, Nd2NzParams{1, u16(st.w), u16(d), 0, u16(g.s.k.ss), u16(N1 * 16), 1, 0});
    qk.EnQue(k1);
    k1 = qk.DeQue<T>();
    LocalTensor<T> a2 = qa2.AllocTensor<T>(), b2 = qb2.AllocTensor<T>();
    for (std::uint32_t fm = 0; fm < M1; ++fm)
      LoadData(a2[static_cast<std::uint64_t>(fm) * K1 * 256], q1, LoadData2DParams{u16(fm), u8(K1), u16(M1), false});
    LoadData(b2, k1, LoadData2DParams{0, u8(K1 * N1), 1, false});
    qk.FreeTensor(k1);
    if (st.last) qq.FreeTensor(q1);
    qa2.EnQue(a2);
    qb2.EnQue(b2);
    a2 = qa2.DeQue<T>();
    b2 = qb2.DeQue<T>();
    Mmad(c, a2, b2, MmadParams{u16(st.qr), u16(st.w), u16(d), true, false});
    qa2.FreeTensor(a2);
    qb2.FreeTensor(b2);
  }

  // V rows of the step into L1 (issued early: they do not depend on P).
  void load_v(const FaArgs& g, const FaStep& st) {
    LocalTensor<T> v1 = qv.AllocTensor<T>();
    GlobalTensor<T> gv;
    gv.SetGlobalBuffer(kv_at<T>(g, true, st, st.kv0));
    DataCopy(v1, gv, Nd2NzParams{1, u16(st.w), u16(g.s.D), 0, u16(g.s.v.ss), u16(ceil_to(st.w, 16)), 1, 0});
    qv.EnQue(v1);
  }

  // PV = P V with P (qr x w, NZ with 16-row column blocks) already in L1 and V from load_v, into the L0C tensor c.
  void pv(const FaArgs& g, const FaStep& st, const LocalTensor<T>& p1, const LocalTensor<float>& c) {
    const std::uint32_t d = g.s.D, M1 = static_cast<std::uint32_t>(ceil_div(st.qr, 16));
    const std::uint32_t K1 = static_cast<std::uint32_t>(ceil_div(st.w, 16)), N1 = d / 16;
    LocalTensor<T> v1 = qv.DeQue<T>();
    LocalTensor<T> a2 = qa2.AllocTensor<T>(), b2 = qb2.AllocTensor<T>();
    for (std::uint32_t fm = 0; fm < M1; ++fm)
      LoadData(a2[static_cast<std::uint64_t>(fm) * K1 * 256], p1, LoadData2DParams{u16(fm), u8(K1), u16(M1), false});
    for (std::uint32_t fk = 0; fk < K1; ++fk)
      LoadData(b2[static_cast<std::uint64_t>(fk) * N1 * 256], v1, LoadData2DParams{u16(fk), u8(N1), u16(K1), true});
    qv.FreeTensor(v1);
    qa2.EnQue(a2);
    qb2.EnQue(b2);
    a2 = qa2.DeQue<T>();
    b2 = qb2.DeQue<T>();
    Mmad(c, a2, b2, MmadParams{u16(st.qr), u16(d), u16(st.w), true, false});
    qa2.FreeTensor(a2);
    qb2.FreeTensor(b2);
  }
};

template <class T>
void fa_cube_split(const FaArgs& g) {
  const std::vector<FaStep> steps = steps_of(g, GetBlockIdx(), GetBlockNum());
  const Slots slot = slots_of(g);
  TPipe pipe;
  CubeBuffers<T> cb;
  cb.init(pipe, g, true);
  auto drain = [&](GM_ADDR dst, std::uint32_t rows, std::uint32_t cols, std::uint32_t stride, std::uint32_t flag) {
    LocalTensor<float> c = cb.qc.template DeQue<float>();
    GlobalTensor<float> gs;
    gs.SetGlobalBuffer(dst);
    Fixpipe(gs, c, FixpipeParams{u16(cols), u16(rows), u16(ceil_to(rows, 16)), stride, false});
    cb.qc.FreeTensor(c);
    cross_core_set_flag(2, PIPE_FIX, flag);
  };
  auto pv_step = [&](std::size_t i) {
    const FaStep& st = steps[i];
    cb.load_v(g, st);
    LocalTensor<T> p1 = cb.qp.template AllocTensor<T>();
    cross_core_wait_flag(kPReady, PIPE_MTE2);
    GlobalTensor<T> gp;
    gp.SetGlobalBuffer(slot.p(i));
    DataCopy(p1, gp, Nd2NzParams{1, u16(st.qr), u16(st.w), 0, u16(g.t.bk), u16(ceil_to(st.qr, 16)), 1, 0});
    cb.qp.EnQue(p1);
    p1 = cb.qp.template DeQue<T>();
    LocalTensor<float> c = cb.qc.template AllocTensor<float>();
    cb.pv(g, st, p1, c);
    cb.qc.EnQue(c);
    cb.qp.FreeTensor(p1);
    drain(slot.pv(i), st.qr, g.s.D, g.s.D, kPvReady);
  };
  for (std::size_t i = 0; i < steps.size(); ++i) {
    LocalTensor<float> c = cb.qc.template AllocTensor<float>();
    cb.scores(g, steps[i], c);
    cb.qc.EnQue(c);
    drain(slot.s(i), steps[i].qr, steps[i].w, g.t.bk, kSReady);
    if (i > 0) pv_step(i - 1);
  }
  if (!steps.empty()) pv_step(steps.size() - 1);
}

// --- Vector side (split chips) ------------------------------------------------------------------------------------

// Per-row softmax state and buffers of one AIV (rows r0 .. r0 + rows of each unit).
template <class T>
struct SoftmaxState {
  TQue<TPosition::VECIN, 2> qs;
  TQue<TPosition::VECIN, 1> qpv, qmask;
  TQue<TPosition::VECOUT, 1> qp, qo;
  TBuf<TPosition::VECCALC> fo[2], fm[2], fl[2], falpha[2], fmx, frs, fbc, fmaskf;
  std::uint32_t R = 0;  // rows per AIV (max)

  void init(TPipe& pipe, const FaArgs& g) {
    R = static_cast<std::uint32_t>(ceil_div(g.t.bq, 2));
    const std::uint64_t bk = g.t.bk, d = g.s.D, vec = ceil_to(R * 4ULL, 32);
    pipe.InitBuffer(qs, 2, R * bk * 4);
    pipe.InitBuffer(qpv, 1, R * d * 4);
    pipe.InitBuffer(qp, 1, R * bk * sizeof(T));
    pipe.InitBuffer(qo, 1, R * ub_row<T>(d) * sizeof(T));
    for (int p = 0; p < 2; ++p) {
      pipe.InitBuffer(fo[p], R * d * 4);
      pipe.InitBuffer(fm[p], vec);
      pipe.InitBuffer(fl[p], vec);
      pipe.InitBuffer(falpha[p], vec);
    }
    pipe.InitBuffer(fmx, vec * ceil_div(bk, 64));
    pipe.InitBuffer(frs, vec * ceil_div(bk, 64));
    pipe.InitBuffer(fbc, ceil_to(R, 8) * 32ULL);
    if (g.s.mask) {
      pipe.InitBuffer(qmask, 1, R * bk * sizeof(T));
      pipe.InitBuffer(fmaskf, R * 64 * 4ULL);
    }
  }
};

// Sets columns [c0, bk) of `rows` rows (starting at row `r`) of an ND fp32 tile with rows of bk to kMasked.
inline void mask_columns(const LocalTensor<float>& s, std::uint32_t bk, std::uint32_t r, std::uint32_t rows, std::uint32_t c0) {
  for (std::uint32_t h = 0; h < bk; h += 64) {
    const std::uint32_t lanes = std::min<std::uint32_t>(64, bk - h);
    if (c0 >= h + lanes) continue;
    const std::uint32_t lo = c0 > h ? c0 - h : 0;
    const std::uint64_t upto = lanes == 64 ? ~0ULL : (1ULL << lanes) - 1;  // lanes of this row only
    const std::uint64_t bits[2] = {upto & ~((1ULL << lo) - 1), 0};
    Duplicate(s[static_cast<std::uint64_t>(r) * bk + h], kMasked, bits, u8(rows), 1, u8(bk / 8));
  }
}

// Row-wise op of an ND fp32 tile (rows of `cols`, stride `stride` elements) with a per-row value broadcast in `bc`
// ([rows][8] blocks): x[r][c] = op(x[r][c], bc[r]).
enum class RowOp { kSub, kMul, kDiv };
inline void row_broadcast(RowOp op, const LocalTensor<float>& x, const LocalTensor<float>& bc, std::uint32_t rows,
                          std::uint32_t cols, std::uint32_t stride) {
  const std::uint8_t rep = u8(stride / 8);
  for (std::uint32_t h = 0; h < cols; h += 64) {
    const std::uint64_t mask = std::min<std::uint32_t>(64, cols - h);
    const BinaryRepeatParams p{1, 1, 0, rep, rep, 1};
    const LocalTensor<float> xh = x[h];
    if (op == RowOp::kSub) Sub(xh, xh, bc, mask, u8(rows), p);
    else if (op == RowOp::kMul) Mul(xh, xh, bc, mask, u8(rows), p);
    else Div(xh, xh, bc, mask, u8(rows), p);
  }
}

// A row reduction of an ND fp32 tile with rows of bk (16, 32 or a multiple of 64): one value per row into `out`,
// using `parts` (bk / 64 vectors of rows) as scratch.
inline void row_reduce(bool max, const LocalTensor<float>& out, const LocalTensor<float>& s, const LocalTensor<float>& parts,
                       std::uint32_t rows, std::uint32_t bk, std::uint32_t vec) {
  const std::uint32_t chunks = static_cast<std::uint32_t>(ceil_div(bk, 64)), lanes = std::min<std::uint32_t>(64, bk);
  for (std::uint32_t h = 0; h < chunks; ++h) {
    const LocalTensor<float> dst = chunks == 1 ? out : parts[h * vec];
    if (max) WholeReduceMax(dst, s[h * 64], lanes, u8(rows), 1, 1, u8(bk / 8));
    else WholeReduceSum(dst, s[h * 64], lanes, u8(rows), 1, 1, u8(bk / 8));
  }
  if (chunks == 1) return;
  if (max) Max(out, parts, parts[vec], rows);
  else Add(out, parts, parts[vec], rows);
  for (std::uint32_t h = 2; h < chunks; ++h) {
    if (max) Max(out, out, parts[h * vec], rows);
    else Add(out, out, parts[h * vec], rows);
  }
}

template <class T>
void fa_vector_split(const FaArgs& g) {
  const std::vector<FaStep> steps = steps_of(g, GetBlockIdx(), GetBlockNum());
  const Slots slot = slots_of(g);
  TPipe pipe;
  SoftmaxState<T> sm;
  sm.init(pipe, g);
  const std::uint32_t bk = g.t.bk, d = g.s.D, vec = static_cast<std::uint32_t>(ceil_to(sm.R, 8));
  const bool shared_mask = g.s.mask_rows_shared();
  // This AIV's rows of a unit of qr rows: the first ceil(qr / 2) on sub-block 0, the rest on 1.
  auto my_rows = [&](const FaStep& st, std::uint32_t* r0) {
    const std::uint32_t half = (st.qr + 1) / 2;
    *r0 = GetSubBlockIdx() == 0 ? 0 : half;
    return GetSubBlockIdx() == 0 ? half : st.qr - half;
  };
  std::uint32_t unit = 0;  // units started so far (state parity)
  std::vector<std::uint32_t> unit_of(steps.size());
  for (std::size_t i = 0; i < steps.size(); ++i) {
    if (i > 0 && steps[i].first) ++unit;
    unit_of[i] = unit;
  }
  auto softmax_step = [&](std::size_t i) {
    const FaStep& st = steps[i];
    std::uint32_t r0 = 0;
    const std::uint32_t rows = my_rows(st, &r0);
    const std::uint32_t p = unit_of[i] % 2;
    cross_core_wait_flag(kSReady, PIPE_MTE2);
    if (rows == 0) {
      cross_core_set_flag(2, PIPE_MTE2, kPReady);
      return;
    }
    LocalTensor<float> s = sm.qs.template AllocTensor<float>();
    GlobalTensor<float> gs;
    gs.SetGlobalBuffer(slot.s(i) + static_cast<std::uint64_t>(r0) * bk * 4);
    DataCopy(s, gs, static_cast<std::uint64_t>(rows) * bk);
    LocalTensor<T> mk;
    if (g.s.mask) {
      mk = sm.qmask.template AllocTensor<T>();
      // A shared row (key padding) is read once; the cast below reads it for every row.
      copy_rows_in(mk, g.mask + (g.s.mask_at(st.b, st.n, st.q0 + r0) + st.kv0) * sizeof(T), shared_mask ? 1 : rows, st.w, g.s.SK);
      sm.qmask.EnQue(mk);
    }
    sm.qs.EnQue(s);
    s = sm.qs.template DeQue<float>();
    Muls(s, s, g.s.scale, static_cast<std::uint64_t>(rows) * bk);
    if (g.s.mask) {
      // The mask rows (ub_row<T>(w) apart, or one row read by every repeat) in 64-column chunks: cast into fp32
      // scratch, add to the scores.
      mk = sm.qmask.template DeQue<T>();
      const LocalTensor<float> mf = sm.fmaskf.template Get<float>();
      const std::uint32_t mrow = shared_mask ? 0 : static_cast<std::uint32_t>(ub_row<T>(st.w));
      for (std::uint32_t h = 0; h < st.w; h += 64) {
        const std::uint64_t lanes = std::min<std::uint32_t>(64, st.w - h);
        Cast(mf, mk[h], RoundMode::CAST_NONE, lanes, u8(rows), UnaryRepeatParams{1, 1, 8, u8(mrow * sizeof(T) / 32)});
        Add(s[h], s[h], mf, lanes, u8(rows), BinaryRepeatParams{1, 1, 1, u8(bk / 8), u8(bk / 8), 8});
      }
      sm.qmask.FreeTensor(mk);
    }
    if (st.w < bk) mask_columns(s, bk, 0, rows, st.w);
    if (g.s.causal && st.kv0 + st.w - 1 > st.q0 + r0) {
      // Query row qi sees keys <= qi: columns from qi + 1 - kv0 on are masked (all of them for rows above the
      // block, which go in one instruction per 64 columns).
      std::uint32_t r = 0;
      while (r < rows && st.q0 + r0 + r < st.kv0) ++r;
      if (r > 0) mask_columns(s, bk, 0, r, 0);
      for (; r < rows; ++r) {
        const std::uint32_t qi = st.q0 + r0 + r;
        if (qi + 1 < st.kv0 + st.w) mask_columns(s, bk, r, 1, qi + 1 - st.kv0);
      }
    }
    const LocalTensor<float> m = sm.fm[p].template Get<float>(), l = sm.fl[p].template Get<float>();
    const LocalTensor<float> alpha = sm.falpha[i % 2].template Get<float>(), mx = sm.fmx.template Get<float>();
    const LocalTensor<float> rs = sm.frs.template Get<float>(), bc = sm.fbc.template Get<float>();
    if (st.first) {
      row_reduce(true, m, s, mx, rows, bk, vec);
      Maxs(m, m, kMasked, rows);  // a first block masked with -inf (left padding) must not make s - m NaN
    } else {
      row_reduce(true, mx, s, rs, rows, bk, vec);
      Max(mx, m, mx, rows);     // m_new
      Sub(alpha, m, mx, rows);  // m_old - m_new
      Exp(alpha, alpha, rows);
      Adds(m, mx, 0.0f, rows);
    }
    Brcb(bc, m, u8(ceil_div(rows, 8)), BrcbRepeatParams{1, 8});
    row_broadcast(RowOp::kSub, s, bc, rows, bk, bk);
    Exp(s, s, static_cast<std::uint64_t>(rows) * bk);
    if (st.first) {
      row_reduce(false, l, s, mx, rows, bk, vec);
    } else {
      row_reduce(false, rs, s, mx, rows, bk, vec);
      Mul(l, l, alpha, rows);
      Add(l, l, rs, rows);
    }
    LocalTensor<T> pt = sm.qp.template AllocTensor<T>();
    convert(pt, s, static_cast<std::uint64_t>(rows) * bk);
    sm.qs.FreeTensor(s);
    sm.qp.EnQue(pt);
    pt = sm.qp.template DeQue<T>();
    GlobalTensor<T> gp;
    gp.SetGlobalBuffer(slot.p(i) + static_cast<std::uint64_t>(r0) * bk * sizeof(T));
    DataCopy(gp, pt, static_cast<std::uint64_t>(rows) * bk);
    sm.qp.FreeTensor(pt);
    cross_core_set_flag(2, PIPE_MTE3, kPReady);
  };
  auto accumulate_step = [&](std::size_t i) {
    const FaStep& st = steps[i];
    std::uint32_t r0 = 0;
    const std::uint32_t rows = my_rows(st, &r0);
    const std::uint32_t p = unit_of[i] % 2;
    cross_core_wait_flag(kPvReady, PIPE_MTE2);
    if (rows == 0) return;
    LocalTensor<float> pv = sm.qpv.template AllocTensor<float>();
    GlobalTensor<float> gpv;
    gpv.SetGlobalBuffer(slot.pv(i) + static_cast<std::uint64_t>(r0) * d * 4);
    DataCopy(pv, gpv, static_cast<std::uint64_t>(rows) * d);
    sm.qpv.EnQue(pv);
    pv = sm.qpv.template DeQue<float>();
    const LocalTensor<float> o = sm.fo[p].template Get<float>(), bc = sm.fbc.template Get<float>();
    if (st.first) {
      Adds(o, pv, 0.0f, static_cast<std::uint64_t>(rows) * d);
    } else {
      Brcb(bc, sm.falpha[i % 2].template Get<float>(), u8(ceil_div(rows, 8)), BrcbRepeatParams{1, 8});
      row_broadcast(RowOp::kMul, o, bc, rows, d, d);
      Add(o, o, pv, static_cast<std::uint64_t>(rows) * d);
    }
    sm.qpv.FreeTensor(pv);
    if (!st.last) return;
    Brcb(bc, sm.fl[p].template Get<float>(), u8(ceil_div(rows, 8)), BrcbRepeatParams{1, 8});
    row_broadcast(RowOp::kDiv, o, bc, rows, d, d);
    LocalTensor<T> ot = sm.qo.template AllocTensor<T>();
    convert(ot, o, static_cast<std::uint64_t>(rows) * d);
    sm.qo.EnQue(ot);
    ot = sm.qo.template DeQue<T>();
    store_o(g, st, st.q0 + r0, ot, rows);
    sm.qo.FreeTensor(ot);
  };
  for (std::size_t i = 0; i < steps.size(); ++i) {
    softmax_step(i);
    if (i > 0) accumulate_step(i - 1);
  }
  if (!steps.empty()) accumulate_step(steps.size() - 1);
}

// --- Coupled chips: one core, S and PV through L0C -> UB, P through UB -> L1 --------------------------------------

// A binary flag pair guarding one buffer between a producer and a consumer pipe, for buffers no TQue fits (L0C read
// by the Vector unit, L1 written by MTE3).
struct Handoff {
  pipe_t producer, consumer;
  std::uint32_t full = 0, free = 0;
  bool used = false;
  bool released = false;  // a release the producer has not waited for yet (the last one stays set at the end)
  Handoff() = default;
  Handoff(const Handoff&) = delete;
  Handoff& operator=(const Handoff&) = delete;
  ~Handoff() {
    if (released) detail::expect_left_set(consumer, producer, free);
  }
  void init(TPipe& pipe, pipe_t p, pipe_t c) {
    producer = p;
    consumer = c;
    full = pipe.AllocEventID(p, c);
    free = pipe.AllocEventID(c, p);
  }
  void acquire() {  // producer side, before writing
    if (used) wait_flag(consumer, producer, free);
    used = true;
    released = false;
  }
  void publish() { set_flag(producer, consumer, full); }   // producer side, after writing
  void take() { wait_flag(producer, consumer, full); }     // consumer side, before reading
  void release() {  // consumer side, after reading
    set_flag(consumer, producer, free);
    released = true;
  }
};

// Row operations on an NZ fp32 tile in UB: M1 row fractals by N1 column blocks, fractal (fm, fn) at
// (fn * M1 + fm) x 256 elements, 16 x 16 row-major inside. A column block (M1 x 256 elements) is contiguous.
struct NzTile {
  LocalTensor<float> t;
  std::uint32_t m1, n1;
  LocalTensor<float> block(std::uint32_t fn) const { return t[static_cast<std::uint64_t>(fn) * m1 * 256]; }
  std::uint64_t block_elems() const { return static_cast<std::uint64_t>(m1) * 256; }
  std::uint64_t elems() const { return block_elems() * n1; }
};

// One value per row (16 m1 rows) into `out`: combine the column blocks into `part` (one column block of scratch),
// then reduce its 16 lanes per row.
inline void nz_row_reduce(bool max, const LocalTensor<float>& out, const NzTile& x, const LocalTensor<float>& part) {
  LocalTensor<float> src = x.block(0);
  if (x.n1 > 1) {
    if (max) Max(part, x.block(0), x.block(1), x.block_elems());
    else Add(part, x.block(0), x.block(1), x.block_elems());
    for (std::uint32_t fn = 2; fn < x.n1; ++fn) {
      if (max) Max(part, part, x.block(fn), x.block_elems());
      else Add(part, part, x.block(fn), x.block_elems());
    }
    src = part;
  }
  // A row of a column block is 16 lanes (2 blocks); rows are 2 blocks apart.
  if (max) WholeReduceMax(out, src, 16, u8(x.m1 * 16), 1, 1, 2);
  else WholeReduceSum(out, src, 16, u8(x.m1 * 16), 1, 1, 2);
}

// A per-row vector (16 m1 values) broadcast into one column block: row r's value fills its 16 lanes.
inline void nz_row_broadcast(const LocalTensor<float>& bc, const LocalTensor<float>& v, std::uint32_t m1) {
  const std::uint8_t rep = u8(ceil_div(m1 * 16, 8));
  Brcb(bc, v, rep, BrcbRepeatParams{2, 16});      // value r into block 2r
  Brcb(bc[8], v, rep, BrcbRepeatParams{2, 16});   // and block 2r + 1
}

// Lane bits of a 64-lane repeat covering 4 rows of 16 columns: columns c with keep(row, c) false are set.
template <class F>
std::uint64_t row_group_bits(std::uint32_t first_row, F masked) {
  std::uint64_t bits = 0;
  for (std::uint32_t rr = 0; rr < 4; ++rr)
    for (std::uint32_t c = 0; c < 16; ++c)
      if (masked(first_row + rr, c)) bits |= 1ULL << (rr * 16 + c);
  return bits;
}

template <class T>
void fa_coupled(const FaArgs& g) {
  const std::vector<FaStep> steps = steps_of(g, GetBlockIdx(), GetBlockNum());
  if (steps.empty()) return;
  const std::uint64_t bq = g.t.bq, bk = g.t.bk, d = g.s.D, es = sizeof(T);
  const std::uint32_t dn = g.s.D / 16;
  const bool shared_mask = g.s.mask_rows_shared();
  TPipe pipe;
  CubeBuffers<T> cb;
  cb.init(pipe, g, false);
  TBuf<TPosition::CO1> l0c[2];
  TBuf<TPosition::A1> p_l1;
  TBuf<TPosition::VECCALC> s_ub, pv_ub, o_ub, part, bc, p_ub, nz_ub, out_ub, mask_ub, m_v, l_v, alpha_v, mx_v;
  for (auto& c : l0c) pipe.InitBuffer(c, std::max(bq * bk, bq * d) * 4);
  pipe.InitBuffer(p_l1, bq * bk * es);
  pipe.InitBuffer(s_ub, bq * bk * 4);
  pipe.InitBuffer(pv_ub, bq * d * 4);
  pipe.InitBuffer(o_ub, bq * d * 4);
  pipe.InitBuffer(part, bq * 16 * 4);
  pipe.InitBuffer(bc, bq * 16 * 4);
  pipe.InitBuffer(p_ub, bq * bk * es);
  pipe.InitBuffer(nz_ub, bq * d * es);
  pipe.InitBuffer(out_ub, bq * d * es);
  for (auto* v : {&m_v, &l_v, &alpha_v, &mx_v}) pipe.InitBuffer(*v, bq * 4);
  Handoff c_ready[2], p_in_l1, p_in_ub, out_ready, mask_in;
  for (auto& h : c_ready) h.init(pipe, PIPE_M, PIPE_V);
  p_in_ub.init(pipe, PIPE_V, PIPE_MTE3);
  p_in_l1.init(pipe, PIPE_MTE3, PIPE_MTE1);
  out_ready.init(pipe, PIPE_V, PIPE_MTE3);
  if (g.s.mask) {
    pipe.InitBuffer(mask_ub, bq * bk * es);
    mask_in.init(pipe, PIPE_MTE2, PIPE_V);
  }
  std::uint32_t next_c = 0;
  auto l0c_alloc = [&] {
    const std::uint32_t x = next_c++ % 2;
    c_ready[x].acquire();
    return x;
  };
  const LocalTensor<float> m = m_v.Get<float>(), l = l_v.Get<float>(), alpha = alpha_v.Get<float>(), mx = mx_v.Get<float>();
  const LocalTensor<float> o = o_ub.Get<float>(), bcast = bc.Get<float>(), scratch = part.Get<float>();

  auto scores = [&](const FaStep& st) {
    const std::uint32_t x = l0c_alloc();
    cb.scores(g, st, l0c[x].Get<float>());
    c_ready[x].publish();
    return x;
  };
  auto softmax = [&](const FaStep& st, std::uint32_t x) {
    const std::uint32_t m1 = static_cast<std::uint32_t>(ceil_div(st.qr, 16)), n1 = static_cast<std::uint32_t>(ceil_div(st.w, 16));
    const NzTile s{s_ub.Get<float>(), m1, n1};
    if (g.s.mask) {  // the mask rows' 16-column pieces land as NZ column blocks (fp16 16 x 16 fractals)
      mask_in.acquire();
      const LocalTensor<T> mk = mask_ub.Get<T>();
      const std::uint64_t row = g.s.mask_at(st.b, st.n, st.q0) + st.kv0;
      if (shared_mask) {  // one key-padding row, as it is
        copy_rows_in(mk, g.mask + row * es, 1, st.w, g.s.SK);
      } else {
        for (std::uint32_t fn = 0; fn < n1; ++fn) {
          const std::uint32_t cols = std::min<std::uint32_t>(16, st.w - fn * 16);
          GlobalTensor<T> gm;
          gm.SetGlobalBuffer(g.mask + (row + fn * 16) * es);
          DataCopyPad(mk[static_cast<std::uint64_t>(fn) * m1 * 256], gm,
                      DataCopyExtParams{u16(st.qr), static_cast<std::uint32_t>(cols * es),
                                        static_cast<std::uint32_t>((g.s.SK - cols) * es), 0},
                      DataCopyPadExtParams<T>{});
        }
      }
      mask_in.publish();
    }
    c_ready[x].take();
    DataCopy(s.t, l0c[x].Get<float>(), s.elems());  // L0C -> UB on the Vector pipe
    c_ready[x].release();
    Muls(s.t, s.t, g.s.scale, s.elems());
    if (g.s.mask) {
      mask_in.take();
      const LocalTensor<T> mk = mask_ub.Get<T>();
      for (std::uint32_t fn = 0; fn < n1; ++fn) {
        if (shared_mask)  // the row's 16 values of this column block into each of its 16 m1 rows (source repeat stride 0)
          Cast(scratch, mk[static_cast<std::uint64_t>(fn) * 16], RoundMode::CAST_NONE, 16, u8(m1 * 16), UnaryRepeatParams{1, 1, 2, 0});
        else
          convert(scratch, mk[static_cast<std::uint64_t>(fn) * m1 * 256], s.block_elems());
        Add(s.block(fn), s.block(fn), scratch, s.block_elems());
      }
      mask_in.release();
    }
    if (st.w % 16) {  // columns past the keys in the last column block
      const std::uint32_t valid = st.w % 16;
      const std::uint64_t bits[2] = {row_group_bits(0, [&](std::uint32_t, std::uint32_t c) { return c >= valid; }), 0};
      Duplicate(s.block(n1 - 1), kMasked, bits, u8(m1 * 4), 1, 8);
    }
    if (g.s.causal && st.kv0 + st.w - 1 > st.q0) {
      // Blocks start at multiples of 16, so a fractal is fully visible, fully masked, or on the diagonal.
      const std::int64_t delta = (static_cast<std::int64_t>(st.q0) - st.kv0) / 16;  // fn - fm on the diagonal
      for (std::uint32_t fn = 0; fn < n1; ++fn) {
        const std::int64_t masked = std::min<std::int64_t>(m1, static_cast<std::int64_t>(fn) - delta);
        if (masked > 0) Duplicate(s.block(fn), kMasked, static_cast<std::uint64_t>(masked) * 256);
        const std::int64_t diag = static_cast<std::int64_t>(fn) - delta;
        if (diag < 0 || diag >= m1) continue;
        for (std::uint32_t gr = 0; gr < 4; ++gr) {
          const std::uint64_t bits[2] = {row_group_bits(gr * 4, [](std::uint32_t r, std::uint32_t c) { return c > r; }), 0};
          Duplicate(s.block(fn)[static_cast<std::uint64_t>(diag) * 256 + gr * 64], kMasked, bits, 1, 1, 8);
        }
      }
    }
    if (st.first) {
      nz_row_reduce(true, m, s, scratch);
      Maxs(m, m, kMasked, m1 * 16);  // a first block masked with -inf (left padding) must not make s - m NaN
    } else {
      nz_row_reduce(true, mx, s, scratch);
      Max(mx, m, mx, m1 * 16);
      Sub(alpha, m, mx, m1 * 16);
      Exp(alpha, alpha, m1 * 16);
      Adds(m, mx, 0.0f, m1 * 16);
    }
    nz_row_broadcast(bcast, m, m1);
    for (std::uint32_t fn = 0; fn < n1; ++fn) Sub(s.block(fn), s.block(fn), bcast, s.block_elems());
    Exp(s.t, s.t, s.elems());
    if (st.first) {
      nz_row_reduce(false, l, s, scratch);
    } else {
      nz_row_reduce(false, mx, s, scratch);
      Mul(l, l, alpha, m1 * 16);
      Add(l, l, mx, m1 * 16);
    }
    // P: the fp32 fractals cast to fp16 are the L1 NZ layout of the left operand (16 x 16 fp16 fractals).
    p_in_ub.acquire();
    convert(p_ub.Get<T>(), s.t, s.elems());
    p_in_ub.publish();
    p_in_ub.take();
    p_in_l1.acquire();
    DataCopy(p_l1.Get<T>(), p_ub.Get<T>(), s.elems());  // UB -> L1 on MTE3
    p_in_ub.release();
    p_in_l1.publish();
  };
  auto pv = [&](const FaStep& st) {
    cb.load_v(g, st);
    const std::uint32_t x = l0c_alloc();
    p_in_l1.take();
    cb.pv(g, st, p_l1.Get<T>(), l0c[x].Get<float>());
    p_in_l1.release();
    c_ready[x].publish();
    return x;
  };
  auto accumulate = [&](const FaStep& st, std::uint32_t x) {
    const std::uint32_t m1 = static_cast<std::uint32_t>(ceil_div(st.qr, 16));
    const NzTile acc{o, m1, dn};
    const LocalTensor<float> pvt = pv_ub.Get<float>();
    c_ready[x].take();
    DataCopy(pvt, l0c[x].Get<float>(), acc.elems());
    c_ready[x].release();
    if (st.first) {
      Adds(o, pvt, 0.0f, acc.elems());
    } else {
      nz_row_broadcast(bcast, alpha, m1);
      for (std::uint32_t fn = 0; fn < dn; ++fn) Mul(acc.block(fn), acc.block(fn), bcast, acc.block_elems());
      Add(o, o, pvt, acc.elems());
    }
    if (!st.last) return;
    nz_row_broadcast(bcast, l, m1);
    for (std::uint32_t fn = 0; fn < dn; ++fn) Div(acc.block(fn), acc.block(fn), bcast, acc.block_elems());
    // NZ -> ND in the UB: in T a row's 16 values of a column block are one 32 B block, so one strided copy per
    // column block (8 rows per repeat) puts them at their place in the rows; then one contiguous copy to GM.
    const LocalTensor<T> nz = nz_ub.Get<T>(), ot = out_ub.Get<T>();
    convert(nz, o, acc.elems());
    out_ready.acquire();
    const std::uint32_t row_blocks = static_cast<std::uint32_t>(d * es / 32);
    for (std::uint32_t fn = 0; fn < dn; ++fn)
      Adds(ot[static_cast<std::uint64_t>(fn) * 16], nz[static_cast<std::uint64_t>(fn) * m1 * 256], 0.0f, 128,
           u8(m1 * 2), UnaryRepeatParams{u16(row_blocks), 1, u8(8 * row_blocks), 8});
    out_ready.publish();
    out_ready.take();
    store_o(g, st, st.q0, ot, st.qr);
    out_ready.release();
  };
  std::uint32_t s_buf = scores(steps[0]);
  for (std::size_t i = 0; i < steps.size(); ++i) {
    const std::uint32_t this_s = s_buf;
    if (i + 1 < steps.size()) s_buf = scores(steps[i + 1]);  // the Cube runs a block ahead
    softmax(steps[i], this_s);
    accumulate(steps[i], pv(steps[i]));
  }
}

template <class T>
void fa_kernel(const FaArgs& g, bool split) {
  if (!split) fa_coupled<T>(g);
  else if (IsAic()) fa_cube_split<T>(g);
  else fa_vector_split<T>(g);
}

// --- Host side ----------------------------------------------------------------------------------------------------

// A parameter the call cannot do without.
std::uint32_t required_uint(const Params& p, const std::string& key, std::uint32_t max) {
  if (!p.count(key)) throw InputError("flash_attention: parameter '" + key + "' is required (B, N, S, D; KVN, SK, causal, mask, mask_shape, scale optional)");
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
  return c.layout == AttentionLayout::kBsnd ? FaLayout{seq * heads * D, D, heads * D, 0} : FaLayout{heads * seq * D, seq * D, D, 0};
}

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
  if (!c.B || !c.N || !c.S || !c.D || !c.KVN || !c.SK) throw InputError("flash_attention: B, N, KVN, S, SK and D must be positive");
  c.causal = param_uint(p, "causal", 0, 1);
  c.mask = param_uint(p, "mask", 0, 1);
  if (const auto ms = uint_triple(p, "mask_shape", "MB,MN,MS"); !ms.empty())
    c.mask_shape = std::vector<std::uint32_t>{static_cast<std::uint32_t>(ms[0]), static_cast<std::uint32_t>(ms[1]), static_cast<std::uint32_t>(ms[2])};
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
      {"B", {c.B, 1u << 16}}, {"N", {c.N, 1u << 12}}, {"S", {c.S, 1u << 20}}, {"D", {c.D, 256}},
      {"KVN", {c.KVN, 1u << 12}}, {"SK", {c.SK, 1u << 20}}};
  for (const auto& [name, v] : dims)
    if (v.first > v.second) throw InputError(std::string("flash_attention: ") + name + "=" + std::to_string(v.first) + " is more than " + std::to_string(v.second));
  s.B = c.B;
  s.N = c.N;
  s.S = c.S;
  s.D = c.D;
  s.KVN = c.KVN ? c.KVN : c.N;
  s.SK = c.SK ? c.SK : c.S;
  s.causal = c.causal;
  s.mask = c.mask;
  if (!s.B || !s.N || !s.S || !s.D) throw InputError("flash_attention: B, N, KVN, S, SK and D must be positive");
  if (s.D % 16 != 0) throw InputError("flash_attention: D=" + std::to_string(s.D) + " must be a multiple of 16 (at most 256)");
  if (s.N % s.KVN != 0)
    throw InputError("flash_attention: N=" + std::to_string(s.N) + " query heads cannot be grouped over KVN=" + std::to_string(s.KVN) + " key/value heads");
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
        throw InputError("flash_attention: mask_shape='" + text + "': " + "BNS"[i] + " of the mask must be 1 or " + std::to_string(full[i]));
    s.MB = ms[0];
    s.MN = ms[1];
    s.MS = ms[2];
  }
  const double scale = c.scale ? *c.scale : 1.0 / std::sqrt(static_cast<double>(s.D));
  if (!std::isfinite(scale) || scale <= 0) throw InputError("flash_attention: scale=" + std::to_string(scale) + " is not a positive number");
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

// The mask's shape: S x SK for one table (the usual call), else [MB, MN, MS, SK].
Shape mask_shape(const FaShape& s) {
  if (s.MB == 1 && s.MN == 1 && s.MS == s.S) return Shape{s.S, s.SK};
  return Shape{s.MB, s.MN, s.MS, s.SK};
}

// Elements a tensor of `heads` heads and `seq` rows spans in its layout.
std::uint64_t extent(const FaLayout& l, std::uint64_t B, std::uint64_t heads, std::uint64_t seq, std::uint64_t D) {
  return l.at(B - 1, heads - 1, seq - 1) + D;
}

// The largest blocks (Bq rows, Bk columns) whose buffers fit the chip: the cube side's L1/L0 ping-pong buffers and
// the vector side's UB (scores in two buffers, P, PV, two output accumulators and per-row vectors).
FaTiling plan_fa(const FaShape& s, std::uint64_t es, const config::ChipConfig& chip) {
  const auto& b = chip.buffers;
  const std::uint64_t d = s.D;
  // Blocks no larger than the sequences need (a short sequence gets a small block and a small workspace).
  const std::uint64_t sq16 = ceil_to(s.S, 16), sk16 = ceil_to(s.SK, 16);
  for (std::uint64_t bq : {128, 64, 32, 16}) {
    if (bq > sq16 && bq > 16 && bq / 2 >= sq16) continue;
    for (std::uint64_t bk : {256, 128, 64, 32, 16}) {
      if (bk > sk16 && bk > 16 && bk / 2 >= sk16) continue;
      const std::uint64_t l1 = (bq * d + 2 * bq * bk + 4 * bk * d) * es;
      const bool cube_fits = l1 <= b.l1.size && 2 * std::max(bq * d, bq * bk) * es <= b.l0a.size &&
                             2 * bk * d * es <= b.l0b.size && 2 * std::max(bq * bk, bq * d) * 4 <= b.l0c.size &&
                             (d / 16) * (bk / 16) <= 255;
      std::uint64_t ub = 0;
      if (chip.split()) {  // per AIV: half the rows (see SoftmaxState)
        const std::uint64_t r = (bq + 1) / 2, vec = ceil_to(r * 4, 32);
        ub = 2 * r * bk * 4 + r * d * 4 + r * bk * es + r * ub_row<float>(d) * es + 2 * r * d * 4 + 6 * vec +
             2 * vec * ceil_div(bk, 64) + ceil_to(r, 8) * 32;
        if (s.mask) ub += r * bk * es + r * 64 * 4;
      } else {  // one core: S, PV, O in fp32, P and O in T, two column blocks of scratch, four row vectors
        ub = bq * bk * 4 + 2 * bq * d * 4 + bq * bk * es + 2 * bq * d * es + 2 * bq * 16 * 4 + 4 * bq * 4;
        if (s.mask) ub += bq * bk * es;
      }
      const bool l1_fits = chip.split() || l1 - bq * bk * es <= b.l1.size;  // coupled: one P buffer, one V buffer
      if (!cube_fits || !l1_fits || ub > b.ub.size) continue;
      FaTiling t;
      t.bq = static_cast<std::uint32_t>(bq);
      t.bk = static_cast<std::uint32_t>(bk);
      t.slot_bytes = ceil_to(2 * (bq * bk * 4 + bq * bk * es + bq * d * 4), 512);
      const std::uint64_t units = static_cast<std::uint64_t>(s.B) * s.N * ceil_div(s.S, bq);
      t.block_dim = static_cast<std::uint32_t>(std::min<std::uint64_t>(units, chip.cube_cores()));
      return t;
    }
  }
  throw InputError("flash_attention: no block of D=" + std::to_string(s.D) + " fits the buffers of chip " + chip.name);
}

// fp32 reference: softmax in double over each query row, from the same fp16/bf16 inputs.
std::vector<HostTensor> fa_reference(const std::vector<TensorDesc>&, const Call& call, const std::vector<HostTensor>& v) {
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
        for (std::uint32_t c = 0; c < s.D; ++c) o[i * s.o.ss + c] = static_cast<float>(acc[c] / sum);
      }
    }
  }
  return {out};
}

OpDef flash_attention_op() {
  OpDef d;
  d.name = "flash_attention";
  d.summary = "O = softmax(scale Q K^T + mask) V, BNSD or BSND layout (or explicit strides), grouped-query heads (KVN), causal, online softmax in fp32";
  d.params = {"B", "N", "KVN", "S", "SK", "D", "causal", "mask", "mask_shape", "scale", "layout", "q_strides", "k_strides", "v_strides",
              "o_strides", "q_offset", "k_offset", "v_offset", "o_offset"};
  d.parse = [](const Params& p) -> Call { return parse_call(p); };
  d.inputs = [](const Params& p, DType t) {
    if (t == DType::kFp32) throw InputError("flash_attention takes fp16 or bf16");
    const FaShape s = resolve(parse_call(p));
    // The natural shapes of the layout (explicit strides come with the graph's own shapes).
    auto shape = [&](std::uint64_t heads, std::uint64_t seq, const FaLayout& l) {
      return s.bsnd ? Shape{s.B, seq, heads, s.D} : l.off || l.ss != s.D ? Shape{extent(l, s.B, heads, seq, s.D)} : Shape{s.B, heads, seq, s.D};
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
        throw InputError("flash_attention: input " + std::to_string(i) + " (" + (in.size() > i ? shape_string(in[i].shape) : "missing") +
                         ") is smaller than the " + std::to_string(need) + " elements its layout reaches");
    }
    if (s.mask && (in.size() < 4 || elements(in[3].shape) != elements(mask_shape(s))))
      throw InputError("flash_attention: the mask must be MB x MN x MS x SK = " + shape_string(mask_shape(s)) +
                       (in.size() < 4 ? std::string(", none given") : ", not " + shape_string(in[3].shape)));
    OpPlan plan;
    const std::uint64_t o_span = extent(s.o, s.B, s.N, s.S, s.D);
    plan.outputs = {{s.bsnd ? Shape{s.B, s.S, s.N, s.D} : o_span == static_cast<std::uint64_t>(s.B) * s.N * s.S * s.D && s.o.ss == s.D
                                                             ? Shape{s.B, s.N, s.S, s.D} : Shape{o_span}, in[0].dtype}};
    plan.type = KernelType::kMix;
    plan.block_dim = g.t.block_dim;
    plan.workspace_bytes = chip.split() ? g.t.slot_bytes * g.t.block_dim : 0;
    // FLOPs of the two matmuls over the visible score entries (2 D each for Q K^T and P V): the usual count.
    double entries = 0;
    for (std::uint32_t qb = 0; qb < query_blocks(g); ++qb) {
      const std::uint32_t q0 = qb * g.t.bq, qr = std::min(g.t.bq, g.s.S - q0);
      for (std::uint32_t i = q0; i < q0 + qr; ++i) entries += g.s.causal ? std::min(g.s.SK, i + 1) : g.s.SK;
    }
    plan.flops = 4.0 * g.s.D * entries * g.s.B * g.s.N;
    plan.tiling = {{"block_q", g.t.bq}, {"block_k", g.t.bk}, {"workspace_per_block", static_cast<double>(g.t.slot_bytes)},
                   {"units", static_cast<double>(query_blocks(g)) * g.s.B * g.s.N}};
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

std::vector<OpDef> attention_ops() { return {flash_attention_op()}; }

}  // namespace npusim::stack::ops
