// The row ops (softmax, log-softmax, LayerNorm and AddLayerNorm, RMSNorm, SwiGLU, RoPE in its half and interleaved
// forms) share one device pipeline: the rows are split evenly over the vector cores; each core streams tiles of rows
// through double-buffered VECIN/VECOUT queues, computing in fp32 on the row math of stack/ops/row_math.hpp. The rows
// per tile follow from the UB size and the row length (row_tiling.hpp), so a smaller UB gives smaller tiles. Rows
// too long for the UB take the chunked two-pass path (long_rows.cpp).
//
// This header declares the pipeline (row_kernel.cpp) and the per-op steps it calls on each tile, defined one file
// per op family: softmax.cpp, norms.cpp, swiglu.cpp, rope.cpp.
#pragma once

#include <cstdint>

#include "stack/ops/buffer_plan.hpp"
#include "stack/ops/row_math.hpp"

namespace npusim::stack::ops::rows {

enum class RowKind { kSoftmax, kLogSoftmax, kLayerNorm, kRmsNorm, kSwiGlu, kRopeHalf, kRopeInterleaved };

// Kinds that reduce each row (max, sums): they need reduction scratch and may stream long rows in chunks.
constexpr bool reduces_rows(RowKind k) {
  return k != RowKind::kSwiGlu && k != RowKind::kRopeHalf && k != RowKind::kRopeInterleaved;
}
constexpr bool is_norm(RowKind k) {
  return k == RowKind::kLayerNorm || k == RowKind::kRmsNorm;
}
constexpr bool is_rope(RowKind k) {
  return k == RowKind::kRopeHalf || k == RowKind::kRopeInterleaved;
}
// Kinds whose input rows are loaded as two halves (SwiGLU's a and b, half RoPE's x1 and x2).
constexpr bool loads_halves(RowKind k) {
  return k == RowKind::kSwiGlu || k == RowKind::kRopeHalf;
}

// A short-path tile of `tile` rows: its geometry and the UB buffers RowKernel allocates for it, in allocation order
// (queues "in", "out", "sum", "tables"; fp32 rows "x", "t", "x2", "c", "s", "c2", "s2"; 16-bit norm statistics
// "sq", "pt", "pt2", "pf", "pf2"; reduction partials "part"; per-row scalars "v" and their broadcasts "bc"; the
// norms' "gamma", "beta"; interleaved RoPE's "off", "sign"). The tiling checks `buffers.total` against the UB and
// RowKernel allocates `buffers` and addresses by the geometry: one computation for both (row_tiling.cpp).
struct RowLayout {
  std::uint64_t tile = 0, len = 0;              // rows per tile; elements of a row each fp32 buffer holds
  std::uint64_t fs = 0, ts = 0, tsi = 0;        // row strides in elements: fp32, T, T of the input (16-bit norms: 128s)
  std::uint64_t piece = 0, in_piece = 0;        // elements of a tile's T rows, of its input rows
  std::uint64_t out_bytes = 0, stat_bytes = 0;  // the output rows' bytes in "out"; the mean (or rstd) block's
  std::uint64_t k16 = 0, p16 = 0;               // 16-bit norms: 128-lane pieces per row and their partials' stride
  std::uint64_t part_stride = 0, vec = 0;       // reduction partials per row; rows rounded to 8 (the scalars' stride)
  BufferPlan buffers;
};
RowLayout row_layout(RowKind kind, std::uint64_t h, std::uint64_t es, bool add, bool stats, std::uint64_t tile);

// The chunked path's buffers for chunks of c columns (queues "in", "par", "out", "sum", "stat"; "x", "t", "part",
// "v", "bc"), in allocation order.
BufferPlan long_row_buffers(RowKind kind, std::uint64_t c, std::uint64_t es, bool add, bool stats);

struct RowArgs {
  RowKind kind = RowKind::kSoftmax;
  GM_ADDR x = 0, p1 = 0, p2 = 0, out = 0;  // p1, p2: gamma and beta, or cos and sin
  // LayerNorm: a residual added to x first (AddLayerNorm), the sum written out, the row mean and rstd (fp32) written.
  GM_ADDR res = 0, sum = 0, mean = 0, rstd = 0;
  bool add = false, stats = false;
  std::uint64_t rows = 0, h = 0;          // rows of h elements in, each giving ho elements out
  std::uint64_t ho = 0, seq = 0;          // rope: rows are positions modulo seq
  std::uint64_t heads = 1;                // rope: consecutive rows sharing a position (the BSND layout)
  std::uint64_t per_block = 0, tile = 0;  // rows per core and per tile
  std::uint64_t chunk = 0;                // columns per chunk of a row too long for the UB (long_rows.cpp)
  float eps = 1e-5f;
};

// The short path on one core: its rows in tiles of a.tile rows.
template <class T>
class RowKernel {
 public:
  explicit RowKernel(const RowArgs& a, std::uint64_t first);  // the UB buffers and per-core constants
  void run();

