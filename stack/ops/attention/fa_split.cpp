// FlashAttention on split chips (fa_common.hpp): a mix kernel, one block = 1 AIC + 2 AIV. The cube core computes
// S_i = Q K_i^T into a GM workspace slot (fp32), the two vector cores (half the rows each) scale, mask, update the
// running max/sum, exponentiate and write P_i (fp16) back, and the cube core computes PV_i = P_i V_i into another
// slot, which the vector cores fold into their fp32 output accumulators (rescaled by exp(m_old - m_new)).
// Cross-core flags say a slot is ready (S: AIC -> AIV, P: AIV -> AIC, PV: AIC -> AIV); the cube core computes
// S_{i+1} before PV_i, so it works on the next block while the vector cores run the softmax of this one. Two slots
// of each kind suffice (see the ordering argument in docs/ops.md).
#include "stack/ops/attention/fa_common.hpp"
#include "stack/ops/row_math.hpp"

namespace npusim::stack::ops::attention {

namespace {

// Per-row softmax state and buffers of one AIV (rows r0 .. r0 + rows of each unit).
template <class T>
struct SoftmaxState {
  TQue<TPosition::VECIN, 2> qs;
  TQue<TPosition::VECIN, 1> qpv, qmask;
  TQue<TPosition::VECOUT, 2> qout;  // P of each row chunk, and O at a unit's end
  TBuf<TPosition::VECCALC> fo[2], fm[2], fl[2], falpha[2], fmx, frs, fbc, fscale, fmaskf, fcmb;
  std::uint32_t R = 0;  // rows per AIV (max)

  void init(TPipe& pipe, const FaArgs& g) {
    R = u32(ceil_div(g.t.bq, 2));
    const BufferPlan ub = planned_buffers<T>(g, true).ub;
    init_buffer(pipe, qs, ub, "s");
    init_buffer(pipe, qpv, ub, "pv");
    init_buffer(pipe, qout, ub, "out");
    for (int p = 0; p < 2; ++p) {
      init_buffer(pipe, fo[p], ub, per_unit("o", p));
      init_buffer(pipe, fm[p], ub, per_unit("m", p));
      init_buffer(pipe, fl[p], ub, per_unit("l", p));
      init_buffer(pipe, falpha[p], ub, per_unit("alpha", p));
    }
    init_buffer(pipe, fmx, ub, "mx");
    init_buffer(pipe, frs, ub, "rs");
    init_buffer(pipe, fscale, ub, "scale");
    init_buffer(pipe, fbc, ub, "bc");
    Duplicate(fscale.Get<float>(), g.s.scale, 8);
    if (g.s.mask) {
      init_buffer(pipe, qmask, ub, "mask");
      init_buffer(pipe, fmaskf, ub, "mask_f");
    }
    if (g.s.partials) init_buffer(pipe, fcmb, ub, "combine");
  }
};

// The vector side of one AIV: the softmax of each block's scores into P, and the PV blocks folded into the output.
template <class T>
class VectorSide {
 public:
  explicit VectorSide(const FaArgs& g)
      : g_(g), steps_(steps_of(g, GetBlockIdx())), slot_(slots_of(g)), unit_of_(steps_.size()) {
    sm_.init(pipe_, g);
    if (g.s.splits > 1) {
      v_to_mte3_ = pipe_.AllocEventID(PIPE_V, PIPE_MTE3);
      mte3_to_v_ = pipe_.AllocEventID(PIPE_MTE3, PIPE_V);
      mte2_to_v_ = pipe_.AllocEventID(PIPE_MTE2, PIPE_V);
      v_to_mte2_ = pipe_.AllocEventID(PIPE_V, PIPE_MTE2);
    }
    bk_ = g.t.bk;
    d_ = g.s.D;
    vec_ = g.t.rc;
    shared_mask_ = g.s.mask_rows_shared();
    std::uint32_t unit = 0;  // units started so far (state parity)
    for (std::size_t i = 0; i < steps_.size(); ++i) {
      if (i > 0 && steps_[i].first) ++unit;
      unit_of_[i] = unit;
    }
  }

