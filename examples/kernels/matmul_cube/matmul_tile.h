// The cube path of one C tile, shared by the matmul examples: each block computes one baseM x baseN tile of
// C = A B (fp16 in GM, row-major), looping over K in baseK steps: GM -ND->NZ-> L1 (A1/B1 queues) -> L0A/L0B (A2/B2
// queues; B's fractals transposed) -> Mmad accumulating in fp32 in L0C -> Fixpipe NZ->ND with fp32->fp16 -> GM.
// All queues have two buffers, so the next K step's copies overlap this one's Mmad.
#pragma once

#include "kernel_operator.h"

struct MatmulTiling {
  uint32_t M, N, K;              // multiples of the base sizes
  uint32_t baseM, baseN, baseK;  // multiples of 16; baseM * baseN * 4 B fits L0C, 2 x baseM * baseK * 2 B L0A, ...
};

class KernelMatmul {
 public:
  // `c` receives the block's tile at its place in an M x N matrix.
  __aicore__ inline void Init(GM_ADDR a, GM_ADDR b, GM_ADDR c, const MatmulTiling& t) {
    t_ = t;
    const uint32_t tilesN = t.N / t.baseN;
    const uint32_t mi = AscendC::GetBlockIdx() / tilesN, ni = AscendC::GetBlockIdx() % tilesN;
    aGm_.SetGlobalBuffer((__gm__ half*)a + static_cast<uint64_t>(mi) * t.baseM * t.K, t.baseM * t.K);
    bGm_.SetGlobalBuffer((__gm__ half*)b + static_cast<uint64_t>(ni) * t.baseN, static_cast<uint64_t>(t.K) * t.N - ni * t.baseN);
    cGm_.SetGlobalBuffer((__gm__ half*)c + static_cast<uint64_t>(mi) * t.baseM * t.N + ni * t.baseN,
                         static_cast<uint64_t>(t.baseM - 1) * t.N + t.baseN);
    pipe_.InitBuffer(qA1_, 2, t.baseM * t.baseK * sizeof(half));
    pipe_.InitBuffer(qB1_, 2, t.baseK * t.baseN * sizeof(half));
    pipe_.InitBuffer(qA2_, 2, t.baseM * t.baseK * sizeof(half));
    pipe_.InitBuffer(qB2_, 2, t.baseK * t.baseN * sizeof(half));
    pipe_.InitBuffer(qC1_, 1, t.baseM * t.baseN * sizeof(float));
  }

  __aicore__ inline void Process() {
    AscendC::LocalTensor<float> c1 = qC1_.AllocTensor<float>();
    for (uint32_t k0 = 0; k0 < t_.K; k0 += t_.baseK) {
      CopyIn(k0);
      SplitToL0();
      Compute(c1, k0 == 0);
    }
    qC1_.EnQue(c1);
    c1 = qC1_.DeQue<float>();
    AscendC::FixpipeParamsV220 fp;
    fp.nSize = t_.baseN;
    fp.mSize = t_.baseM;
    fp.srcStride = t_.baseM;  // L0C rows per column block
    fp.dstStride = t_.N;      // GM row stride, elements
    fp.quantPre = AscendC::QuantMode_t::F322F16;
    AscendC::Fixpipe<half, float, AscendC::CFG_ROW_MAJOR>(cGm_, c1, fp);
    qC1_.FreeTensor(c1);
  }

 private:
  __aicore__ inline void CopyIn(uint32_t k0) {
    AscendC::LocalTensor<half> a1 = qA1_.AllocTensor<half>();
    AscendC::LocalTensor<half> b1 = qB1_.AllocTensor<half>();
    AscendC::Nd2NzParams na;  // A tile: baseM rows of baseK, row stride K
    na.ndNum = 1;
    na.nValue = t_.baseM;
    na.dValue = t_.baseK;
    na.srcDValue = t_.K;
    na.dstNzC0Stride = t_.baseM;
    na.dstNzNStride = 1;
    AscendC::DataCopy(a1, aGm_[k0], na);
    AscendC::Nd2NzParams nb;  // B tile: baseK rows of baseN, row stride N
    nb.ndNum = 1;
    nb.nValue = t_.baseK;
    nb.dValue = t_.baseN;
    nb.srcDValue = t_.N;
    nb.dstNzC0Stride = t_.baseK;
    nb.dstNzNStride = 1;
    AscendC::DataCopy(b1, bGm_[static_cast<uint64_t>(k0) * t_.N], nb);
    qA1_.EnQue(a1);
    qB1_.EnQue(b1);
  }

  // L1 NZ holds A's fractal (k, m) at k * m1 + m; L0A wants row-major fractals (m, k) at m * k1 + k: one load per
  // fractal row. B's fractal (n, k) sits at n * k1 + k; L0B wants (k, n) at k * n1 + n, each transposed.
  __aicore__ inline void SplitToL0() {
    AscendC::LocalTensor<half> a1 = qA1_.DeQue<half>();
    AscendC::LocalTensor<half> b1 = qB1_.DeQue<half>();
    AscendC::LocalTensor<half> a2 = qA2_.AllocTensor<half>();
    AscendC::LocalTensor<half> b2 = qB2_.AllocTensor<half>();
    const uint32_t m1 = t_.baseM / 16, n1 = t_.baseN / 16, k1 = t_.baseK / 16;
    for (uint32_t m = 0; m < m1; m++) {
      AscendC::LoadData(a2[m * k1 * 256], a1, AscendC::LoadData2DParams(m, k1, m1, 0, 0, false, 0));
    }
    for (uint32_t k = 0; k < k1; k++) {
      AscendC::LoadData(b2[k * n1 * 256], b1, AscendC::LoadData2DParams(k, n1, k1, 0, 0, true, 0));
    }
    qA2_.EnQue(a2);
    qB2_.EnQue(b2);
    qA1_.FreeTensor(a1);
    qB1_.FreeTensor(b1);
  }

  __aicore__ inline void Compute(const AscendC::LocalTensor<float>& c1, bool first) {
    AscendC::LocalTensor<half> a2 = qA2_.DeQue<half>();
    AscendC::LocalTensor<half> b2 = qB2_.DeQue<half>();
    AscendC::MmadParams mp(t_.baseM, t_.baseN, t_.baseK);
    mp.cmatrixInitVal = first;  // the first K step starts C at 0, the rest accumulate
    AscendC::Mmad(c1, a2, b2, mp);
    qA2_.FreeTensor(a2);
    qB2_.FreeTensor(b2);
  }

  MatmulTiling t_{};
  AscendC::TPipe pipe_;
  AscendC::TQue<AscendC::TPosition::A1, 2> qA1_;
  AscendC::TQue<AscendC::TPosition::B1, 2> qB1_;
  AscendC::TQue<AscendC::TPosition::A2, 2> qA2_;
  AscendC::TQue<AscendC::TPosition::B2, 2> qB2_;
  AscendC::TQue<AscendC::TPosition::CO1, 1> qC1_;
  AscendC::GlobalTensor<half> aGm_, bGm_, cGm_;
};
