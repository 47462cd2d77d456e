// The tiles of one FlashAttention step, each alone on one core, for comparison with published per-tile costs
// (docs/calibration.md, "FlashAttention tiles"): head dim H = 128, a query tile of 128 rows, a key tile of 256,
// fp16 in GM, fp32 scores and accumulators. Each kernel runs its tile `repeat` times, every time from GM to GM (or
// UB) with a PipeBarrier<PIPE_ALL> between repetitions, so (cycles(repeat = R) - cycles(repeat = 1)) / (R - 1) is
// one tile's latency on an idle core without the kernel's start-up.
//   fa_qk      (AIC)  S = Q K^T: K GM -> L1 (ND -> NZ; Q is there already), Q and K L1 -> L0A / L0B, Mmad
//                     128 x 256 x 128, FixPipe S (fp32) -> GM
//   fa_softmax (AIV)  one AIV's half (64 rows) of the online softmax of S: S in, scale, row max, the running max
//                     and the rescale factor, exp(S - max), row sum, the running sum, P (fp16) out
//   fa_pv      (AIC)  PV = P V: P, V GM -> L1 -> L0A / L0B, Mmad 128 x 128 x 256, FixPipe PV (fp32) -> GM
//   fa_update  (AIV)  one AIV's half (64 rows) of the global update: PV in, O = O x alpha + PV in fp32
#include "kernel_operator.h"

struct FaTileTiling {
  uint32_t repeat;
};

constexpr uint32_t kRows = 128, kKeys = 256, kHead = 128;
constexpr uint32_t kHalf = kRows / 2;  // rows of one AIV

__aicore__ inline FaTileTiling ReadTiling(GM_ADDR tiling) {
  return *reinterpret_cast<__gm__ FaTileTiling*>(tiling);
}

// rows x cols of fp16 at `src` (row-major, row stride cols) into L1 as NZ column blocks of `rows` rows.
__aicore__ inline void CopyNz(const AscendC::LocalTensor<half>& dst, const AscendC::GlobalTensor<half>& src,
                              uint32_t rows, uint32_t cols) {
  AscendC::Nd2NzParams p;
  p.ndNum = 1;
  p.nValue = rows;
  p.dValue = cols;
  p.srcDValue = cols;
  p.dstNzC0Stride = rows;
  p.dstNzNStride = 1;
  AscendC::DataCopy(dst, src, p);
}

// rows x cols fp32 from L0C (NZ) to GM, row-major.
__aicore__ inline void DrainFp32(const AscendC::GlobalTensor<float>& dst, const AscendC::LocalTensor<float>& c,
                                 uint32_t rows, uint32_t cols) {
  AscendC::FixpipeParamsV220 fp;
  fp.nSize = cols;
  fp.mSize = rows;
  fp.srcStride = rows;
  fp.dstStride = cols;
  AscendC::Fixpipe<float, float, AscendC::CFG_ROW_MAJOR>(dst, c, fp);
}

// A cube tile C (m x n, fp32) = A (m x k) B (k x n), fp16: A and B in L1 (NZ) and L0, C in L0C, one buffer each.
class CubeTile {
 public:
  __aicore__ inline CubeTile(uint32_t m, uint32_t n, uint32_t k) : m_(m), n_(n), k_(k) {
    pipe_.InitBuffer(a1_, m * k * sizeof(half));
    pipe_.InitBuffer(b1_, k * n * sizeof(half));
    pipe_.InitBuffer(a2_, m * k * sizeof(half));
    pipe_.InitBuffer(b2_, k * n * sizeof(half));
    pipe_.InitBuffer(c_, m * n * sizeof(float));
  }
  __aicore__ inline AscendC::LocalTensor<half> A1() { return a1_.Get<half>(); }
  __aicore__ inline AscendC::LocalTensor<half> B1() { return b1_.Get<half>(); }