  void run() {
    for (std::size_t i = 0; i < steps_.size(); ++i) {
      softmax_step(i);
      if (i > 0) accumulate_step(i - 1);
    }
    if (!steps_.empty()) accumulate_step(steps_.size() - 1);
    if (g_.s.splits > 1) combine();
  }

 private:
  // This AIV's rows of a unit of qr rows: the first ceil(qr / 2) on sub-block 0, the rest on 1.
  static std::uint32_t my_rows(const FaStep& st, std::uint32_t* r0) {
    const std::uint32_t half = (st.qr + 1) / 2;
    *r0 = GetSubBlockIdx() == 0 ? 0 : half;
    return GetSubBlockIdx() == 0 ? half : st.qr - half;
  }

  // The scores of step i (this AIV's rows) from their slot: with a mask, scaled and the mask added (one
  // FusedMulAdd pass); without, as they are (online_softmax scales them in its subtraction pass).
  LocalTensor<float> scores_in(std::size_t i, std::uint32_t r0, std::uint32_t rows) {
    const FaStep& st = steps_[i];
    LocalTensor<float> s = sm_.qs.template AllocTensor<float>();
    GlobalTensor<float> gs;
    gs.SetGlobalBuffer(slot_.s(i) + static_cast<std::uint64_t>(r0) * bk_ * 4);
    DataCopy(s, gs, static_cast<std::uint64_t>(rows) * bk_);
    LocalTensor<T> mk;
    if (g_.s.mask) {
      mk = sm_.qmask.template AllocTensor<T>();
      // A shared row (key padding) is read once; the cast below reads it for every row.
      copy_rows_in(mk, g_.mask + (g_.s.mask_at(st.b, st.n, st.q0 + r0) + st.kv0) * sizeof(T), shared_mask_ ? 1 : rows,
                   st.w, g_.s.SK);
      sm_.qmask.EnQue(mk);
    }
    sm_.qs.EnQue(s);
    s = sm_.qs.template DeQue<float>();
    if (!g_.s.mask) return s;
    // The mask rows (ub_row<T>(w) apart, or one row read by every repeat) in 64-column chunks: cast into fp32
    // scratch, then s = scale s + mask. (Columns past the keys stay unscaled: mask_invisible overwrites them.)
    mk = sm_.qmask.template DeQue<T>();
    const LocalTensor<float> mf = sm_.fmaskf.template Get<float>();
    const std::uint32_t mrow = shared_mask_ ? 0 : u32(ub_row<T>(st.w));
    for (std::uint32_t h = 0; h < st.w; h += 64) {
      const std::uint64_t lanes = std::min<std::uint32_t>(64, st.w - h);
      Cast(mf, mk[h], RoundMode::CAST_NONE, lanes, u8(rows), UnaryRepeatParams{1, 1, 8, u8(mrow * sizeof(T) / 32)});
      FusedMulAdd(s[h], sm_.fscale.template Get<float>(), mf, lanes, u8(rows),
                  BinaryRepeatParams{1, 0, 1, u8(bk_ / 8), 0, 8});
    }
    sm_.qmask.FreeTensor(mk);
    return s;
  }

  // Columns past the block's keys, and (causal) the keys after each query row, set to kMasked.
  void mask_invisible(const FaStep& st, const LocalTensor<float>& s, std::uint32_t r0, std::uint32_t rows) {
    if (st.w < bk_) nd_fill_columns({s, bk_, bk_}, 0, rows, st.w, kMasked);
    const std::uint32_t shift = g_.s.shift(st.b);
    if (!g_.s.causal || st.kv0 + st.w - 1 <= st.q0 + r0 + shift) return;
    // Query row qi sees keys <= qi + shift: columns from qi + shift + 1 - kv0 on are masked (all of them for rows
    // above the block, which go in one instruction per 64 columns).
    std::uint32_t r = 0;
    while (r < rows && st.q0 + r0 + r + shift < st.kv0) ++r;
    if (r > 0) nd_fill_columns({s, bk_, bk_}, 0, r, 0, kMasked);
    for (; r < rows; ++r) {
      const std::uint32_t qi = st.q0 + r0 + r + shift;
      if (qi + 1 < st.kv0 + st.w) nd_fill_columns({s, bk_, bk_}, r, 1, qi + 1 - st.kv0, kMasked);
    }
  }

