// The typed calls of the operator library: what each op takes besides its operands (the operands' shapes and
// dtypes come as TensorDescs). The graph engine's lowering builds these directly from a node's attributes; the
// CLI's `-p KEY=VALUE` text and the Python keyword arguments are parsed into them once, by the op's `parse`
// (ops::parse_call). An op's plan, kernel and reference read only the typed call.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "hw/isa/dtype.hpp"

namespace npusim::stack::ops {

using Shape = std::vector<std::uint64_t>;

// The operands say everything: elementwise add/sub/mul/div, the unary functions, swiglu, rope_interleaved.
struct Operands {
  static constexpr const char* kName = "Operands";
};

struct CastCall {
  static constexpr const char* kName = "CastCall";
  hw::isa::DType to = hw::isa::DType::kFp32;
};

// The activation a MatMul applies to its result (in the FixPipe for ReLU, on the vector unit otherwise).
enum class MatMulAct : std::uint8_t { kNone, kRelu, kGelu, kGeluTanh };

// C = act(op(A) op(B) + bias): the operands are A, B and (bias) a length-N vector; op() transposes when asked.
struct MatMulCall {
  static constexpr const char* kName = "MatMulCall";
  bool trans_a = false, trans_b = false;
  bool bias = false;  // a third operand
  MatMulAct act = MatMulAct::kNone;
};

// A 2-D convolution on the formats the Cube takes (docs/ops.md, "Conv2D"): x in NC1HWC0, the weights in FRACTAL_Z
// with groups packed per 16-channel block, the output in NC1HWC0; the bias and ReLU applied in the FixPipe.
// Pads in ONNX's order: top, left, bottom, right.
struct Conv2dCall {
  static constexpr const char* kName = "Conv2dCall";
  std::uint32_t cin = 0, cout = 0;  // channels (x's real channels; its planes are ceil(cin / 16))
  std::uint32_t kh = 1, kw = 1, sh = 1, sw = 1, dh = 1, dw = 1;
  std::uint32_t pad_top = 0, pad_left = 0, pad_bottom = 0, pad_right = 0;
  std::uint32_t groups = 1;
  bool bias = false, relu = false;
};

// 2-D pooling windows (max_pool, avg_pool on NC1HWC0); pads in ONNX's order: top, left, bottom, right.
struct PoolCall {
  static constexpr const char* kName = "PoolCall";
  std::uint32_t kh = 2, kw = 2, sh = 1, sw = 1, dh = 1, dw = 1;
  std::uint32_t pad_top = 0, pad_left = 0, pad_bottom = 0, pad_right = 0;
  bool count_include_pad = false;  // avg_pool: divide by the whole window, padding included
};

enum class ResizeCoord : std::uint8_t { kHalfPixel, kPytorchHalfPixel, kAlignCorners, kAsymmetric };
enum class ResizeNearest : std::uint8_t { kRoundPreferFloor, kRoundPreferCeil, kFloor, kCeil };

// Nearest or bilinear resizing of the last two dims to out_h x out_w, with ONNX Resize's coordinate transformation
// and nearest rounding; the scales when the model gives them (0: out / in).
struct ResizeCall {
  static constexpr const char* kName = "ResizeCall";
  std::uint32_t out_h = 0, out_w = 0;
  bool linear = false;
  ResizeCoord coord = ResizeCoord::kHalfPixel;
  ResizeNearest nearest = ResizeNearest::kRoundPreferFloor;
  double scale_h = 0, scale_w = 0;
};

// NCHW <-> NC1HWC0: to_5hd pads the channels to whole planes of 16 with 0; the other way keeps `channels`.
struct TransDataCall {
  static constexpr const char* kName = "TransDataCall";
  bool to_5hd = true;
  std::uint32_t channels = 0;  // to NCHW: the real channels
};

// Where a tensor's rows are, in elements: element (b, n, s, d) sits at offset + b*batch + n*head + s*row + d.
struct AttentionStrides {
  std::uint64_t batch = 0, head = 0, row = 0, offset = 0;
};

enum class AttentionLayout : std::uint8_t { kBnsd, kBsnd };

// O = softmax(scale Q K^T + mask) V over B batches, N query heads grouped over KVN key/value heads, S query rows,
// SK keys, head size D. Q, K, V and O follow `layout` unless a tensor has explicit strides (the graph engine's
// fused attention reads a head's rows inside a QKV projection, and writes O into the next MatMul's input).
struct FlashAttentionCall {
  static constexpr const char* kName = "FlashAttentionCall";
  std::uint32_t B = 0, N = 0, S = 0, D = 0;
  std::uint32_t KVN = 0, SK = 0;  // 0: N and S
  bool causal = false;
  bool mask = false;  // a fourth operand added to the scores, [MB, MN, MS, SK]
  // MB, MN, MS: each 1 (shared) or B, N, S; unset: one S x SK table.
  std::optional<std::vector<std::uint32_t>> mask_shape;
  std::optional<double> scale;  // unset: 1 / sqrt(D)
  AttentionLayout layout = AttentionLayout::kBnsd;
  std::optional<AttentionStrides> q, k, v, o;
};

// Decoding attention over a paged key/value cache (vLLM's paged attention, Ascend's IncreFlashAttention): per
// sequence b, S new query rows [B, S, N, D] against the first lens[b] rows of a cache of `pages` pages of `page`
// rows [pages, page, KVN, D], whose pages a block table [B, ceil(max lens / page)] (int32) lists in order. With
// S > 1 the new rows are the cache's last: row i sees keys j <= i + lens[b] - S.
struct PagedAttentionCall {
  static constexpr const char* kName = "PagedAttentionCall";
  std::uint32_t B = 0, N = 0, KVN = 0, S = 1, D = 0;
  std::vector<std::uint32_t> lens;  // keys of each sequence (host-side, as IncreFlashAttention's actual_seq_lengths)
  std::uint32_t page = 128;         // rows per page
  std::uint32_t pages = 0;          // pages of the cache; 0: B x table_cols
  std::uint32_t table_cols = 0;     // entries per row of the block table; 0: ceil(max lens / page)
  std::optional<double> scale;      // unset: 1 / sqrt(D)
  std::uint32_t splits = 0;         // key ranges per head (split-K, combined in the kernel); 0: chosen by the tiling
};

// softmax, log_softmax over the last dimension.
struct SoftmaxCall {
  static constexpr const char* kName = "SoftmaxCall";
  std::uint32_t chunk = 0;  // columns per chunk of a long row (a multiple of 64); 0: chosen by the tiling
};

// layernorm, add_layernorm, rmsnorm over the last dimension.
struct NormCall {
  static constexpr const char* kName = "NormCall";
  double eps = 1e-5;
  bool stats = false;  // layernorm, add_layernorm: also the rows' mean and rstd (fp32)
  bool sum = true;     // add_layernorm: also write x + residual
  std::uint32_t chunk = 0;
};

enum class RopeLayout : std::uint8_t { kBnsd, kBsnd };

// rope: x is ... x S x D (kBnsd) or ... x S x N x D (kBsnd, the heads of a position share its cos/sin row).
struct RopeCall {
  static constexpr const char* kName = "RopeCall";
  RopeLayout layout = RopeLayout::kBnsd;
};

// reduce_sum, reduce_mean, reduce_max along one axis (negative: from the end), which the output drops.
struct ReduceCall {
  static constexpr const char* kName = "ReduceCall";
  std::int64_t axis = -1;
};

// cumsum along `axis` (negative: from the end), inclusive unless `exclusive`, from the end when `reverse`.
struct CumSumCall {
  static constexpr const char* kName = "CumSumCall";
  std::int64_t axis = -1;
  bool exclusive = false, reverse = false;
};

// Output dim k is input dim perm[k]; empty: swap the last two.
struct TransposeCall {
  static constexpr const char* kName = "TransposeCall";
  std::vector<std::size_t> perm;
};

// Per leading dim [start, end) with a positive step; out-of-range bounds clamp as ONNX's Slice does.
struct SliceCall {
  static constexpr const char* kName = "SliceCall";
  std::vector<std::int64_t> starts, ends, steps;  // steps empty: all 1
};

struct ConcatCall {
  static constexpr const char* kName = "ConcatCall";
  std::int64_t axis = 0;
};

struct SplitCall {
  static constexpr const char* kName = "SplitCall";
  std::int64_t axis = 0;
  std::vector<std::int64_t> sizes;
};

// numpy broadcasting of the operand to `to`.
struct ExpandCall {
  static constexpr const char* kName = "ExpandCall";
  Shape to;
};

// One expression over up to 8 operands x0..x7 (each of the output's shape or its trailing dims), e.g.
// "mul(silu(x0),x1)"; docs/ops.md lists the functions.
struct FusedElementwiseCall {
  static constexpr const char* kName = "FusedElementwiseCall";
  std::string expr;
  Shape shape;  // the output's
  std::optional<hw::isa::DType> to;  // the output's element type (none: the first float input's, else input 0's)
};

using Call =
    std::variant<Operands, CastCall, MatMulCall, Conv2dCall, PoolCall, ResizeCall, TransDataCall, FlashAttentionCall,
                 PagedAttentionCall, SoftmaxCall, NormCall, RopeCall, ReduceCall, CumSumCall, TransposeCall, SliceCall,
                 ConcatCall, SplitCall, ExpandCall, FusedElementwiseCall>;

// The alternative's name ("NormCall"), for errors.
const char* call_name(const Call& c);

}  // namespace npusim::stack::ops