  // L1 -> L0 once the copies into L1 are done, then the Mmad and the drain of C to `out` (row-major fp32). A's
  // fractal (k, m) sits at k * m1 + m in L1 and L0A wants (m, k) at m * k1 + k. B in L1 holds either B^T's rows
  // (`b_rows_are_n`: its fractal (k, n) at k * n1 + n, as L0B wants it) or B's rows (fractal (n, k) at n * k1 + k,
  // transposed into L0B).
  __aicore__ inline void Run(bool b_rows_are_n, const AscendC::GlobalTensor<float>& out) {
    const uint32_t m1 = m_ / 16, n1 = n_ / 16, k1 = k_ / 16;
    AscendC::SetFlag<AscendC::HardEvent::MTE2_MTE1>(EVENT_ID0);
    AscendC::WaitFlag<AscendC::HardEvent::MTE2_MTE1>(EVENT_ID0);
    for (uint32_t m = 0; m < m1; m++) {
      AscendC::LoadData(a2_.Get<half>()[m * k1 * 256], A1(), AscendC::LoadData2DParams(m, k1, m1, 0, 0, false, 0));
    }
    if (b_rows_are_n) {
      AscendC::LoadData(b2_.Get<half>(), B1(), AscendC::LoadData2DParams(0, k1 * n1, 1, 0, 0, false, 0));
    } else {
      for (uint32_t kk = 0; kk < k1; kk++) {
        AscendC::LoadData(b2_.Get<half>()[kk * n1 * 256], B1(), AscendC::LoadData2DParams(kk, n1, k1, 0, 0, true, 0));
      }
    }
    AscendC::SetFlag<AscendC::HardEvent::MTE1_M>(EVENT_ID0);
    AscendC::WaitFlag<AscendC::HardEvent::MTE1_M>(EVENT_ID0);
    AscendC::Mmad(c_.Get<float>(), a2_.Get<half>(), b2_.Get<half>(), AscendC::MmadParams(m_, n_, k_));
    AscendC::SetFlag<AscendC::HardEvent::M_FIX>(EVENT_ID0);
    AscendC::WaitFlag<AscendC::HardEvent::M_FIX>(EVENT_ID0);
    DrainFp32(out, c_.Get<float>(), m_, n_);
    AscendC::PipeBarrier<PIPE_ALL>();
  }

 private:
  uint32_t m_, n_, k_;
  AscendC::TPipe pipe_;
  AscendC::TBuf<AscendC::TPosition::A1> a1_;
  AscendC::TBuf<AscendC::TPosition::B1> b1_;
  AscendC::TBuf<AscendC::TPosition::A2> a2_;
  AscendC::TBuf<AscendC::TPosition::B2> b2_;
  AscendC::TBuf<AscendC::TPosition::CO1> c_;
};

extern "C" __global__ __aicore__ void fa_qk(GM_ADDR q, GM_ADDR k, GM_ADDR s, GM_ADDR tiling) {
  const FaTileTiling t = ReadTiling(tiling);
  AscendC::GlobalTensor<half> qGm, kGm;
  AscendC::GlobalTensor<float> sGm;
  qGm.SetGlobalBuffer((__gm__ half*)q, kRows * kHead);
  kGm.SetGlobalBuffer((__gm__ half*)k, kKeys * kHead);
  sGm.SetGlobalBuffer((__gm__ float*)s, kRows * kKeys);
  CubeTile tile(kRows, kKeys, kHead);
  // Q stays in L1 for all the key tiles of its query tile, as in the FlashAttention kernel: loaded once.
  CopyNz(tile.A1(), qGm, kRows, kHead);
  for (uint32_t r = 0; r < t.repeat; r++) {
    CopyNz(tile.B1(), kGm, kKeys, kHead);  // K's rows are the rows of B^T
    tile.Run(true, sGm);
  }
}

extern "C" __global__ __aicore__ void fa_pv(GM_ADDR p, GM_ADDR v, GM_ADDR o, GM_ADDR tiling) {
  const FaTileTiling t = ReadTiling(tiling);
  AscendC::GlobalTensor<half> pGm, vGm;
  AscendC::GlobalTensor<float> oGm;
  pGm.SetGlobalBuffer((__gm__ half*)p, kRows * kKeys);
  vGm.SetGlobalBuffer((__gm__ half*)v, kKeys * kHead);
  oGm.SetGlobalBuffer((__gm__ float*)o, kRows * kHead);
  CubeTile tile(kRows, kHead, kKeys);
  for (uint32_t r = 0; r < t.repeat; r++) {
    CopyNz(tile.A1(), pGm, kRows, kKeys);
    CopyNz(tile.B1(), vGm, kKeys, kHead);
    tile.Run(false, oGm);
  }
}

