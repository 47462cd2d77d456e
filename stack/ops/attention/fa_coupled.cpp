// FlashAttention on coupled chips (fa_common.hpp): one core does both; S and PV go L0C -> UB (NZ fractals) and P
// goes UB -> L1, with no GM round trip. Row operations work on the NZ layout (row_math.hpp's NzTile): a column
// block of 16 is contiguous, a per-row value broadcast into a 16-wide column block has the same shape, and a row
// reduction is a reduction over column blocks then over 16 lanes.
#include "stack/ops/attention/fa_common.hpp"
#include "stack/ops/row_math.hpp"

namespace npusim::stack::ops::attention {

namespace {

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
  void publish() { set_flag(producer, consumer, full); }  // producer side, after writing
  void take() { wait_flag(producer, consumer, full); }    // consumer side, before reading
  void release() {                                        // consumer side, after reading
    set_flag(consumer, producer, free);
    released = true;
  }
};

// The coupled kernel on one core: the Cube computes S a block ahead; the Vector unit takes S from L0C, runs the
// online softmax on the NZ tile, hands P to the Cube through L1, and folds PV into the output accumulator.
template <class T>
class Coupled {
 public:
  explicit Coupled(const FaArgs& g) : g_(g), steps_(steps_of(g, GetBlockIdx())) {}

  void run() {
    if (steps_.empty()) return;
    init();
    std::uint32_t s_buf = scores(steps_[0]);
    for (std::size_t i = 0; i < steps_.size(); ++i) {
      const std::uint32_t this_s = s_buf;
      if (i + 1 < steps_.size()) s_buf = scores(steps_[i + 1]);  // the Cube runs a block ahead
      softmax(steps_[i], this_s);
      accumulate(steps_[i], pv(steps_[i]));
    }
  }

 private:
  static constexpr std::uint64_t kEs = sizeof(T);

  void init() {
    const FaBuffers b = planned_buffers<T>(g_, false);
    cb_.init(pipe_, b, false);
    init_buffer(pipe_, l0c_, b.l0c, "c");
    init_buffer(pipe_, p_l1_, b.l1, "p");
    init_buffer(pipe_, s_ub_, b.ub, "s");
    init_buffer(pipe_, pv_ub_, b.ub, "pv");
    init_buffer(pipe_, o_ub_, b.ub, "o");
    init_buffer(pipe_, part_, b.ub, "part");
    init_buffer(pipe_, bc_, b.ub, "bc");
    init_buffer(pipe_, p_ub_, b.ub, "p");
    init_buffer(pipe_, nz_ub_, b.ub, "o_nz");
    init_buffer(pipe_, out_ub_, b.ub, "o_t");
    init_buffer(pipe_, m_v_, b.ub, "m");
    init_buffer(pipe_, l_v_, b.ub, "l");
    init_buffer(pipe_, alpha_v_, b.ub, "alpha");
    init_buffer(pipe_, mx_v_, b.ub, "mx");
    for (auto& h : c_ready_) h.init(pipe_, PIPE_M, PIPE_V);
    p_in_ub_.init(pipe_, PIPE_V, PIPE_MTE3);
    p_in_l1_.init(pipe_, PIPE_MTE3, PIPE_MTE1);
    out_ready_.init(pipe_, PIPE_V, PIPE_MTE3);
    if (g_.s.mask) {
      init_buffer(pipe_, mask_ub_, b.ub, "mask");
      mask_in_.init(pipe_, PIPE_MTE2, PIPE_V);
    }
    m_ = m_v_.Get<float>();
    l_ = l_v_.Get<float>();
    alpha_ = alpha_v_.Get<float>();
    mx_ = mx_v_.Get<float>();
    o_ = o_ub_.Get<float>();
    bcast_ = bc_.Get<float>()[kBankSkew / 4];  // the plan's skew (fa_buffers)
    scratch_ = part_.Get<float>();
  }

  // The next L0C buffer, once the Vector unit has read what it held.
  std::uint32_t l0c_alloc() {
    const std::uint32_t x = next_c_++ % 2;
    c_ready_[x].acquire();
    return x;
  }

  std::uint32_t scores(const FaStep& st) {
    const std::uint32_t x = l0c_alloc();
    cb_.load_k(g_, st);
    cb_.scores(g_, st, 0, l0c_[x].template Get<float>());  // one sub-block: ck = bk on coupled chips
    c_ready_[x].publish();
    return x;
  }