  // The online softmax of the tile: the running max m and sum l of the unit (state p, in scaled scores),
  // alpha = exp(m_old - m_new) for the accumulator, s = exp(scale s - m). Unmasked scores arrive unscaled: the row
  // max is taken on them and scaled (the scale is positive), and the subtraction pass scales the scores too (one
  // FusedMulAdd: scale s + (-m)), so the scale costs no pass of its own. A row is fully masked only by an
  // explicit mask, whose scores arrive scaled.
  void online_softmax(std::size_t i, const LocalTensor<float>& s, std::uint32_t cr, std::uint32_t rows,
                      std::uint32_t p) {
    const FaStep& st = steps_[i];
    const bool unscaled = !g_.s.mask;
    const LocalTensor<float> m = sm_.fm[p].template Get<float>()[cr], l = sm_.fl[p].template Get<float>()[cr];
    const LocalTensor<float> alpha = sm_.falpha[i % 2].template Get<float>()[cr], mx = sm_.fmx.template Get<float>();
    const LocalTensor<float> rs = sm_.frs.template Get<float>(), bc = sm_.fbc.template Get<float>();
    if (st.first) {
      nd_row_reduce(true, m, {s, bk_, bk_}, mx, rows, vec_);
      if (unscaled) Muls(m, m, g_.s.scale, rows);
      Maxs(m, m, kMasked, rows);  // a first block masked with -inf (left padding) must not make s - m NaN
    } else {
      nd_row_reduce(true, mx, {s, bk_, bk_}, rs, rows, vec_);
      if (unscaled) Muls(mx, mx, g_.s.scale, rows);
      Max(mx, m, mx, rows);     // m_new
      Sub(alpha, m, mx, rows);  // m_old - m_new
      Exp(alpha, alpha, rows);
      Adds(m, mx, 0.0f, rows);
    }
    if (unscaled) {
      Muls(rs, m, -1.0f, rows);
      Brcb(bc, rs, u8(ceil_div(rows, 8)), BrcbRepeatParams{1, 8});
      nd_row_scale_add({s, bk_, bk_}, sm_.fscale.template Get<float>(), bc, rows);
    } else {
      Brcb(bc, m, u8(ceil_div(rows, 8)), BrcbRepeatParams{1, 8});
      nd_row_op(RowOp::kSub, {s, bk_, bk_}, bc, rows);
    }
    Exp(s, s, static_cast<std::uint64_t>(rows) * bk_);
    if (st.first) {
      nd_row_reduce(false, l, {s, bk_, bk_}, mx, rows, vec_);
    } else {
      nd_row_reduce(false, rs, {s, bk_, bk_}, mx, rows, vec_);
      Mul(l, l, alpha, rows);
      Add(l, l, rs, rows);
    }
  }

  void softmax_step(std::size_t i) {
    const FaStep& st = steps_[i];
    std::uint32_t r0 = 0;
    const std::uint32_t rows = my_rows(st, &r0);
    const std::uint32_t p = unit_of_[i] % 2;
    cross_core_wait_flag(kSReady, PIPE_MTE2);
    if (rows == 0) {
      cross_core_set_flag(2, PIPE_MTE2, kPReady);
      return;
    }
    // The rows in chunks of rc through the double-buffered S and P queues: the loads of one chunk, the vector
    // work of the next and the P of the one before overlap.
    for (std::uint32_t cr = 0; cr < rows; cr += g_.t.rc) {
      const std::uint32_t n = std::min(g_.t.rc, rows - cr);
      const LocalTensor<float> s = scores_in(i, r0 + cr, n);
      mask_invisible(st, s, r0 + cr, n);
      online_softmax(i, s, cr, n, p);
      LocalTensor<T> pt = sm_.qout.template AllocTensor<T>();
      convert(pt, s, static_cast<std::uint64_t>(n) * bk_);
      sm_.qs.FreeTensor(s);
      sm_.qout.EnQue(pt);
      pt = sm_.qout.template DeQue<T>();
      GlobalTensor<T> gp;
      gp.SetGlobalBuffer(slot_.p(i) + static_cast<std::uint64_t>(r0 + cr) * bk_ * sizeof(T));
      DataCopy(gp, pt, static_cast<std::uint64_t>(n) * bk_);
      sm_.qout.FreeTensor(pt);
    }
    cross_core_set_flag(2, PIPE_MTE3, kPReady);
  }

