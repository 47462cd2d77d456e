// The row ops' host side: the tiling (row_tiling.cpp), the CPU references (one per op family, beside its device
// steps) and the op definitions (row_op.cpp).
#pragma once

#include <cstdint>
#include <string>

#include "common/config/chip_config.hpp"
#include "stack/ops/op.hpp"
#include "stack/ops/rows/row_kernel.hpp"

namespace npusim::stack::ops::rows {

// What the tiling needs to know of a call.
struct RowProblem {
  RowKind kind = RowKind::kSoftmax;
  std::uint64_t rows = 0, h = 0;  // rows of h elements
  std::uint64_t heads = 1;        // consecutive rows that must share a tile (RoPE in BSND)
  std::uint64_t es = 2;           // element bytes
  bool add = false, stats = false;
  std::uint64_t chunk = 0;  // columns per chunk asked for (0: chosen)
};

// Rows per core and per tile on the short path; or, with chunk > 0, whole rows per core streamed in chunks.
struct RowTiling {
  std::uint64_t per_block = 0, tile = 0, chunk = 0;
};

// The tiling for `chip`'s UB and vector cores: the most rows per tile (at most 255) whose buffers, as row_layout
// plans them and the kernel allocates them, fit the UB. Throws InputError naming `op` when a row (or a position's
// heads) cannot fit, or a chunk asked for is not a multiple of 64, is over 16320 or does not fit.
RowTiling plan_rows(const RowProblem& p, const config::ChipConfig& chip, const std::string& op);

// CPU references, row by row in double, rounded once to float.
void softmax_reference(const float* x, float* y, std::uint64_t h, bool log);  // softmax.cpp
struct NormStats {
  float mean = 0, rstd = 0;
};
// LayerNorm when beta is given, else RMSNorm.
NormStats norm_reference(const float* x, const float* gamma, const float* beta, float* y, std::uint64_t h,
                         double eps);                               // norms.cpp
void swiglu_reference(const float* x, float* y, std::uint64_t ho);  // swiglu.cpp
void rope_reference(const float* x, const float* cs, const float* sn, float* y, std::uint64_t h,
                    bool half);  // rope.cpp

// The library's row ops (softmax, log_softmax, layernorm, add_layernorm, rmsnorm, swiglu, rope, rope_interleaved).
std::vector<OpDef> row_ops();

}  // namespace npusim::stack::ops::rows
