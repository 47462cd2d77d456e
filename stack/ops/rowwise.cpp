// Ops that work row by row over the last dimension: Softmax, LogSoftmax, LayerNorm, RMSNorm, SwiGLU, RoPE (half and
// interleaved). The rows are split evenly over the vector cores; each core streams tiles of rows through
// double-buffered VECIN/VECOUT queues, computing in fp32. The rows per tile follow from the UB size and the row
// length, so a smaller UB gives smaller tiles.
//
// Row reductions (max, sum) go in levels of 64 lanes: each row's 64-lane pieces reduce into its own partials
// (the row padded to a multiple of 64 with the identity), then one instruction reduces every row's partials at
// once. A per-row scalar is broadcast with Brcb into a 32 B block per row and applied with a zero source stride.
#include <algorithm>
#include <cmath>
#include <limits>

#include "common/util/error.hpp"
#include "stack/ops/row_util.hpp"
#include "stack/ops/op.hpp"

namespace npusim::stack::ops {

using hw::isa::DType;

namespace {

// v rounded to the element type t (as a store to t and a load back).
float round_to(DType t, float v) {
  std::uint8_t b[4];
  hw::isa::store_float(b, t, v);
  return hw::isa::load_float(b, t);
}

enum class RowKind { kSoftmax, kLogSoftmax, kLayerNorm, kRmsNorm, kSwiGlu, kRopeHalf, kRopeInterleaved };

// Kinds that reduce each row (max, sums): they need reduction scratch and may stream long rows in chunks.
constexpr bool reduces_rows(RowKind k) { return k != RowKind::kSwiGlu && k != RowKind::kRopeHalf && k != RowKind::kRopeInterleaved; }

struct RowArgs {
  RowKind kind = RowKind::kSoftmax;
  GM_ADDR x = 0, p1 = 0, p2 = 0, out = 0;  // p1, p2: gamma and beta, or cos and sin
  // LayerNorm: a residual added to x first (AddLayerNorm), the sum written out, the row mean and rstd (fp32) written.
  GM_ADDR res = 0, sum = 0, mean = 0, rstd = 0;
  bool add = false, stats = false;
  std::uint64_t rows = 0, h = 0;           // rows of h elements in, each giving ho elements out
  std::uint64_t ho = 0, seq = 0;           // rope: rows are positions modulo seq
  std::uint64_t heads = 1;                 // rope: consecutive rows sharing a position (the BSND layout)
  std::uint64_t per_block = 0, tile = 0;   // rows per core and per tile
  std::uint64_t chunk = 0;                 // columns per chunk of a row too long for the UB (long_row_kernel)
  float eps = 1e-5f;
};

template <class T>
void row_kernel(const RowArgs& a) {
  const std::uint64_t first = GetBlockIdx() * a.per_block;
  if (first >= a.rows) return;
  const std::uint64_t count = std::min(a.per_block, a.rows - first), es = sizeof(T), tr = a.tile;
  const bool rope = a.kind == RowKind::kRopeHalf || a.kind == RowKind::kRopeInterleaved;
  const bool halves = a.kind == RowKind::kSwiGlu || a.kind == RowKind::kRopeHalf;  // inputs loaded as two halves
  const std::uint64_t len = halves ? a.h / 2 : a.h;  // the row length each fp32 buffer holds
  const std::uint64_t fs = ceil_to(len, 64), ts = ub_row<T>(len);
  // LayerNorm/RMSNorm of 16-bit types take their row statistics from the T rows (128 lanes per repeat; squares
  // rounded once to T, sums in fp32 partials of 128): the input rows are then padded to 128 lanes in UB.
  const bool stats16 = (a.kind == RowKind::kLayerNorm || a.kind == RowKind::kRmsNorm) && es == 2;
  const std::uint64_t tsi = stats16 ? ceil_to(len, 128) : ts;
  TPipe pipe;
  // Queues hold several pieces per buffer (both halves of the rows; cos and sin) so that chips with four event
  // ids per pipe pair run them too: in, out and the tables take at most three.
  const std::uint64_t piece = tr * ts;  // elements of one piece
  const std::uint64_t tables = a.kind == RowKind::kRopeHalf ? 4 : 2;  // c, s (, c2, s2)
  TQue<TPosition::VECIN, 2> qin;
  TQue<TPosition::VECOUT, 2> qout;
  TQue<TPosition::VECIN, 1> qcs;
  TQue<TPosition::VECOUT, 1> qsum;
  TBuf<TPosition::VECCALC> fx, fx2, ft, fc, fs_, fc2, fs2, fpart, fv, fbc, fp1, fp2, fstage, foff, fsign;
  const std::uint64_t in_piece = (stats16 ? tr * tsi : piece);
  pipe.InitBuffer(qin, 2, (halves || a.add ? 2 : 1) * in_piece * es);
  // The output pieces (both halves for RoPE), then the rows' mean and rstd in fp32 when they are written.
  const std::uint64_t out_t = (a.kind == RowKind::kRopeHalf ? 2 : 1) * piece * es, stat_bytes = ceil_to(tr * 4, 32);
  pipe.InitBuffer(qout, 2, out_t + (a.stats ? 2 * stat_bytes : 0));
  if (a.add) pipe.InitBuffer(qsum, 1, in_piece * es);
  pipe.InitBuffer(fx, tr * fs * 4);
  pipe.InitBuffer(ft, tr * fs * 4);
  if (halves) pipe.InitBuffer(fx2, tr * fs * 4);
  if (rope) {
    pipe.InitBuffer(qcs, 1, tables * piece * es);
    pipe.InitBuffer(fc, tr * fs * 4);
    pipe.InitBuffer(fs_, tr * fs * 4);
    if (a.kind == RowKind::kRopeHalf) {
      pipe.InitBuffer(fc2, tr * fs * 4);
      pipe.InitBuffer(fs2, tr * fs * 4);
    }
  }
  const bool reduces = reduces_rows(a.kind);
  TBuf<TPosition::VECCALC> fsq, fpt, fpt2, fpf, fpf2;
  const std::uint64_t k16 = tsi / 128, p16 = ceil_to(k16, 64);  // 128-lane pieces per row; their partials' stride
  if (stats16) {
    pipe.InitBuffer(fsq, tr * tsi * es);
    for (auto* b : {&fpt, &fpt2}) pipe.InitBuffer(*b, tr * p16 * es);
    for (auto* b : {&fpf, &fpf2}) pipe.InitBuffer(*b, tr * p16 * 4);
  }
  ReduceScratch rs;
  if (reduces) {
    rs.part_stride = ReduceScratch::stride_for(len);
    pipe.InitBuffer(fpart, tr * rs.part_stride * 4);
    rs.part = fpart.Get<float>();
  }
  const std::uint64_t vec = ceil_to(tr, 8);
  pipe.InitBuffer(fv, 3 * vec * 4);
  pipe.InitBuffer(fbc, 2 * vec * 32);
  const LocalTensor<float> v0 = fv.Get<float>(), v1 = fv.Get<float>()[vec], v2 = fv.Get<float>()[2 * vec];
  const LocalTensor<float> bc = fbc.Get<float>(), bc2 = fbc.Get<float>()[vec * 8];
  const F32Rows X{fx.Get<float>(), len, fs}, Tm{ft.Get<float>(), len, fs};
  // Parameters of the whole row (gamma, beta) once per core, kept in T: the affine step runs on the output in T
  // (128 lanes per repeat for 16-bit types), after the normalisation in fp32.
  LocalTensor<T> gamma, beta;
  if (a.kind == RowKind::kLayerNorm || a.kind == RowKind::kRmsNorm) {
    pipe.InitBuffer(fp1, ts * es);
    gamma = fp1.Get<T>();
    copy_in(gamma, a.p1, len);
    if (a.kind == RowKind::kLayerNorm) {
      pipe.InitBuffer(fp2, ts * es);
      beta = fp2.Get<T>();
      copy_in(beta, a.p2, len);
    }
    const std::uint32_t loaded = pipe.AllocEventID(PIPE_MTE2, PIPE_V);
    set_flag(PIPE_MTE2, PIPE_V, loaded);
    wait_flag(PIPE_MTE2, PIPE_V, loaded);
  }
  // Interleaved RoPE: offsets that swap the two elements of each pair, and the sign pattern (-, +) of sin.
  if (a.kind == RowKind::kRopeInterleaved) {
    pipe.InitBuffer(foff, tr * fs * 4);
    pipe.InitBuffer(fsign, fs * 4);
    const LocalTensor<std::uint32_t> off = foff.Get<std::uint32_t>();
    const LocalTensor<float> sign = fsign.Get<float>();
    for (std::uint64_t i = 0; i < fs; ++i) {
      off.SetValue(i, static_cast<std::uint32_t>((i ^ 1) * 4));
      sign.SetValue(i, (i % 2) ? 1.0f : -1.0f);
    }
    set_flag(PIPE_S, PIPE_V, 0);
    wait_flag(PIPE_S, PIPE_V, 0);
    const LocalTensor<std::int32_t> offi = foff.Get<std::int32_t>();
    for (std::uint64_t r = 1; r < tr; ++r) Adds(offi[r * fs], offi, static_cast<std::int32_t>(r * fs * 4), fs);
  }
  const float inv_h = 1.0f / static_cast<float>(len);
  for (std::uint64_t done = 0; done < count;) {
    const std::uint64_t row0 = first + done;
    std::uint64_t nr = std::min(tr, count - done);
    // RoPE: the tile's positions stay contiguous in cos/sin; with heads > 1 a tile holds whole positions.
    if (rope) nr = std::min(nr, (a.seq - (row0 / a.heads) % a.seq) * a.heads);
    const std::uint64_t pos = rope ? (row0 / a.heads) % a.seq : 0, npos = rope ? ceil_div(nr, a.heads) : 0;
    // Loads: the rows (or their two halves), and for RoPE the cos/sin rows of the positions.
    LocalTensor<T> in = qin.AllocTensor<T>();
    copy_rows_in(in, a.x + row0 * a.h * es, nr, len, a.h, tsi);
    if (halves) copy_rows_in(in[piece], a.x + (row0 * a.h + len) * es, nr, len, a.h);
    if (a.add) copy_rows_in(in[in_piece], a.res + row0 * a.h * es, nr, len, a.h, tsi);
    LocalTensor<T> cs;
    if (rope) {
      cs = qcs.AllocTensor<T>();
      copy_rows_in(cs, a.p1 + pos * a.h * es, npos, len, a.h);
      copy_rows_in(cs[piece], a.p2 + pos * a.h * es, npos, len, a.h);
      if (a.kind == RowKind::kRopeHalf) {
        copy_rows_in(cs[2 * piece], a.p1 + (pos * a.h + len) * es, npos, len, a.h);
        copy_rows_in(cs[3 * piece], a.p2 + (pos * a.h + len) * es, npos, len, a.h);
      }
      qcs.EnQue(cs);
    }
    qin.EnQue(in);
    in = qin.DeQue<T>();
    LocalTensor<T> sum;
    if (a.add) {  // x + residual, rounded to T as an unfused Add would leave it; the norm reads the sum
      sum = qsum.AllocTensor<T>();
      Add(sum, in, in[in_piece], nr * tsi);
      qin.FreeTensor(in);
      in = sum;
    }
    if (stats16) {  // sums of x and x^2 from the T rows, then in fp32 from their 128-lane partials
      if (len % 128) {
        const std::uint64_t tail = len % 128;  // lanes >= tail of the last 128-lane piece are pads
        const std::uint64_t bits[2] = {tail >= 64 ? 0 : ~((1ULL << tail) - 1),
                                       tail >= 64 ? ~((1ULL << (tail - 64)) - 1) : ~0ULL};
        for (std::uint64_t r = 0; r < nr; ++r) Duplicate(in[r * tsi + len - tail], 0.0f, bits, 1, 1, 8);
      }
      const LocalTensor<T> sq = fsq.Get<T>(), pt = fpt.Get<T>(), pt2 = fpt2.Get<T>();
      Mul(sq, in, in, nr * tsi);
      for (std::uint64_t r = 0; r < nr; ++r) {
        WholeReduceSum(pt[r * p16], in[r * tsi], 128, u8(k16), 1, 1, 8);
        WholeReduceSum(pt2[r * p16], sq[r * tsi], 128, u8(k16), 1, 1, 8);
      }
      const F32Rows P1{fpf.Get<float>(), k16, p16}, P2{fpf2.Get<float>(), k16, p16};
      Cast(P1.t, pt, RoundMode::CAST_NONE, nr * p16);
      Cast(P2.t, pt2, RoundMode::CAST_NONE, nr * p16);
      pad_rows(P1, nr, 0.0f);
      pad_rows(P2, nr, 0.0f);
      reduce_rows(false, v0, P1, nr, rs);
      reduce_rows(false, v1, P2, nr, rs);
    }
    rows_to_f32(X, in, nr, tsi);
    const F32Rows X2{halves ? fx2.Get<float>() : LocalTensor<float>{}, len, fs};
    if (halves) rows_to_f32(X2, in[piece], nr);
    if (a.add) {
      qsum.EnQue(sum);
      sum = qsum.DeQue<T>();
      if (a.sum) copy_rows_out(a.sum + row0 * a.h * es, sum, nr, len, a.h, tsi);
      qsum.FreeTensor(sum);
    } else {
      qin.FreeTensor(in);
    }
    LocalTensor<T> out = qout.AllocTensor<T>();
    LocalTensor<float> mean_out, rstd_out;
    if (a.stats) {
      mean_out = out[out_t / es].template ReinterpretCast<float>();
      rstd_out = mean_out[stat_bytes / 4];
    }
    const std::uint64_t all = nr * fs;
    switch (a.kind) {
      case RowKind::kSoftmax:
        pad_rows(X, nr, kLowest);
        reduce_rows(true, v0, X, nr, rs);
        row_scalar(RowOp::kSub, X, nr, v0, bc);
        Exp(X.t, X.t, all);  // the pads become 0
        reduce_rows(false, v1, X, nr, rs);
        row_scalar(RowOp::kDiv, X, nr, v1, bc);
        break;
      case RowKind::kLogSoftmax:  // (x - m) - log(sum(exp(x - m)))
        pad_rows(X, nr, kLowest);
        reduce_rows(true, v0, X, nr, rs);
        row_scalar(RowOp::kSub, X, nr, v0, bc);
        Exp(Tm.t, X.t, all);  // the pads become 0
        reduce_rows(false, v1, Tm, nr, rs);
        Ln(v1, v1, nr);
        row_scalar(RowOp::kSub, X, nr, v1, bc);
        break;
      case RowKind::kLayerNorm:
      case RowKind::kRmsNorm: {
        // Sums of x and x^2 in one sweep each; var = E[x^2] - mean^2; then x = x rstd - mean rstd in one fused
        // pass (both per-row scalars broadcast), so the fp32 work is five passes over the row.
        const bool ln = a.kind == RowKind::kLayerNorm;
        if (!stats16) {
          Mul(Tm.t, X.t, X.t, all);
          pad_rows(Tm, nr, 0.0f);
          reduce_rows(false, v1, Tm, nr, rs);
        }
        Muls(v1, v1, inv_h, nr);  // E[x^2]
        if (ln) {
          if (!stats16) {
            pad_rows(X, nr, 0.0f);
            reduce_rows(false, v0, X, nr, rs);
          }
          Muls(v0, v0, inv_h, nr);  // mean
          if (a.stats) Adds(mean_out, v0, 0.0f, nr);
          Mul(v2, v0, v0, nr);
          Sub(v1, v1, v2, nr);      // variance
        }
        Adds(v1, v1, a.eps, nr);
        Rsqrt(v1, v1, nr);  // rstd
        if (a.stats) Adds(rstd_out, v1, 0.0f, nr);
        if (ln) {
          Mul(v0, v0, v1, nr);
          Muls(v0, v0, -1.0f, nr);  // -mean rstd
          Brcb(bc, v1, u8(ceil_div(nr, 8)), BrcbRepeatParams{1, 8});
          Brcb(bc2, v0, u8(ceil_div(nr, 8)), BrcbRepeatParams{1, 8});
          const BinaryRepeatParams p{1, 0, 0, 8, 0, 0};
          for (std::uint64_t r = 0; r < nr; ++r) FusedMulAdd(X.row(r), bc[r * 8], bc2[r * 8], 64, u8(X.stride / 64), p);
        } else {
          row_scalar(RowOp::kMul, X, nr, v1, bc);
        }
        break;
      }
      case RowKind::kSwiGlu:  // silu(first half) x second half
        silu(X.t, X.t, Tm.t, all);
        Mul(X.t, X.t, X2.t, all);
        break;
      case RowKind::kRopeHalf: {  // y1 = x1 c1 - x2 s1, y2 = x2 c2 + x1 s2
        const F32Rows C{fc.Get<float>(), len, fs}, S{fs_.Get<float>(), len, fs}, C2{fc2.Get<float>(), len, fs},
            S2{fs2.Get<float>(), len, fs};
        cs = qcs.DeQue<T>();
        rows_to_f32(C, cs, npos);
        rows_to_f32(S, cs[piece], npos);
        rows_to_f32(C2, cs[2 * piece], npos);
        rows_to_f32(S2, cs[3 * piece], npos);
        qcs.FreeTensor(cs);
        if (a.heads == 1) {
          Mul(Tm.t, X2.t, S.t, all);      // x2 s1
          Mul(S2.t, X.t, S2.t, all);      // x1 s2
          Mul(X.t, X.t, C.t, all);        // x1 c1
          Sub(X.t, X.t, Tm.t, all);       // y1
          Mul(X2.t, X2.t, C2.t, all);     // x2 c2
          Add(X2.t, X2.t, S2.t, all);     // y2
        } else {  // each position's tables apply to its `heads` rows (a zero repeat stride on the table)
          const std::uint64_t rows_here = std::min(a.heads, nr);
          const auto rows_op = [&](auto op, const F32Rows& d, const F32Rows& x, const F32Rows& t) {
            for (std::uint64_t q = 0; q < npos; ++q)
              for (std::uint64_t c = 0; c < len; c += 64)
                op(d.row(q * a.heads)[c], x.row(q * a.heads)[c], t.row(q)[c], std::min<std::uint64_t>(64, len - c),
                   u8(std::min(rows_here, nr - q * a.heads)), BinaryRepeatParams{1, 1, 1, u8(fs / 8), u8(fs / 8), 0});
          };
          const auto mul = [](auto d, auto x, auto t, std::uint64_t m, std::uint8_t r, const BinaryRepeatParams& p) { Mul(d, x, t, m, r, p); };
          rows_op(mul, Tm, X2, S);        // x2 s1
          rows_op(mul, X2, X2, C2);       // x2 c2
          rows_op(mul, C2, X, S2);        // x1 s2 (C2 free now; rows of the tile reuse it)
          rows_op(mul, X, X, C);          // x1 c1
          Sub(X.t, X.t, Tm.t, all);       // y1
          Add(X2.t, X2.t, C2.t, all);     // y2
        }
        break;
      }
      case RowKind::kRopeInterleaved: {  // y = x cos + swap_pairs(x) (-sin, +sin)
        const F32Rows C{fc.Get<float>(), len, fs}, S{fs_.Get<float>(), len, fs};
        cs = qcs.DeQue<T>();
        rows_to_f32(C, cs, nr);
        rows_to_f32(S, cs[piece], nr);
        qcs.FreeTensor(cs);
        Gather(Tm.t, X.t, foff.Get<std::uint32_t>(), all);
        for (std::uint64_t r = 0; r < nr; ++r) Mul(S.row(r), S.row(r), fsign.Get<float>(), fs);
        Mul(Tm.t, Tm.t, S.t, all);
        Mul(X.t, X.t, C.t, all);
        Add(X.t, X.t, Tm.t, all);
        break;
      }
    }
    rows_from_f32(out, X, nr);
    if (a.kind == RowKind::kRopeHalf) rows_from_f32(out[piece], X2, nr);
    if (a.kind == RowKind::kLayerNorm || a.kind == RowKind::kRmsNorm) {  // the affine step, in T
      for (std::uint64_t r = 0; r < nr; ++r) {
        const LocalTensor<T> row = out[r * ts];
        if (a.kind == RowKind::kLayerNorm) FusedMulAdd(row, gamma, beta, len);
        else Mul(row, row, gamma, len);
      }
    }
    qout.EnQue(out);
    out = qout.DeQue<T>();
    copy_rows_out(a.out + row0 * a.ho * es, out, nr, len, a.ho);
    if (a.kind == RowKind::kRopeHalf) copy_rows_out(a.out + (row0 * a.h + len) * es, out[piece], nr, len, a.h);
    if (a.stats) {
      copy_out(a.mean + row0 * 4, mean_out, nr);
      copy_out(a.rstd + row0 * 4, rstd_out, nr);
    }
    qout.FreeTensor(out);
    done += nr;
  }
}

// Rows too long for the UB (a LayerNorm over 8192 fp16 or 4096 fp32 values with its buffers, a softmax over 32 K
// keys): each core takes whole rows, one at a time, and streams each row through in chunks of `chunk` columns,
// twice. Pass 1 gathers the row's statistics: softmax the running max and the sum of exponentials, rescaled by
// exp(m_old - m_new) when the max grows (online softmax); the norms the sums of x and x^2 in fp32. Pass 2 reads
// the chunks again (and gamma, beta) and writes the output. GM traffic: the input twice, the output once; a row
// that fits one chunk (but not the short path's double-buffered tiles) is read once.
template <class T>
void long_row_kernel(const RowArgs& a) {
  const std::uint64_t first = GetBlockIdx() * a.per_block;
  if (first >= a.rows) return;
  const std::uint64_t count = std::min(a.per_block, a.rows - first), es = sizeof(T), C = a.chunk;
  const bool ln = a.kind == RowKind::kLayerNorm, norm = ln || a.kind == RowKind::kRmsNorm;
  const bool log = a.kind == RowKind::kLogSoftmax;
  TPipe pipe;
  TQue<TPosition::VECIN, 2> qin, qpar;
  TQue<TPosition::VECOUT, 2> qout;
  TQue<TPosition::VECOUT, 1> qsum, qstat;
  TBuf<TPosition::VECCALC> fx, ft, fpart, fv, fbc;
  pipe.InitBuffer(qin, 2, (a.add ? 2 : 1) * C * es);
  if (norm) pipe.InitBuffer(qpar, 2, (ln ? 2 : 1) * C * es);
  pipe.InitBuffer(qout, 2, C * es);
  if (a.sum) pipe.InitBuffer(qsum, 1, C * es);
  if (a.stats) pipe.InitBuffer(qstat, 1, 64);
  pipe.InitBuffer(fx, C * 4);
  pipe.InitBuffer(ft, C * 4);
  ReduceScratch rs;
  rs.part_stride = ReduceScratch::stride_for(C);
  pipe.InitBuffer(fpart, rs.part_stride * 4);
  rs.part = fpart.Get<float>();
  pipe.InitBuffer(fv, 7 * 32);  // per-row scalars, one 32 B block each
  pipe.InitBuffer(fbc, 2 * 256);  // a Brcb repeat writes 8 blocks
  const LocalTensor<float> v = fv.Get<float>(), bc = fbc.Get<float>(), bc2 = bc[64];
  const LocalTensor<float> m = v, l = v[8], part = v[16], part2 = v[24], alpha = v[32], mean = v[40], rstd = v[48];
  const std::uint64_t chunks = ceil_div(a.h, C);
  const bool resident = chunks == 1;
  const float inv_h = 1.0f / static_cast<float>(a.h);
  // Chunk c of row `row` (w columns) into X in fp32: x, or x + residual rounded to T (written out in pass 1 when
  // the sum is an output), as the short path and an unfused Add leave it.
  auto load = [&](std::uint64_t row, std::uint64_t c0, std::uint64_t w, const F32Rows& X, bool write_sum) {
    LocalTensor<T> in = qin.AllocTensor<T>();
    copy_in(in, a.x + (row * a.h + c0) * es, w);
    if (a.add) copy_in(in[C], a.res + (row * a.h + c0) * es, w);
    qin.EnQue(in);
    in = qin.DeQue<T>();
    if (!a.add) {
      convert(X.t, in, w);
      qin.FreeTensor(in);
      return;
    }
    // The sum goes through the output queue when written, else through the fp32 temporary (free until after X
    // is converted).
    LocalTensor<T> sum = write_sum ? qsum.AllocTensor<T>() : ft.Get<T>();
    Add(sum, in, in[C], w);
    qin.FreeTensor(in);
    convert(X.t, sum, w);
    if (write_sum) {
      qsum.EnQue(sum);
      sum = qsum.DeQue<T>();
      copy_out(a.sum + (row * a.h + c0) * es, sum, w);
      qsum.FreeTensor(sum);
    }
  };
  for (std::uint64_t row = first; row < first + count; ++row) {
    for (std::uint64_t c = 0; c < chunks; ++c) {  // pass 1: statistics
      const std::uint64_t c0 = c * C, w = std::min(C, a.h - c0);
      const F32Rows X{fx.Get<float>(), w, ceil_to(w, 64)}, Tm{ft.Get<float>(), w, X.stride};
      load(row, c0, w, X, a.sum != 0);
      if (!norm) {  // softmax, log-softmax
        pad_rows(X, 1, kLowest);
        if (c == 0) {
          reduce_rows(true, m, X, 1, rs);
        } else {
          reduce_rows(true, part, X, 1, rs);
          Max(part, m, part, 1);     // m_new
          Sub(alpha, m, part, 1);
          Exp(alpha, alpha, 1);      // exp(m_old - m_new)
          Adds(m, part, 0.0f, 1);
        }
        row_scalar(RowOp::kSub, X, 1, m, bc);
        // The pads become 0. Log-softmax keeps x - m in X (a resident row needs it in pass 2).
        Exp(log ? Tm.t : X.t, X.t, X.stride);
        reduce_rows(false, c == 0 ? l : part, log ? Tm : X, 1, rs);
        if (c > 0) {
          Mul(l, l, alpha, 1);
          Add(l, l, part, 1);
        }
      } else {
        pad_rows(X, 1, 0.0f);
        Mul(Tm.t, X.t, X.t, X.stride);
        reduce_rows(false, c == 0 ? l : part, Tm, 1, rs);  // sum of x^2
        if (ln) reduce_rows(false, c == 0 ? m : part2, X, 1, rs);  // sum of x
        if (c > 0) {
          Add(l, l, part, 1);
          if (ln) Add(m, m, part2, 1);
        }
      }
    }
    if (log) Ln(l, l, 1);  // log(sum), subtracted in pass 2
    if (norm) {  // var = E[x^2] - mean^2, rstd = 1 / sqrt(var + eps); x rstd - mean rstd in one pass below
      Muls(l, l, inv_h, 1);
      if (ln) {
        Muls(mean, m, inv_h, 1);
        Mul(part, mean, mean, 1);
        Sub(l, l, part, 1);
      }
      Adds(l, l, a.eps, 1);
      Rsqrt(rstd, l, 1);
      Brcb(bc, rstd, 1, BrcbRepeatParams{1, 8});
      if (ln) {
        Mul(part, mean, rstd, 1);
        Muls(part, part, -1.0f, 1);
        Brcb(bc2, part, 1, BrcbRepeatParams{1, 8});
      }
      if (a.stats) {
        LocalTensor<float> st = qstat.AllocTensor<float>();
        Adds(st, mean, 0.0f, 1);
        Adds(st[8], rstd, 0.0f, 1);
        qstat.EnQue(st);
        st = qstat.DeQue<float>();
        copy_out(a.mean + row * 4, st, 1);
        copy_out(a.rstd + row * 4, st[8], 1);
        qstat.FreeTensor(st);
      }
    }
    for (std::uint64_t c = 0; c < chunks; ++c) {  // pass 2: the output
      const std::uint64_t c0 = c * C, w = std::min(C, a.h - c0);
      const F32Rows X{fx.Get<float>(), w, ceil_to(w, 64)};
      LocalTensor<T> par;
      if (norm) {
        par = qpar.AllocTensor<T>();
        copy_in(par, a.p1 + c0 * es, w);
        if (ln) copy_in(par[C], a.p2 + c0 * es, w);
        qpar.EnQue(par);
      }
      // A row of one chunk is still in X from pass 1 (softmax: as exp(x - m)), so it is not read again.
      if (!resident) load(row, c0, w, X, false);
      if (!norm) {
        if (!resident) {
          row_scalar(RowOp::kSub, X, 1, m, bc);
          if (!log) Exp(X.t, X.t, X.stride);
        }
        row_scalar(log ? RowOp::kSub : RowOp::kDiv, X, 1, l, bc);
      } else if (ln) {
        FusedMulAdd(X.t, bc, bc2, 64, u8(X.stride / 64), BinaryRepeatParams{1, 0, 0, 8, 0, 0});
      } else {
        Mul(X.t, X.t, bc, 64, u8(X.stride / 64), BinaryRepeatParams{1, 1, 0, 8, 8, 0});
      }
      LocalTensor<T> out = qout.AllocTensor<T>();
      convert(out, X.t, w);
      if (norm) {  // the affine step, in T
        par = qpar.DeQue<T>();
        if (ln) FusedMulAdd(out, par, par[C], w);
        else Mul(out, out, par, w);
        qpar.FreeTensor(par);
      }
      qout.EnQue(out);
      out = qout.DeQue<T>();
      copy_out(a.out + (row * a.h + c0) * es, out, w);
      qout.FreeTensor(out);
    }
  }
}

// --- Host side ----------------------------------------------------------------------------------------------------

// UB bytes per row of a tile, and fixed bytes, for the kind.
void ub_need(RowKind kind, std::uint64_t h, std::uint64_t es, bool add, bool stats, std::uint64_t* per_row, std::uint64_t* fixed) {
  const bool halves = kind == RowKind::kSwiGlu || kind == RowKind::kRopeHalf;
  const std::uint64_t len = halves ? h / 2 : h, fs = ceil_to(len, 64) * 4, ts = ceil_to(len * es, 32);
  std::uint64_t f32 = 2, tq = 4;  // X and Tm; two in and two out buffers of T
  if (halves) { f32 += 1; tq += 2; }
  if (kind == RowKind::kRopeHalf) { f32 += 4; tq += 6; }
  if (kind == RowKind::kRopeInterleaved) { f32 += 3; tq += 2; }  // C, S, offsets
  if (add) tq += 3;    // two residual buffers and the sum
  if (stats) tq += 1;  // the mean and rstd of two output buffers (8 B a row, counted generously)
  *per_row = f32 * fs + tq * ts + 4 * 3 + 64;  // + the row's three per-row values and its two Brcb blocks
  if (reduces_rows(kind)) *per_row += ReduceScratch::stride_for(len) * 4;
  *fixed = 2 * fs + ts + 256;
  if ((kind == RowKind::kLayerNorm || kind == RowKind::kRmsNorm) && es == 2) {  // see stats16 in row_kernel
    const std::uint64_t tsi = ceil_to(len, 128) * es, p16 = ceil_to(ceil_to(len, 128) / 128, 64);
    *per_row += (add ? 6 : 3) * tsi - (add ? 5 : 2) * ts + 2 * p16 * (es + 4);
  }
}

// UB bytes long_row_kernel allocates for chunks of c columns: x (and the residual) in, gamma (and beta), out, each
// twice; the sum; X and a temporary in fp32; the reduction partials, the per-row scalars and two Brcb targets;
// the statistics; and a margin for the 32 B alignment of each buffer.
std::uint64_t long_row_bytes(RowKind kind, std::uint64_t c, std::uint64_t es, bool add, bool stats) {
  const bool ln = kind == RowKind::kLayerNorm, norm = ln || kind == RowKind::kRmsNorm;
  const std::uint64_t t_bufs = 2 * (add ? 2 : 1) + (norm ? 2 * (ln ? 2 : 1) : 0) + 2 + (add ? 1 : 0);
  return t_bufs * c * es + 2 * c * 4 + ReduceScratch::stride_for(c) * 4 + 7 * 32 + 2 * 256 + (stats ? 64 : 0) + 256;
}

// Columns per chunk: the largest multiple of 64 (at most 255 repeats of 64 lanes) whose buffers fit the UB; 0 when
// not even 64 columns fit.
std::uint64_t long_row_chunk(RowKind kind, std::uint64_t h, std::uint64_t es, bool add, bool stats, std::uint64_t ub) {
  for (std::uint64_t c = std::min<std::uint64_t>(255 * 64, ceil_to(h, 64)); c >= 64; c -= 64)
    if (long_row_bytes(kind, c, es, add, stats) <= ub) return c;
  return 0;
}

OpDef row_op(const std::string& name, RowKind kind, const std::string& summary) {
  OpDef d;
  d.name = name;
  d.summary = summary;
  const bool norm = kind == RowKind::kLayerNorm || kind == RowKind::kRmsNorm;
  const bool rope = kind == RowKind::kRopeHalf || kind == RowKind::kRopeInterleaved;
  const bool add = name == "add_layernorm";
  d.params = {"shape"};
  const bool reduces = reduces_rows(kind);
  if (reduces) d.params.push_back("chunk");
  if (norm) d.params.push_back("eps");
  if (kind == RowKind::kLayerNorm) d.params.push_back("stats");
  if (add) d.params.push_back("sum");
  if (kind == RowKind::kRopeHalf) d.params.push_back("layout");
  d.parse = [=](const Params& p) -> Call {
    if (kind == RowKind::kSoftmax || kind == RowKind::kLogSoftmax) return SoftmaxCall{param_uint(p, "chunk", 0, 16320)};
    if (norm) {
      NormCall c;
      c.eps = param_real(p, "eps", 1e-5, true);
      c.stats = kind == RowKind::kLayerNorm && param_uint(p, "stats", 0, 1);
      c.sum = !add || param_uint(p, "sum", 1, 1);
      c.chunk = param_uint(p, "chunk", 0, 16320);
      return c;
    }
    if (kind == RowKind::kRopeHalf) {
      const auto it = p.find("layout");
      if (it == p.end() || it->second == "bnsd") return RopeCall{RopeLayout::kBnsd};
      if (it->second != "bsnd") throw InputError(name + ": layout='" + it->second + "' is not bnsd or bsnd");
      return RopeCall{RopeLayout::kBsnd};
    }
    return Operands{};
  };
  // The call's options, whichever kind of call the op takes.
  struct Options {
    double eps = 1e-5;
    bool stats = false, sum = false, bsnd = false;
    std::uint64_t chunk = 0;
  };
  const auto options = [=](const Call& call) {
    Options o;
    if (kind == RowKind::kSoftmax || kind == RowKind::kLogSoftmax) {
      o.chunk = call_as<SoftmaxCall>(call, name).chunk;
    } else if (norm) {
      const NormCall& c = call_as<NormCall>(call, name);
      if (!std::isfinite(c.eps) || c.eps < 0) throw InputError(name + ": eps=" + std::to_string(c.eps) + " is not a non-negative number");
      o.eps = c.eps;
      o.stats = kind == RowKind::kLayerNorm && c.stats;
      o.sum = add && c.sum;
      o.chunk = c.chunk;
    } else if (kind == RowKind::kRopeHalf) {
      o.bsnd = call_as<RopeCall>(call, name).layout == RopeLayout::kBsnd;
    } else {
      call_as<Operands>(call, name);
    }
    return o;
  };
  // RoPE in the BSND layout: x is ... x S x N x D, the N heads of a position share its cos/sin row.
  const auto bsnd = [parse = d.parse](const Params& p) { return std::get<RopeCall>(parse(p)).layout == RopeLayout::kBsnd; };
  d.inputs = [=](const Params& p, DType t) {
    const Shape s = param_shape(p);
    const std::uint64_t h = s.back();
    std::vector<TensorDesc> in{{s, t}};
    if (add) in.push_back({s, t});
    if (norm) in.push_back({Shape{h}, t});
    if (kind == RowKind::kLayerNorm) in.push_back({Shape{h}, t});
    if (rope) {
      const std::size_t sd = kind == RowKind::kRopeHalf && bsnd(p) ? 3 : 2;  // dims from the end to S
      if (s.size() < sd)
        throw InputError(name + ": shape " + shape_string(s) + " needs at least " + (sd == 2 ? "two dims (... x S x D)" : "three dims (... x S x N x D)"));
      const Shape cs{s[s.size() - sd], h};
      in.push_back({cs, t});
      in.push_back({cs, t});
    }
    return in;
  };
  d.plan = [=](const std::vector<TensorDesc>& in, const Call& call, const config::ChipConfig& chip) {
    const Options opt = options(call);
    const Shape& s = in[0].shape;
    const std::uint64_t h = s.back(), es = hw::isa::dtype_bytes(in[0].dtype);
    if ((kind == RowKind::kSwiGlu || kind == RowKind::kRopeHalf || kind == RowKind::kRopeInterleaved) && h % 2)
      throw InputError(name + ": the last dimension (" + std::to_string(h) + ") must be even");
    RowArgs a;
    a.kind = kind;
    a.rows = elements(s) / h;
    a.h = h;
    a.ho = kind == RowKind::kSwiGlu ? h / 2 : h;
    const bool heads = opt.bsnd;
    if (heads && s.size() < 3) throw InputError(name + ": layout=bsnd needs ... x S x N x D");
    a.heads = heads ? s[s.size() - 2] : 1;
    a.seq = rope ? s[s.size() - (heads ? 3 : 2)] : 0;
    a.eps = static_cast<float>(opt.eps);
    a.add = add;
    a.stats = opt.stats;
    const bool sum = opt.sum;
    std::uint64_t per_row = 0, fixed = 0;
    ub_need(kind, h, es, add, a.stats, &per_row, &fixed);
    const std::uint64_t len = (kind == RowKind::kSwiGlu || kind == RowKind::kRopeHalf) ? h / 2 : h;
    const std::uint64_t ub = chip.buffers.ub.size, cores = chip.vector_units();
    const std::uint64_t forced = opt.chunk;
    if (forced > 16320) throw InputError(name + ": chunk=" + std::to_string(forced) + " is more than 16320 columns");
    if (forced % 64) throw InputError(name + ": chunk=" + std::to_string(forced) + " is not a multiple of 64");
    if (forced && long_row_bytes(kind, forced, es, add, a.stats) > ub)
      throw InputError(name + ": chunk=" + std::to_string(forced) + " needs " + std::to_string(long_row_bytes(kind, forced, es, add, a.stats)) +
                       " B of UB, chip " + chip.name + " has " + std::to_string(ub));
    if (forced || ceil_to(len, 64) / 64 > 255 || fixed + per_row > ub) {
      a.chunk = forced ? forced : reduces ? long_row_chunk(kind, h, es, add, a.stats, ub) : 0;
      if (a.chunk == 0)
        throw InputError(name + ": a row of " + std::to_string(h) + " elements does not fit the UB of chip " + chip.name +
                         (reduces ? " even in chunks of 64" : ""));
      a.per_block = ceil_div(a.rows, cores);
      a.tile = 1;
    } else {
      // Blocks and tiles hold whole positions when the heads of a position share a table row.
      a.per_block = ceil_div(a.rows / a.heads, cores) * a.heads;
      a.tile = std::min<std::uint64_t>({255, (ub - fixed) / per_row, a.per_block}) / a.heads * a.heads;
      if (a.tile == 0) throw InputError(name + ": the " + std::to_string(a.heads) + " heads of a position do not fit the UB of chip " + chip.name);
    }
    OpPlan plan;
    Shape out = s;
    out.back() = a.ho;
    plan.outputs = {{out, in[0].dtype}};
    if (sum) plan.outputs.push_back({s, in[0].dtype});
    if (a.stats) {
      Shape st(s.begin(), s.end() - 1);
      st.push_back(1);
      plan.outputs.push_back({st, DType::kFp32});
      plan.outputs.push_back({st, DType::kFp32});
    }
    plan.type = KernelType::kVector;
    plan.block_dim = static_cast<std::uint32_t>(ceil_div(a.rows, a.per_block));
    plan.tiling = {{"rows_per_tile", static_cast<double>(a.tile)}, {"rows_per_block", static_cast<double>(a.per_block)}};
    if (a.chunk) plan.tiling["chunk"] = static_cast<double>(a.chunk);
    const DType t = in[0].dtype;
    plan.kernel = [a, t, norm, rope, kind, sum](const std::vector<std::uint64_t>& buf) -> std::function<void()> {
      RowArgs g = a;
      g.x = buf[0];
      std::size_t i = 1;
      if (g.add) g.res = buf[i++];
      if (norm || rope) g.p1 = buf[i++];
      if (kind == RowKind::kLayerNorm || rope) g.p2 = buf[i++];
      g.out = buf[i++];
      if (sum) g.sum = buf[i++];
      if (g.stats) {
        g.mean = buf[i++];
        g.rstd = buf[i++];
      }
      if (g.chunk) {
        switch (t) {
          case DType::kFp16: return [g] { long_row_kernel<half>(g); };
          case DType::kBf16: return [g] { long_row_kernel<bfloat16_t>(g); };
          default: return [g] { long_row_kernel<float>(g); };
        }
      }
      switch (t) {
        case DType::kFp16: return [g] { row_kernel<half>(g); };
        case DType::kBf16: return [g] { row_kernel<bfloat16_t>(g); };
        default: return [g] { row_kernel<float>(g); };
      }
    };
    return plan;
  };
  d.reference = [=](const std::vector<TensorDesc>& in, const Call& call, const std::vector<HostTensor>& v) {
    const Options opt = options(call);
    const Shape& s = in[0].shape;
    const std::uint64_t h = s.back(), rows = elements(s) / h, ho = kind == RowKind::kSwiGlu ? h / 2 : h;
    const double eps = static_cast<float>(opt.eps);
    const bool stats = opt.stats, sum = opt.sum;
    const bool heads = opt.bsnd;
    const std::uint64_t seq = rope ? s[s.size() - (heads ? 3 : 2)] : 1, nh = heads ? s[s.size() - 2] : 1;
    HostTensor out(rows * ho), sums, means(stats ? rows : 0), rstds(stats ? rows : 0);
    std::vector<float> xs(h);
    const std::size_t pi = add ? 2 : 1;  // the first parameter input (gamma, cos)
    if (sum) sums.resize(rows * h);
    for (std::uint64_t r = 0; r < rows; ++r) {
      const float* x = v[0].data() + r * h;
      if (add) {  // the sum, rounded to the op's dtype as the kernel keeps it
        for (std::uint64_t c = 0; c < h; ++c) xs[c] = round_to(in[0].dtype, x[c] + v[1][r * h + c]);
        if (sum) std::copy(xs.begin(), xs.end(), sums.begin() + static_cast<std::ptrdiff_t>(r * h));
        x = xs.data();
      }
      float* y = out.data() + r * ho;
      switch (kind) {
        case RowKind::kSoftmax:
        case RowKind::kLogSoftmax: {
          double mx = -INFINITY, sum = 0;
          for (std::uint64_t c = 0; c < h; ++c) mx = std::max<double>(mx, x[c]);
          for (std::uint64_t c = 0; c < h; ++c) sum += std::exp(x[c] - mx);
          for (std::uint64_t c = 0; c < h; ++c)
            y[c] = static_cast<float>(kind == RowKind::kSoftmax ? std::exp(x[c] - mx) / sum : x[c] - mx - std::log(sum));
          break;
        }
        case RowKind::kLayerNorm:
        case RowKind::kRmsNorm: {
          double mean = 0, var = 0;
          if (kind == RowKind::kLayerNorm) {
            for (std::uint64_t c = 0; c < h; ++c) mean += x[c];
            mean /= static_cast<double>(h);
          }
          for (std::uint64_t c = 0; c < h; ++c) var += (x[c] - mean) * (x[c] - mean);
          const double rstd = 1.0 / std::sqrt(var / static_cast<double>(h) + eps);
          for (std::uint64_t c = 0; c < h; ++c)
            y[c] = static_cast<float>((x[c] - mean) * rstd * v[pi][c] + (kind == RowKind::kLayerNorm ? v[pi + 1][c] : 0.0));
          if (stats) {
            means[r] = static_cast<float>(mean);
            rstds[r] = static_cast<float>(rstd);
          }
          break;
        }
        case RowKind::kSwiGlu:
          for (std::uint64_t c = 0; c < ho; ++c) y[c] = static_cast<float>(activate_ref(Activation::kSilu, x[c]) * static_cast<double>(x[c + ho]));
          break;
        case RowKind::kRopeHalf:
        case RowKind::kRopeInterleaved: {
          const std::uint64_t pos = (r / nh) % seq;
          const float* cs = v[1].data() + pos * h;
          const float* sn = v[2].data() + pos * h;
          for (std::uint64_t c = 0; c < h; ++c) {
            double rot;
            if (kind == RowKind::kRopeHalf) rot = c < h / 2 ? -static_cast<double>(x[c + h / 2]) : x[c - h / 2];
            else rot = c % 2 ? x[c - 1] : -static_cast<double>(x[c + 1]);
            y[c] = static_cast<float>(x[c] * static_cast<double>(cs[c]) + rot * sn[c]);
          }
          break;
        }
      }
    }
    std::vector<HostTensor> outs{out};
    if (sum) outs.push_back(sums);
    if (stats) {
      outs.push_back(means);
      outs.push_back(rstds);
    }
    return outs;
  };
  if (kind == RowKind::kLayerNorm) {
    // The mean and rstd outputs are fp32, but for 16-bit inputs the row sums come from 128-lane partials rounded
    // to the dtype (stats16 in row_kernel): 2^-11 relative per partial, amplified up to 8x in the rstd.
    d.extra_atol = [options](const std::vector<TensorDesc>& in, const Call& call) {
      return options(call).stats && hw::isa::dtype_bytes(in[0].dtype) == 2 ? std::ldexp(1.0, -8) : 0.0;
    };
  }
  return d;
}

}  // namespace

std::vector<OpDef> rowwise_ops() {
  return {row_op("softmax", RowKind::kSoftmax, "softmax over the last dimension"),
          row_op("log_softmax", RowKind::kLogSoftmax, "log-softmax over the last dimension: x - max - log(sum(exp(x - max)))"),
          row_op("layernorm", RowKind::kLayerNorm, "LayerNorm over the last dimension: (x - mean) / sqrt(var + eps) * gamma + beta (-p stats=1: also the rows' mean and rstd, fp32)"),
          row_op("add_layernorm", RowKind::kLayerNorm, "LayerNorm of x + residual (AddLayerNorm); -p sum=1 (default) also writes the sum"),
          row_op("rmsnorm", RowKind::kRmsNorm, "RMSNorm over the last dimension: x / sqrt(mean(x^2) + eps) * gamma"),
          row_op("swiglu", RowKind::kSwiGlu, "SwiGLU: silu(a) * b with [a, b] the two halves of the last dimension"),
          row_op("rope", RowKind::kRopeHalf, "rotary embedding, half form: x cos + rotate_half(x) sin (x: ... x S x D, or ... x S x N x D with -p layout=bsnd; cos, sin: S x D)"),
          row_op("rope_interleaved", RowKind::kRopeInterleaved, "rotary embedding, interleaved pairs (GPT-J form; cos, sin: S x D)")};
}

}  // namespace npusim::stack::ops