  // The mask rows' 16-column pieces land as NZ column blocks (fp16 16 x 16 fractals); a shared key-padding row as
  // it is.
  void mask_in(const FaStep& st, std::uint32_t m1, std::uint32_t n1) {
    mask_in_.acquire();
    const LocalTensor<T> mk = mask_ub_.template Get<T>();
    const std::uint64_t row = g_.s.mask_at(st.b, st.n, st.q0) + st.kv0;
    if (g_.s.mask_rows_shared()) {
      copy_rows_in(mk, g_.mask + row * kEs, 1, st.w, g_.s.SK);
    } else {
      for (std::uint32_t fn = 0; fn < n1; ++fn) {
        const std::uint32_t cols = std::min<std::uint32_t>(16, st.w - fn * 16);
        GlobalTensor<T> gm;
        gm.SetGlobalBuffer(g_.mask + (row + fn * 16) * kEs);
        DataCopyPad(mk[static_cast<std::uint64_t>(fn) * m1 * 256], gm,
                    DataCopyExtParams{u16(st.qr), u32(cols * kEs), u32((g_.s.SK - cols) * kEs), 0},
                    DataCopyPadExtParams<T>{});
      }
    }
    mask_in_.publish();
  }

  void add_mask(const NzTile& s, std::uint32_t m1, std::uint32_t n1) {
    mask_in_.take();
    const LocalTensor<T> mk = mask_ub_.template Get<T>();
    for (std::uint32_t fn = 0; fn < n1; ++fn) {
      if (g_.s.mask_rows_shared())  // the row's 16 values of this column block into each of its 16 m1 rows (source
                                    // repeat stride 0)
        Cast(scratch_, mk[static_cast<std::uint64_t>(fn) * 16], RoundMode::CAST_NONE, 16, u8(m1 * 16),
             UnaryRepeatParams{1, 1, 2, 0});
      else
        convert(scratch_, mk[static_cast<std::uint64_t>(fn) * m1 * 256], s.block_elems());
      Add(s.block(fn), s.block(fn), scratch_, s.block_elems());
    }
    mask_in_.release();
  }

  // Columns past the keys in the last column block, and (causal) the keys after each query row, set to kMasked.
  void mask_invisible(const FaStep& st, const NzTile& s, std::uint32_t m1, std::uint32_t n1) {
    if (st.w % 16) {
      const std::uint32_t valid = st.w % 16;
      const std::uint64_t bits[2] = {nz_row_group_bits(0, [&](std::uint32_t, std::uint32_t c) { return c >= valid; }),
                                     0};
      Duplicate(s.block(n1 - 1), kMasked, bits, u8(m1 * 4), 1, 8);
    }
    if (!g_.s.causal || st.kv0 + st.w - 1 <= st.q0) return;
    // Blocks start at multiples of 16, so a fractal is fully visible, fully masked, or on the diagonal.
    const std::int64_t delta = (static_cast<std::int64_t>(st.q0) - st.kv0) / 16;  // fn - fm on the diagonal
    for (std::uint32_t fn = 0; fn < n1; ++fn) {
      const std::int64_t masked = std::min<std::int64_t>(m1, static_cast<std::int64_t>(fn) - delta);
      if (masked > 0) Duplicate(s.block(fn), kMasked, static_cast<std::uint64_t>(masked) * 256);
      const std::int64_t diag = static_cast<std::int64_t>(fn) - delta;
      if (diag < 0 || diag >= m1) continue;
      for (std::uint32_t gr = 0; gr < 4; ++gr) {
        const std::uint64_t bits[2] = {
            nz_row_group_bits(gr * 4, [](std::uint32_t r, std::uint32_t c) { return c > r; }), 0};
        Duplicate(s.block(fn)[static_cast<std::uint64_t>(diag) * 256 + gr * 64], kMasked, bits, 1, 1, 8);
      }
    }
  }

  // The running max m and sum l, alpha = exp(m_old - m_new), s = exp(s - m).
  void online_softmax(const FaStep& st, const NzTile& s) {
    const std::uint32_t m1 = s.m1;
    if (st.first) {
      nz_row_reduce(true, m_, s, scratch_);
      Maxs(m_, m_, kMasked, m1 * 16);  // a first block masked with -inf (left padding) must not make s - m NaN
    } else {
      nz_row_reduce(true, mx_, s, scratch_);
      Max(mx_, m_, mx_, m1 * 16);
      Sub(alpha_, m_, mx_, m1 * 16);
      Exp(alpha_, alpha_, m1 * 16);
      Adds(m_, mx_, 0.0f, m1 * 16);
    }
    nz_row_broadcast(bcast_, m_, m1);
    nz_row_op(RowOp::kSub, s, bcast_);
    Exp(s.t, s.t, s.elems());
    if (st.first) {
      nz_row_reduce(false, l_, s, scratch_);
    } else {
      nz_row_reduce(false, mx_, s, scratch_);
      Mul(l_, l_, alpha_, m1 * 16);
      Add(l_, l_, mx_, m1 * 16);
    }
  }

