// Row softmax of an fp16 [rows, cols] matrix, computed in fp32: each block takes rows / blocks rows and streams them
// through double-buffered queues. Per row: max (ReduceMax), x - max (Adds with the max read on the scalar unit after
// a V -> S flag), exp, sum (ReduceSum), scale by 1 / sum, back to fp16. The tiling struct gives rows and cols.
#include "kernel_operator.h"

constexpr int32_t kBufferNum = 2;

struct SoftmaxTiling {
  uint32_t rows;
  uint32_t cols;  // a multiple of 16 (whole 32 B blocks of fp16), at most 16384
};

class KernelSoftmax {
 public:
  __aicore__ inline void Init(GM_ADDR x, GM_ADDR y, const SoftmaxTiling& t) {
    cols_ = t.cols;
    rowsPerBlock_ = t.rows / AscendC::GetBlockNum();
    const uint64_t first = static_cast<uint64_t>(rowsPerBlock_) * AscendC::GetBlockIdx() * cols_;
    xGm_.SetGlobalBuffer((__gm__ half*)x + first, rowsPerBlock_ * cols_);
    yGm_.SetGlobalBuffer((__gm__ half*)y + first, rowsPerBlock_ * cols_);
    pipe_.InitBuffer(inQueue_, kBufferNum, cols_ * sizeof(half));
    pipe_.InitBuffer(outQueue_, kBufferNum, cols_ * sizeof(half));
    pipe_.InitBuffer(rowBuf_, cols_ * sizeof(float));
    pipe_.InitBuffer(workBuf_, cols_ * sizeof(float));
    pipe_.InitBuffer(scalarBuf_, 32);
  }
  __aicore__ inline void Process() {
    for (uint32_t r = 0; r < rowsPerBlock_; r++) {
      CopyIn(r);
      Compute();
      CopyOut(r);
    }
  }

 private:
  __aicore__ inline void CopyIn(uint32_t r) {
    AscendC::LocalTensor<half> x = inQueue_.AllocTensor<half>();
    AscendC::DataCopy(x, xGm_[static_cast<uint64_t>(r) * cols_], cols_);
    inQueue_.EnQue(x);
  }
  // Reads the value a vector instruction left in scalarBuf_[0], once the Vector pipe has written it.
  __aicore__ inline float ScalarResult() {
    AscendC::SetFlag<AscendC::HardEvent::V_S>(EVENT_ID0);
    AscendC::WaitFlag<AscendC::HardEvent::V_S>(EVENT_ID0);
    return scalarBuf_.Get<float>().GetValue(0);
  }
  __aicore__ inline void Compute() {
    AscendC::LocalTensor<half> x = inQueue_.DeQue<half>();
    AscendC::LocalTensor<float> row = rowBuf_.Get<float>();
    AscendC::LocalTensor<float> work = workBuf_.Get<float>();
    AscendC::LocalTensor<float> s = scalarBuf_.Get<float>();
    AscendC::Cast(row, x, AscendC::RoundMode::CAST_NONE, cols_);
    inQueue_.FreeTensor(x);
    AscendC::ReduceMax(s, row, work, cols_);
    const float max = ScalarResult();
    AscendC::Adds(row, row, -max, cols_);
    AscendC::Exp(row, row, cols_);
    AscendC::ReduceSum(s, row, work, cols_);
    const float sum = ScalarResult();
    AscendC::Muls(row, row, 1.0f / sum, cols_);
    AscendC::LocalTensor<half> y = outQueue_.AllocTensor<half>();
    AscendC::Cast(y, row, AscendC::RoundMode::CAST_RINT, cols_);
    outQueue_.EnQue(y);
  }
  __aicore__ inline void CopyOut(uint32_t r) {
    AscendC::LocalTensor<half> y = outQueue_.DeQue<half>();
    AscendC::DataCopy(yGm_[static_cast<uint64_t>(r) * cols_], y, cols_);
    outQueue_.FreeTensor(y);
  }

  AscendC::TPipe pipe_;
  AscendC::TQue<AscendC::TPosition::VECIN, kBufferNum> inQueue_;
  AscendC::TQue<AscendC::TPosition::VECOUT, kBufferNum> outQueue_;
  AscendC::TBuf<AscendC::TPosition::VECCALC> rowBuf_, workBuf_, scalarBuf_;
  AscendC::GlobalTensor<half> xGm_, yGm_;
  uint32_t cols_ = 0, rowsPerBlock_ = 0;
};

extern "C" __global__ __aicore__ void softmax_custom(GM_ADDR x, GM_ADDR y, GM_ADDR tiling) {
  const SoftmaxTiling t = *reinterpret_cast<__gm__ SoftmaxTiling*>(tiling);  // read on the scalar unit
  KernelSoftmax op;
  op.Init(x, y, t);
  op.Process();
}