 private:
  // One tile of nr rows from row0: load, convert, the op's steps, convert back, store.
  void tile(std::uint64_t row0, std::uint64_t nr);

  // The ops' steps on the tile's fp32 rows X (and X2, the second halves).
  void subtract_row_max(std::uint64_t nr);  // softmax.cpp: x - max(x), the pads at the lowest float
  void softmax(std::uint64_t nr);                                 // softmax.cpp
  void log_softmax(std::uint64_t nr);                             // softmax.cpp
  void norm_setup();                                              // norms.cpp: gamma, beta per core
  void norm_stats16(const LocalTensor<T>& in, std::uint64_t nr);  // norms.cpp
  void norm(std::uint64_t nr, const LocalTensor<float>& mean_out, const LocalTensor<float>& rstd_out);  // norms.cpp
  void norm_affine(const LocalTensor<T>& out, std::uint64_t nr);                                        // norms.cpp
  void swiglu(std::uint64_t nr);                                                                        // swiglu.cpp
  void rope_setup();                                                                                    // rope.cpp
  void rope_tables_in(std::uint64_t pos, std::uint64_t npos);                                           // rope.cpp
  void rope_half(std::uint64_t nr, std::uint64_t npos);                                                 // rope.cpp
  void rope_interleaved(std::uint64_t nr);                                                              // rope.cpp

  const RowArgs& a_;
  std::uint64_t first_ = 0, count_ = 0;
  RowLayout layout_;  // the tile's geometry and buffers, as the tiling planned them
  static constexpr std::uint64_t kEs = sizeof(T);
  std::uint64_t tr_ = 0, len_ = 0, fs_ = 0, ts_ = 0, tsi_ = 0;  // rows per tile; row length; fp32, T, T-in strides
  std::uint64_t piece_ = 0, in_piece_ = 0, res_at_ = 0, out_t_ = 0, stat_bytes_ = 0, k16_ = 0, p16_ = 0;
  bool rope_ = false, halves_ = false, stats16_ = false;
  float inv_h_ = 0;
  TPipe pipe_;
  TQue<TPosition::VECIN, 2> qin_;
  TQue<TPosition::VECOUT, 2> qout_;
  TQue<TPosition::VECIN, 1> qcs_;
  TQue<TPosition::VECOUT, 1> qsum_;
  TBuf<TPosition::VECCALC> fx_, fx2_, ft_, fc_, fsin_, fc2_, fs2_, fpart_, fv_, fbc_, fp1_, fp2_, foff_, fsign_;
  TBuf<TPosition::VECCALC> fsq_, fpt_, fpt2_, fpf_, fpf2_;
  ReduceScratch rs_;
  LocalTensor<float> v0_, v1_, v2_, bc_, bc2_;  // per-row scalars and their Brcb blocks
  F32Rows x_, x2_, tm_;                         // the rows, their second halves, a temporary
  LocalTensor<T> gamma_, beta_;
};

template <class T>
void row_kernel(const RowArgs& a);
// Rows too long for the UB: whole rows per core, each streamed through twice in chunks of a.chunk columns.
template <class T>
void long_row_kernel(const RowArgs& a);

}  // namespace npusim::stack::ops::rows
