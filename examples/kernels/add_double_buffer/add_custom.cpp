// z = x + y in fp16, split over the blocks and streamed through double-buffered VECIN/VECOUT queues: the usual
// first Ascend C kernel, written against kernel_operator.h as for the real toolchain. The host fills a tiling
// struct (totalLength elements, tileNum tiles per block) and passes its address as the last argument.
#include "kernel_operator.h"

#ifndef BUFFER_NUM
#define BUFFER_NUM 2  // buffers per queue: 2 overlaps the copies with the adds
#endif

struct AddTiling {
  uint32_t totalLength;
  uint32_t tileNum;
};

class KernelAdd {
 public:
  __aicore__ inline KernelAdd() {}
  __aicore__ inline void Init(GM_ADDR x, GM_ADDR y, GM_ADDR z, uint32_t totalLength, uint32_t tileNum) {
    blockLength_ = totalLength / AscendC::GetBlockNum();
    tileNum_ = tileNum;
    tileLength_ = blockLength_ / tileNum / BUFFER_NUM;
    const uint32_t offset = blockLength_ * AscendC::GetBlockIdx();
    xGm_.SetGlobalBuffer((__gm__ half*)x + offset, blockLength_);
    yGm_.SetGlobalBuffer((__gm__ half*)y + offset, blockLength_);
    zGm_.SetGlobalBuffer((__gm__ half*)z + offset, blockLength_);
    pipe_.InitBuffer(inQueueX_, BUFFER_NUM, tileLength_ * sizeof(half));
    pipe_.InitBuffer(inQueueY_, BUFFER_NUM, tileLength_ * sizeof(half));
    pipe_.InitBuffer(outQueueZ_, BUFFER_NUM, tileLength_ * sizeof(half));
  }
  __aicore__ inline void Process() {
    const uint32_t loops = tileNum_ * BUFFER_NUM;
    for (uint32_t i = 0; i < loops; i++) {
      CopyIn(i);
      Compute();
      CopyOut(i);
    }
  }

 private:
  __aicore__ inline void CopyIn(uint32_t progress) {
    AscendC::LocalTensor<half> xLocal = inQueueX_.AllocTensor<half>();
    AscendC::LocalTensor<half> yLocal = inQueueY_.AllocTensor<half>();
    AscendC::DataCopy(xLocal, xGm_[progress * tileLength_], tileLength_);
    AscendC::DataCopy(yLocal, yGm_[progress * tileLength_], tileLength_);
    inQueueX_.EnQue(xLocal);
    inQueueY_.EnQue(yLocal);
  }
  __aicore__ inline void Compute() {
    AscendC::LocalTensor<half> xLocal = inQueueX_.DeQue<half>();
    AscendC::LocalTensor<half> yLocal = inQueueY_.DeQue<half>();
    AscendC::LocalTensor<half> zLocal = outQueueZ_.AllocTensor<half>();
    AscendC::Add(zLocal, xLocal, yLocal, tileLength_);
    outQueueZ_.EnQue<half>(zLocal);
    inQueueX_.FreeTensor(xLocal);
    inQueueY_.FreeTensor(yLocal);
  }
  __aicore__ inline void CopyOut(uint32_t progress) {
    AscendC::LocalTensor<half> zLocal = outQueueZ_.DeQue<half>();
    AscendC::DataCopy(zGm_[progress * tileLength_], zLocal, tileLength_);
    outQueueZ_.FreeTensor(zLocal);
  }

  AscendC::TPipe pipe_;
  AscendC::TQue<AscendC::TPosition::VECIN, BUFFER_NUM> inQueueX_, inQueueY_;
  AscendC::TQue<AscendC::TPosition::VECOUT, BUFFER_NUM> outQueueZ_;
  AscendC::GlobalTensor<half> xGm_, yGm_, zGm_;
  uint32_t blockLength_ = 0, tileNum_ = 0, tileLength_ = 0;
};

// The tiling struct is read on the scalar unit straight from GM, as kernels do on the hardware.
__aicore__ inline void CopyTiling(AddTiling* tiling, GM_ADDR tilingGm) {
  uint32_t* dst = reinterpret_cast<uint32_t*>(tiling);
  auto src = reinterpret_cast<__gm__ uint32_t*>(tilingGm);
  for (uint32_t i = 0; i < sizeof(AddTiling) / sizeof(uint32_t); i++) dst[i] = src[i];
}

extern "C" __global__ __aicore__ void add_custom(GM_ADDR x, GM_ADDR y, GM_ADDR z, GM_ADDR tiling) {
  AddTiling t;
  CopyTiling(&t, tiling);
  KernelAdd op;
  op.Init(x, y, z, t.totalLength, t.tileNum);
  op.Process();
}