  // PV_i folded into the unit's output accumulator (rescaled by alpha); at the unit's last block, O = acc / l.
  void accumulate_step(std::size_t i) {
    const FaStep& st = steps_[i];
    std::uint32_t r0 = 0;
    const std::uint32_t rows = my_rows(st, &r0);
    const std::uint32_t p = unit_of_[i] % 2;
    cross_core_wait_flag(kPvReady, PIPE_MTE2);
    if (rows == 0) return;
    LocalTensor<float> pv = sm_.qpv.template AllocTensor<float>();
    GlobalTensor<float> gpv;
    gpv.SetGlobalBuffer(slot_.pv(i) + static_cast<std::uint64_t>(r0) * d_ * 4);
    DataCopy(pv, gpv, static_cast<std::uint64_t>(rows) * d_);
    sm_.qpv.EnQue(pv);
    pv = sm_.qpv.template DeQue<float>();
    const LocalTensor<float> o = sm_.fo[p].template Get<float>(), bc = sm_.fbc.template Get<float>();
    if (st.first) {
      Adds(o, pv, 0.0f, static_cast<std::uint64_t>(rows) * d_);
    } else {
      // o = alpha o + PV through the other parity's accumulator, free while this unit accumulates (the previous
      // unit stored its O before this unit's first PV, the next one starts after this one's last): neither pass
      // reads and writes the same blocks, which would cost a bank conflict per repeat.
      const LocalTensor<float> scaled = sm_.fo[1 - p].template Get<float>();
      Brcb(bc, sm_.falpha[i % 2].template Get<float>(), u8(ceil_div(rows, 8)), BrcbRepeatParams{1, 8});
      nd_row_op(RowOp::kMul, {scaled, d_, d_}, {o, d_, d_}, bc, rows);
      Add(o, scaled, pv, static_cast<std::uint64_t>(rows) * d_);
    }
    sm_.qpv.FreeTensor(pv);
    if (!st.last) return;
    if (g_.s.splits > 1) {
      store_partial(st, r0, rows, p);
      return;
    }
    // O = o / l into the other accumulator (not in place, as above), then to T. A row a mask hides whole has o = 0
    // and l = 0: l floored at kMinSum makes it 0, as PyTorch's and CANN's attention give, not 0 / 0.
    const LocalTensor<float> out = sm_.fo[1 - p].template Get<float>();
    if (g_.s.mask) Maxs(sm_.fl[p].template Get<float>(), sm_.fl[p].template Get<float>(), kMinSum, rows);
    Brcb(bc, sm_.fl[p].template Get<float>(), u8(ceil_div(rows, 8)), BrcbRepeatParams{1, 8});
    nd_row_op(RowOp::kDiv, {out, d_, d_}, {o, d_, d_}, bc, rows);
    LocalTensor<T> ot = sm_.qout.template AllocTensor<T>();
    convert(ot, out, static_cast<std::uint64_t>(rows) * d_);
    sm_.qout.EnQue(ot);
    ot = sm_.qout.template DeQue<T>();
    store_o(g_, st, st.q0 + r0, ot, rows);
    sm_.qout.FreeTensor(ot);
  }