  void softmax(const FaStep& st, std::uint32_t x) {
    const std::uint32_t m1 = u32(ceil_div(st.qr, 16)), n1 = u32(ceil_div(st.w, 16));
    const NzTile s{s_ub_.Get<float>(), m1, n1};
    if (g_.s.mask) mask_in(st, m1, n1);
    c_ready_[x].take();
    DataCopy(s.t, l0c_[x].template Get<float>(), s.elems());  // L0C -> UB on the Vector pipe
    c_ready_[x].release();
    Muls(s.t, s.t, g_.s.scale, s.elems());
    if (g_.s.mask) add_mask(s, m1, n1);
    mask_invisible(st, s, m1, n1);
    online_softmax(st, s);
    // P: the fp32 fractals cast to fp16 are the L1 NZ layout of the left operand (16 x 16 fp16 fractals).
    p_in_ub_.acquire();
    convert(p_ub_.template Get<T>(), s.t, s.elems());
    p_in_ub_.publish();
    p_in_ub_.take();
    p_in_l1_.acquire();
    DataCopy(p_l1_.template Get<T>(), p_ub_.template Get<T>(), s.elems());  // UB -> L1 on MTE3
    p_in_ub_.release();
    p_in_l1_.publish();
  }

  std::uint32_t pv(const FaStep& st) {
    cb_.load_v(g_, st);
    const std::uint32_t x = l0c_alloc();
    p_in_l1_.take();
    cb_.pv(g_, st, p_l1_.template Get<T>(), l0c_[x].template Get<float>());
    p_in_l1_.release();
    c_ready_[x].publish();
    return x;
  }

  // PV folded into the accumulator (rescaled by alpha); at the unit's last block O = acc / l, NZ -> ND in the UB,
  // then out.
  void accumulate(const FaStep& st, std::uint32_t x) {
    const std::uint32_t m1 = u32(ceil_div(st.qr, 16)), dn = g_.s.D / 16;
    const NzTile acc{o_, m1, dn};
    const LocalTensor<float> pvt = pv_ub_.Get<float>();
    c_ready_[x].take();
    DataCopy(pvt, l0c_[x].template Get<float>(), acc.elems());
    c_ready_[x].release();
    if (st.first) {
      Adds(o_, pvt, 0.0f, acc.elems());
    } else {
      nz_row_broadcast(bcast_, alpha_, m1);
      nz_row_op(RowOp::kMul, acc, bcast_);
      Add(o_, o_, pvt, acc.elems());
    }
    if (!st.last) return;
    if (g_.s.mask) Maxs(l_, l_, kMinSum, m1 * 16);  // a row the mask hides whole: 0, not 0 / 0 (fa_split.cpp)
    nz_row_broadcast(bcast_, l_, m1);
    nz_row_op(RowOp::kDiv, acc, bcast_);
    // In T a row's 16 values of a column block are one 32 B block, so one strided copy per column block (8 rows
    // per repeat) puts them at their place in the rows; then one contiguous copy to GM.
    const LocalTensor<T> nz = nz_ub_.template Get<T>(), ot = out_ub_.template Get<T>();
    convert(nz, o_, acc.elems());
    out_ready_.acquire();
    const std::uint32_t row_blocks = u32(g_.s.D * kEs / 32);
    for (std::uint32_t fn = 0; fn < dn; ++fn)
      Adds(ot[static_cast<std::uint64_t>(fn) * 16], nz[static_cast<std::uint64_t>(fn) * m1 * 256], 0.0f, 128,
           u8(m1 * 2), UnaryRepeatParams{u16(row_blocks), 1, u8(8 * row_blocks), 8});
    out_ready_.publish();
    out_ready_.take();
    store_o(g_, st, st.q0, ot, st.qr);
    out_ready_.release();
  }

  const FaArgs& g_;
  const std::vector<FaStep> steps_;
  TPipe pipe_;
  CubeBuffers<T> cb_;
  TBuf<TPosition::CO1> l0c_[2];
  TBuf<TPosition::A1> p_l1_;
  TBuf<TPosition::VECCALC> s_ub_, pv_ub_, o_ub_, part_, bc_, p_ub_, nz_ub_, out_ub_, mask_ub_, m_v_, l_v_, alpha_v_,
      mx_v_;
  Handoff c_ready_[2], p_in_l1_, p_in_ub_, out_ready_, mask_in_;
  std::uint32_t next_c_ = 0;
  LocalTensor<float> m_, l_, alpha_, mx_, o_, bcast_, scratch_;
};

}  // namespace

template <class T>
void fa_coupled(const FaArgs& g) {
  Coupled<T>(g).run();
}

template void fa_coupled<half>(const FaArgs&);
template void fa_coupled<bfloat16_t>(const FaArgs&);

}  // namespace npusim::stack::ops::attention
