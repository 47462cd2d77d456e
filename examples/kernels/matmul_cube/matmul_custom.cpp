// C (M x N, fp16) = A (M x K) B (K x N) on the cube path, one baseM x baseN tile of C per block
// (matmul_tile.h). Launch with --type cube and --block-dim (M / baseM) x (N / baseN).
#include "matmul_tile.h"

extern "C" __global__ __aicore__ void matmul_custom(GM_ADDR a, GM_ADDR b, GM_ADDR c, GM_ADDR tiling) {
  const MatmulTiling t = *reinterpret_cast<__gm__ MatmulTiling*>(tiling);
  KernelMatmul op;
  op.Init(a, b, c, t);
  op.Process();
}