  // A unit of a split head ends with its partial result in the workspace: O = o / l in fp32 and the rows'
  // log-sum-exp m + ln(l) (in scaled scores), each broadcast over a 32 B block. The copies are waited for at once
  // (the buffers are the other parity's accumulator and the combine scratch; a unit ends once per block).
  void store_partial(const FaStep& st, std::uint32_t r0, std::uint32_t rows, std::uint32_t p) {
    const LocalTensor<float> out = sm_.fo[1 - p].template Get<float>(), bc = sm_.fbc.template Get<float>();
    const LocalTensor<float> l = sm_.fl[p].template Get<float>(), lse = sm_.fcmb.template Get<float>();
    const std::uint64_t bn = static_cast<std::uint64_t>(st.b) * g_.s.N + st.n;
    Maxs(l, l, kMinSum, rows);
    Brcb(bc, l, u8(ceil_div(rows, 8)), BrcbRepeatParams{1, 8});
    nd_row_op(RowOp::kDiv, {out, d_, d_}, {sm_.fo[p].template Get<float>(), d_, d_}, bc, rows);
    Ln(l, l, rows);
    Add(l, l, sm_.fm[p].template Get<float>(), rows);
    Brcb(lse, l, u8(ceil_div(rows, 8)), BrcbRepeatParams{1, 8});
    set_flag(PIPE_V, PIPE_MTE3, v_to_mte3_);
    wait_flag(PIPE_V, PIPE_MTE3, v_to_mte3_);
    GlobalTensor<float> go, gl;
    go.SetGlobalBuffer(part_o(g_, bn, st.split, r0));
    gl.SetGlobalBuffer(part_lse(g_, bn, st.split, r0));
    DataCopy(go, out, static_cast<std::uint64_t>(rows) * d_);
    DataCopy(gl, lse, static_cast<std::uint64_t>(rows) * 8);
    set_flag(PIPE_MTE3, PIPE_V, mte3_to_v_);
    wait_flag(PIPE_MTE3, PIPE_V, mte3_to_v_);
  }

  // Once every AIV has stored its partials (a mode-0 cross-core flag: the kernel runs on every group), AIV a of
  // the 2 x block_dim combines heads a, a + 2 block_dim, ...: per row, with M the largest log-sum-exp of its
  // splits, O = sum_s exp(lse_s - M) O_s / sum_s exp(lse_s - M), a chunk of at most ceil(bq / 2) rows at a time.
  // The combine's loads and stores wait for each other plainly: it reads a few KiB per head.
  void combine() {
    cross_core_set_flag(0, PIPE_MTE3, kCombine);
    cross_core_wait_flag(kCombine, PIPE_ALL);
    const std::uint32_t aivs = GetBlockNum() * 2, me = GetBlockIdx() * 2 + GetSubBlockIdx();
    const std::uint32_t R = sm_.R, r8 = u32(ceil_to(R, 8)) * 8;  // floats of one broadcast vector
    const LocalTensor<float> cmb = sm_.fcmb.template Get<float>();
    const LocalTensor<float> lse = cmb, mx = cmb[r8], sum = cmb[2ULL * r8], w = cmb[3ULL * r8];
    const LocalTensor<float> acc = sm_.fo[0].template Get<float>(), part = sm_.fo[1].template Get<float>();
    auto load = [&](const LocalTensor<float>& dst, GM_ADDR src, std::uint64_t n) {
      GlobalTensor<float> gs;
      gs.SetGlobalBuffer(src);
      DataCopy(dst, gs, n);
      set_flag(PIPE_MTE2, PIPE_V, mte2_to_v_);
      wait_flag(PIPE_MTE2, PIPE_V, mte2_to_v_);
    };
    auto reads_done = [&] {  // the Vector unit has read what MTE2 loaded: the next load may overwrite it
      set_flag(PIPE_V, PIPE_MTE2, v_to_mte2_);
      wait_flag(PIPE_V, PIPE_MTE2, v_to_mte2_);
    };
    const std::uint64_t heads = static_cast<std::uint64_t>(g_.s.B) * g_.s.N;
    for (std::uint64_t bn = me; bn < heads; bn += aivs) {
      const std::uint32_t b = u32(bn / g_.s.N), used = splits_used(g_.s, g_.t, b);
      for (std::uint32_t c0 = 0; c0 < g_.s.S; c0 += R) {
        const std::uint32_t rows = std::min(R, g_.s.S - c0);
        const std::uint64_t lanes = static_cast<std::uint64_t>(rows) * 8, elems = static_cast<std::uint64_t>(rows) * d_;
        for (std::uint32_t sp = 0; sp < used; ++sp) {  // M over the splits
          load(sp ? lse : mx, part_lse(g_, bn, sp, c0), lanes);
          if (sp) Max(mx, mx, lse, lanes);
          reads_done();
        }
        for (std::uint32_t sp = 0; sp < used; ++sp) {
          load(lse, part_lse(g_, bn, sp, c0), lanes);
          load(part, part_o(g_, bn, sp, c0), elems);
          Sub(w, lse, mx, lanes);
          Exp(w, w, lanes);
          if (sp == 0) {
            Adds(sum, w, 0.0f, lanes);
            nd_row_op(RowOp::kMul, {acc, d_, d_}, {part, d_, d_}, w, rows);
          } else {
            Add(sum, sum, w, lanes);
            nd_row_op(RowOp::kMul, {part, d_, d_}, {part, d_, d_}, w, rows);
            Add(acc, acc, part, elems);
          }
          reads_done();
        }
        nd_row_op(RowOp::kDiv, {acc, d_, d_}, {acc, d_, d_}, sum, rows);
        LocalTensor<T> ot = sm_.qout.template AllocTensor<T>();
        convert(ot, acc, elems);
        sm_.qout.EnQue(ot);
        ot = sm_.qout.template DeQue<T>();
        FaStep st{};
        st.b = b;
        st.n = u32(bn % g_.s.N);
        store_o(g_, st, c0, ot, rows);
        sm_.qout.FreeTensor(ot);
      }
    }
  }