// One value per row of `rows` rows of `cols` fp32 (cols a multiple of 64): each 64-column chunk reduced with the
// rows as repeats into `parts` (vectors of `vec` elements), then the chunks combined into `out`.
template <bool kMax>
__aicore__ inline void RowReduce(const AscendC::LocalTensor<float>& out, const AscendC::LocalTensor<float>& x,
                                 const AscendC::LocalTensor<float>& parts, uint32_t rows, uint32_t cols, uint32_t vec) {
  const uint32_t chunks = cols / 64;
  for (uint32_t h = 0; h < chunks; h++) {
    if constexpr (kMax) {
      AscendC::WholeReduceMax(parts[h * vec], x[h * 64], 64, rows, 1, 1, cols / 8,
                              AscendC::ReduceOrder::ORDER_ONLY_VALUE);
    } else {
      AscendC::WholeReduceSum(parts[h * vec], x[h * 64], 64, rows, 1, 1, cols / 8);
    }
  }
  for (uint32_t h = 1; h < chunks; h++) {
    const AscendC::LocalTensor<float> a = h == 1 ? parts : out;  // chunk 0's values, then the running result
    if constexpr (kMax) {
      AscendC::Max(out, a, parts[h * vec], rows);
    } else {
      AscendC::Add(out, a, parts[h * vec], rows);
    }
  }
}

// x[r][:] = x[r][:] op bc[r] for `rows` rows of `cols` fp32, bc one 8-lane block per row (Brcb), a 64-column chunk
// per instruction with the rows as repeats.
template <int kOp>
__aicore__ inline void RowApply(const AscendC::LocalTensor<float>& x, const AscendC::LocalTensor<float>& bc,
                                uint32_t rows, uint32_t cols) {
  const uint8_t rep = static_cast<uint8_t>(cols / 8);
  const AscendC::BinaryRepeatParams p{1, 1, 0, rep, rep, 1};
  for (uint32_t h = 0; h < cols; h += 64) {
    if constexpr (kOp == 0) {
      AscendC::Sub(x[h], x[h], bc, 64, rows, p);
    } else {
      AscendC::Mul(x[h], x[h], bc, 64, rows, p);
    }
  }
}

extern "C" __global__ __aicore__ void fa_softmax(GM_ADDR s, GM_ADDR p, GM_ADDR tiling) {
  const FaTileTiling t = ReadTiling(tiling);
  AscendC::GlobalTensor<float> sGm;
  AscendC::GlobalTensor<half> pGm;
  sGm.SetGlobalBuffer((__gm__ float*)s, kHalf * kKeys);
  pGm.SetGlobalBuffer((__gm__ half*)p, kHalf * kKeys);
  AscendC::TPipe pipe;
  AscendC::TBuf<AscendC::TPosition::VECCALC> sb, pb, parts, m, l, mx, rs, alpha, bc;
  pipe.InitBuffer(sb, kHalf * kKeys * sizeof(float));
  pipe.InitBuffer(pb, kHalf * kKeys * sizeof(half));
  const uint32_t vec = kHalf;  // a per-row vector: 64 fp32, 256 B
  pipe.InitBuffer(parts, (kKeys / 64) * vec * sizeof(float));
  for (auto* b : {&m, &l, &mx, &rs, &alpha}) pipe.InitBuffer(*b, vec * sizeof(float));
  pipe.InitBuffer(bc, kHalf * 8 * sizeof(float));
  const AscendC::LocalTensor<float> x = sb.Get<float>();
  AscendC::Duplicate(m.Get<float>(), 0.0f, vec);
  AscendC::Duplicate(l.Get<float>(), 0.0f, vec);
  for (uint32_t r = 0; r < t.repeat; r++) {
    AscendC::DataCopy(x, sGm, kHalf * kKeys);
    AscendC::SetFlag<AscendC::HardEvent::MTE2_V>(EVENT_ID0);
    AscendC::WaitFlag<AscendC::HardEvent::MTE2_V>(EVENT_ID0);
    AscendC::Muls(x, x, 0.08838834764831845f, kHalf * kKeys);  // 1 / sqrt(128)
    // m_new = max(m, rowmax S); alpha = exp(m - m_new)
    RowReduce<true>(mx.Get<float>(), x, parts.Get<float>(), kHalf, kKeys, vec);
    AscendC::Max(mx.Get<float>(), m.Get<float>(), mx.Get<float>(), kHalf);
    AscendC::Sub(alpha.Get<float>(), m.Get<float>(), mx.Get<float>(), kHalf);
    AscendC::Exp(alpha.Get<float>(), alpha.Get<float>(), kHalf);
    AscendC::Adds(m.Get<float>(), mx.Get<float>(), 0.0f, kHalf);
    // P = exp(S - m_new); l = l alpha + rowsum P
    AscendC::Brcb(bc.Get<float>(), m.Get<float>(), kHalf / 8, AscendC::BrcbRepeatParams{1, 8});
    RowApply<0>(x, bc.Get<float>(), kHalf, kKeys);
    AscendC::Exp(x, x, kHalf * kKeys);
    RowReduce<false>(rs.Get<float>(), x, parts.Get<float>(), kHalf, kKeys, vec);
    AscendC::Mul(l.Get<float>(), l.Get<float>(), alpha.Get<float>(), kHalf);
    AscendC::Add(l.Get<float>(), l.Get<float>(), rs.Get<float>(), kHalf);
    AscendC::Cast(pb.Get<half>(), x, AscendC::RoundMode::CAST_RINT, kHalf * kKeys);
    AscendC::SetFlag<AscendC::HardEvent::V_MTE3>(EVENT_ID0);
    AscendC::WaitFlag<AscendC::HardEvent::V_MTE3>(EVENT_ID0);
    AscendC::DataCopy(pGm, pb.Get<half>(), kHalf * kKeys);
    AscendC::PipeBarrier<PIPE_ALL>();
  }
}

