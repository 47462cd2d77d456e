// MatMul and BatchMatMul: C[b] = act(op(A[b]) op(B[b]) + bias), fp16/bf16 in, fp32 accumulation, output in the
// input dtype. The production data path of a Da Vinci cube core:
//   GM -(MTE2, ND->NZ)-> L1 (A1/B1 queues, two buffers, step_k columns of K each)
//      -(MTE1, LoadData, transposing where the layout needs it)-> L0A/L0B (A2/B2 queues, two buffers, base_k)
//      -(Cube, Mmad accumulating over K)-> L0C (CO1 queue, one or two buffers)
//      -(FixPipe, NZ->ND, fp32->T, optional ReLU)-> GM.
// The output is cut into base_m x base_n tiles spread over the cube cores round-robin, row-major so that cores
// running at the same time share rows of A and columns of B in the L2. A bias goes GM -> L1 -> bias table (fp32)
// and seeds the first Mmad of each tile. GELU (and a bias on a chip without a bias table) is a vector epilogue:
// on split chips the two AIV of the cube core's group take half the rows of each finished tile each (a mix kernel;
// the tile's arrival is a cross-core flag), on coupled chips the same core runs it after the FixPipe.
// The pieces: this header (shape, tiling, buffer plans), tiling.cpp (plan_tiling, matmul_buffers), kernel.cpp (the
// cube side and the vector epilogue), matmul.cpp (the op: text form, operands, plan, reference).
#pragma once

#include <cstdint>

#include "stack/ops/kernel_util.hpp"
#include "stack/ops/op.hpp"

namespace npusim::stack::ops::matmul {

using hw::isa::DType;

struct MatmulShape {
  std::uint32_t batch = 1, M = 0, N = 0, K = 0;
  bool trans_a = false, trans_b = false, bias = false;
  Activation act = Activation::kNone;
};

struct MatmulTiling {
  std::uint32_t base_m = 0, base_n = 0, base_k = 0, step_k = 0, l0c_buffers = 1;
  std::uint32_t tiles_m = 0, tiles_n = 0, block_dim = 1;
  std::uint32_t group_m = 1;     // tile rows per group of the tile order (see tile_at)
  bool serpentine = false;       // odd groups sweep the tile columns backwards (see tile_at)
  bool bias_table = false;       // the bias seeds the Mmad through the bias table
  bool vector_epilogue = false;  // activation (and a bias without a bias table) on the vector unit
  std::uint32_t epi_rows = 0;    // rows per vector-epilogue chunk
};

struct MatmulArgs {
  GM_ADDR a = 0, b = 0, bias = 0, c = 0;
  MatmulShape s;
  MatmulTiling t;
  bool split = true;  // split chip: the vector epilogue runs on the AIV
};

// The buffers the matmul kernels allocate for a tiling, one plan per space: L1 "a1", "b1" (double-buffered steps)
// and "bias"; L0A "a2"; L0B "b2"; L0C "c"; the bias table "bt"; and the vector epilogue's UB ("in", "out", "x", "a",
// "b", "c", "bias", "bias_t"). The tiling checks each plan against its buffer; the kernels allocate from them.
struct MatmulBuffers {
  BufferPlan l1, l0a, l0b, l0c, bias_table, ub;
};
MatmulBuffers matmul_buffers(const MatmulShape& s, const MatmulTiling& t, std::uint64_t es);

// The tile shape that minimises the estimated time, among those whose buffer plans fit the chip (tiling.cpp).
MatmulTiling plan_tiling(const MatmulShape& s, std::uint64_t es, const config::ChipConfig& chip);

// The kernel of a call on every core kind (kernel.cpp), T = half or bfloat16_t.
template <class T>
void matmul_kernel(const MatmulArgs& g);

}  // namespace npusim::stack::ops::matmul