  const FaArgs& g_;
  const std::vector<FaStep> steps_;
  const Slots slot_;
  std::vector<std::uint32_t> unit_of_;  // the unit (counted from 0 on this block) of each step
  TPipe pipe_;
  SoftmaxState<T> sm_;
  std::uint32_t bk_ = 0, d_ = 0, vec_ = 0;
  std::uint32_t v_to_mte3_ = 0, mte3_to_v_ = 0, mte2_to_v_ = 0, v_to_mte2_ = 0;  // the partials' and combine's flags
  bool shared_mask_ = false;
};

}  // namespace

template <class T>
void fa_vector_split(const FaArgs& g) {
  VectorSide<T>(g).run();
}

// The cube side: S_i into its slot, then PV_{i-1} (the P of the previous block is ready by then).
template <class T>
void fa_cube_split(const FaArgs& g) {
  const std::vector<FaStep> steps = steps_of(g, GetBlockIdx());
  const Slots slot = slots_of(g);
  TPipe pipe;
  CubeBuffers<T> cb;
  cb.init(pipe, planned_buffers<T>(g, true), true);
  auto drain = [&](GM_ADDR dst, std::uint32_t rows, std::uint32_t cols, std::uint32_t stride) {
    LocalTensor<float> c = cb.qc.template DeQue<float>();
    GlobalTensor<float> gs;
    gs.SetGlobalBuffer(dst);
    Fixpipe(gs, c, FixpipeParams{u16(cols), u16(rows), u16(ceil_to(rows, 16)), stride, false});
    cb.qc.FreeTensor(c);
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
    drain(slot.pv(i), st.qr, g.s.D, g.s.D);
    cross_core_set_flag(2, PIPE_FIX, kPvReady);
  };
  for (std::size_t i = 0; i < steps.size(); ++i) {
    const FaStep& st = steps[i];
    cb.load_k(g, st);
    // S a sub-block of ck keys at a time, each drained into its columns of the slot; the AIVs are told once.
    for (std::uint32_t c0 = 0; c0 < st.w; c0 += g.t.ck) {
      LocalTensor<float> c = cb.qc.template AllocTensor<float>();
      cb.scores(g, st, c0, c);
      cb.qc.EnQue(c);
      drain(slot.s(i) + c0 * 4ULL, st.qr, std::min(g.t.ck, st.w - c0), g.t.bk);
    }
    cross_core_set_flag(2, PIPE_FIX, kSReady);
    if (i > 0) pv_step(i - 1);
  }
  if (!steps.empty()) pv_step(steps.size() - 1);
}

template void fa_cube_split<half>(const FaArgs&);
template void fa_cube_split<bfloat16_t>(const FaArgs&);
template void fa_vector_split<half>(const FaArgs&);
template void fa_vector_split<bfloat16_t>(const FaArgs&);

}  // namespace npusim::stack::ops::attention