extern "C" __global__ __aicore__ void fa_update(GM_ADDR pv, GM_ADDR tiling) {
  const FaTileTiling t = ReadTiling(tiling);
  AscendC::GlobalTensor<float> pvGm;
  pvGm.SetGlobalBuffer((__gm__ float*)pv, kHalf * kHead);
  AscendC::TPipe pipe;
  AscendC::TBuf<AscendC::TPosition::VECCALC> pvb, skew, ob, alpha, bc;
  pipe.InitBuffer(pvb, kHalf * kHead * sizeof(float));
  // 256 B between PV and O shifts O's blocks into the other half of the UB's 16 bank groups: the Add reads both
  // and writes O, which would otherwise be three accesses of one bank a cycle (a bank conflict).
  pipe.InitBuffer(skew, 256);
  pipe.InitBuffer(ob, kHalf * kHead * sizeof(float));
  pipe.InitBuffer(alpha, kHalf * sizeof(float));
  pipe.InitBuffer(bc, kHalf * 8 * sizeof(float));
  const AscendC::LocalTensor<float> o = ob.Get<float>();
  AscendC::Duplicate(o, 0.0f, kHalf * kHead);
  AscendC::Duplicate(alpha.Get<float>(), 1.0f, kHalf);
  for (uint32_t r = 0; r < t.repeat; r++) {
    AscendC::DataCopy(pvb.Get<float>(), pvGm, kHalf * kHead);
    AscendC::SetFlag<AscendC::HardEvent::MTE2_V>(EVENT_ID0);
    AscendC::WaitFlag<AscendC::HardEvent::MTE2_V>(EVENT_ID0);
    AscendC::Brcb(bc.Get<float>(), alpha.Get<float>(), kHalf / 8, AscendC::BrcbRepeatParams{1, 8});
    RowApply<1>(o, bc.Get<float>(), kHalf, kHead);
    AscendC::Add(o, o, pvb.Get<float>(), kHalf * kHead);
    AscendC::PipeBarrier<PIPE_ALL>();
  }
}

// The cube/vector hand-over of a split chip alone: the AIC and its two AIV pass a cross-core flag back and forth
// `repeat` times (mode 2: the AIC's set reaches both AIV, and the AIC sees its flag once both have set theirs), as
// a FlashAttention step hands S to the vector cores and P back.
extern "C" __global__ __aicore__ void fa_sync(GM_ADDR tiling) {
  const FaTileTiling t = ReadTiling(tiling);
  for (uint32_t r = 0; r < t.repeat; r++) {
    if ASCEND_IS_AIC {
      AscendC::CrossCoreSetFlag<2, PIPE_FIX>(0);
      AscendC::CrossCoreWaitFlag(1);
    }
    if ASCEND_IS_AIV {
      AscendC::CrossCoreWaitFlag(0);
      AscendC::CrossCoreSetFlag<2, PIPE_MTE3>(1);
    }
  }
}

// Nothing but the launch: with --block-dim B, the launch path and B blocks' dispatch, start-up and init.
extern "C" __global__ __aicore__ void fa_empty(GM_ADDR tiling) {
  (void)tiling;
}
