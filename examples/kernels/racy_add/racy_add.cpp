// A deliberately racy kernel: z = x + y with hand-written flags, one of them forgotten. The inputs are waited for
// (MTE2 -> V), but the copy-out does not wait for the add (V -> MTE3 is missing), so MTE3 may read the result
// before the Vector unit has written it. `npusim kernel racy_add.cpp --sanitize ...` reports the race with both
// source lines; without --sanitize the run may even give the right answer, as on hardware now and then.
#include "kernel_operator.h"

extern "C" __global__ __aicore__ void racy_add(GM_ADDR x, GM_ADDR y, GM_ADDR z, uint32_t n) {
  AscendC::GlobalTensor<float> xGm, yGm, zGm;
  xGm.SetGlobalBuffer((__gm__ float*)x, n);
  yGm.SetGlobalBuffer((__gm__ float*)y, n);
  zGm.SetGlobalBuffer((__gm__ float*)z, n);
  AscendC::TPipe pipe;
  AscendC::TBuf<AscendC::TPosition::VECCALC> xBuf, yBuf, zBuf;
  pipe.InitBuffer(xBuf, n * sizeof(float));
  pipe.InitBuffer(yBuf, n * sizeof(float));
  pipe.InitBuffer(zBuf, n * sizeof(float));
  AscendC::LocalTensor<float> xl = xBuf.Get<float>(), yl = yBuf.Get<float>(), zl = zBuf.Get<float>();

  AscendC::DataCopy(xl, xGm, n);
  AscendC::DataCopy(yl, yGm, n);
  AscendC::SetFlag<AscendC::HardEvent::MTE2_V>(EVENT_ID0);
  AscendC::WaitFlag<AscendC::HardEvent::MTE2_V>(EVENT_ID0);
  AscendC::Add(zl, xl, yl, n);
  // Missing: SetFlag<HardEvent::V_MTE3>(EVENT_ID0); WaitFlag<HardEvent::V_MTE3>(EVENT_ID0);
  AscendC::DataCopy(zGm, zl, n);
}
