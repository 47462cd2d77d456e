// C = relu(A B), a mix kernel: in each block the cube core (AIC) computes a baseM x baseN tile of A B into a GM
// workspace (matmul_tile.h) and tells its two vector cores (AIV) with a cross-core flag; each AIV waits for it,
// takes half of the tile's rows, applies ReLU on the Vector unit and writes them to C. Launch on a split chip
// (910b) with --type mix and --block-dim (M / baseM) x (N / baseN).
#include "../matmul_cube/matmul_tile.h"

constexpr uint16_t kTileReady = 1;

__aicore__ inline void ReluRows(GM_ADDR workspace, GM_ADDR c, const MatmulTiling& t) {
  // Each AIV has its own index (block x 2 + sub-block): the tile is its AIC's.
  const uint32_t tileIdx = AscendC::GetBlockIdx() / AscendC::GetTaskRation();
  const uint32_t tilesN = t.N / t.baseN;
  const uint32_t mi = tileIdx / tilesN, ni = tileIdx % tilesN;
  const uint32_t rows = t.baseM / AscendC::GetSubBlockNum();
  const uint64_t first = (static_cast<uint64_t>(mi) * t.baseM + AscendC::GetSubBlockIdx() * rows) * t.N + ni * t.baseN;
  AscendC::GlobalTensor<half> wsGm, cGm;
  wsGm.SetGlobalBuffer((__gm__ half*)workspace + first, static_cast<uint64_t>(rows - 1) * t.N + t.baseN);
  cGm.SetGlobalBuffer((__gm__ half*)c + first, static_cast<uint64_t>(rows - 1) * t.N + t.baseN);
  AscendC::TPipe pipe;
  AscendC::TBuf<AscendC::TPosition::VECCALC> buf;
  pipe.InitBuffer(buf, rows * t.baseN * sizeof(half));
  AscendC::LocalTensor<half> tile = buf.Get<half>();
  // rows bursts of baseN elements, N apart in GM and contiguous in UB (strides in 32 B blocks).
  const uint16_t burst = static_cast<uint16_t>(t.baseN * sizeof(half) / 32);
  const uint16_t gap = static_cast<uint16_t>((t.N - t.baseN) * sizeof(half) / 32);
  AscendC::DataCopy(tile, wsGm, AscendC::DataCopyParams{static_cast<uint16_t>(rows), burst, gap, 0});
  AscendC::SetFlag<AscendC::HardEvent::MTE2_V>(EVENT_ID0);
  AscendC::WaitFlag<AscendC::HardEvent::MTE2_V>(EVENT_ID0);
  AscendC::Relu(tile, tile, rows * t.baseN);
  AscendC::SetFlag<AscendC::HardEvent::V_MTE3>(EVENT_ID0);
  AscendC::WaitFlag<AscendC::HardEvent::V_MTE3>(EVENT_ID0);
  AscendC::DataCopy(cGm, tile, AscendC::DataCopyParams{static_cast<uint16_t>(rows), burst, 0, gap});
}

extern "C" __global__ __aicore__ void matmul_relu_custom(GM_ADDR a, GM_ADDR b, GM_ADDR c, GM_ADDR workspace,
                                                         GM_ADDR tiling) {
  const MatmulTiling t = *reinterpret_cast<__gm__ MatmulTiling*>(tiling);
  if ASCEND_IS_AIC {
    KernelMatmul op;
    op.Init(a, b, workspace, t);
    op.Process();
    // Once the FixPipe has written the tile, each AIV of this core's group gets +1 on kTileReady (mode 2).
    AscendC::CrossCoreSetFlag<2, PIPE_FIX>(kTileReady);
  }
  if ASCEND_IS_AIV {
    AscendC::CrossCoreWaitFlag(kTileReady);
    ReluRows(workspace, c, t);
  }
}
