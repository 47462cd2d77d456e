// The instructions an AI core executes: their operands, the pipe each one runs on, and the buffers it touches.
// Semantics live in semantics.cpp (functional mode); costs in hw/core/cost_model (timing). An instruction is a
// plain value built by the kernel API (firmware/kernel) and issued by the scalar unit into its pipe's queue.
//
// Address units: every address and stride here is in bytes, already scaled from the API's 32 B-block or element
// units, so the semantics and the footprint checks share one convention.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

#include "hw/isa/dtype.hpp"

namespace npusim::hw::isa {

// The pipes of an AI core (DESIGN.md, "The AI core"). kAll is only a pipe_barrier target.
enum class Pipe : std::uint8_t { kS, kMte1, kMte2, kMte3, kM, kV, kFix, kAll };
constexpr int kPipeCount = 7;  // excluding kAll
std::string_view pipe_name(Pipe p);        // "S", "MTE1", ... (hardware names, used in errors)
std::string_view pipe_metric_name(Pipe p);  // "scalar", "mte1", "cube", "vector", "fixpipe" (--json keys)

// Address spaces. GM is device memory; the others are per-core buffers.
enum class Space : std::uint8_t { kGm, kL1, kL0A, kL0B, kL0C, kUb, kBiasTable, kFixpipeBuffer };
constexpr int kSpaceCount = 8;
std::string_view space_name(Space s);

enum class Op : std::uint8_t {
  // MTE2 / MTE3 / MTE1 copies
  kCopy,       // bursts of whole 32 B blocks between two spaces (GM<->UB, GM->L1, L1->UB, UB->L1, UB->UB)
  kCopyPad,    // byte-granular bursts GM->UB (padded to 32 B in UB) or UB->GM
  kCopyNd2Nz,  // GM ND matrix -> L1 NZ fractals
  kLoad2d,     // L1 -> L0A/L0B fractal load, optional 16x16 transpose
  kLoad3d,     // L1 feature map (NC1HWC0) -> L0A, img2col on the fly (Img2colArgs)
  kLoadBias,   // L1 (fp16/bf16/fp32) -> bias table (fp32), copy.cols elements
  // Cube
  kMmad,
  // FixPipe
  kFixpipe,      // L0C -> GM (NZ->ND) or L1 (NZ), with dtype conversion and optional ReLU
  kCopyL0cToUb,  // coupled cores: L0C -> UB, fractals unchanged (V pipe)
  // Vector, binary
  kAdd,
  kSub,
  kMul,
  kDiv,
  kMax,
  kMin,
  kFusedMulAdd,  // dst = src0 * dst + src1, one rounding
  // Vector, tensor-scalar
  kAdds,
  kMuls,
  kMaxs,
  kMins,
  // Vector, unary
  kExp,
  kLn,
  kAbs,
  kSqrt,
  kRsqrt,
  kReciprocal,
  kRelu,
  kCast,
  kDuplicate,
  kBrcb,  // repeat r: the 8 elements src[8r .. 8r+7] each fill one 32 B block of dst
  // Vector, reductions
  kReduceSum,
  kReduceMax,
  kReduceMin,  // whole repeat -> one value
  kBlockReduceSum,
  kBlockReduceMax,
  kBlockReduceMin,  // each 32 B block -> one value
  kCompare,
  kSelect,
  kTranspose,
  kGather,  // dst lane i = the element at src0 + offsets[i] bytes (offsets: uint32 at src1, one per lane)
  // Synchronisation
  kSetFlag,
  kWaitFlag,
  kBarrier,
  kCrossSet,
  kCrossWait,
  // Scalar pipe work (e.g. scalar loops the kernel declares explicitly)
  kScalar,
};
std::string_view op_name(Op op);
bool is_vector_op(Op op);
bool is_sync_op(Op op);  // a flag or barrier: set, wait, barrier, cross-core set and wait

enum class CmpMode : std::uint8_t { kLt, kGt, kEq, kLe, kGe, kNe };

// The 8 x 32 B blocks of a repeat: a start address plus block and repeat strides, all in bytes.
struct VecOperand {
  std::uint64_t addr = 0;
  std::uint32_t blk_stride = 32;
  std::uint32_t rep_stride = 256;
};

// Lanes selected in each repeat: bit i of bits[i / 64] selects lane i.
struct Mask {
  std::array<std::uint64_t, 2> bits{~0ULL, ~0ULL};
  static Mask count(std::uint32_t n);  // the first n lanes
  bool test(std::uint32_t lane) const { return (bits[lane >> 6] >> (lane & 63)) & 1; }
};

struct CopyArgs {
  std::uint32_t nburst = 1;
  std::uint32_t burst_bytes = 0;  // per burst (kCopy: a multiple of 32; kCopyPad: any)
  std::uint32_t src_gap = 0;      // bytes skipped after each source burst
  std::uint32_t dst_gap = 0;      // bytes skipped after each destination burst
  // kCopyPad, GM->UB: elements of pad_value written before and after each burst's data in UB.
  std::uint32_t left_pad = 0, right_pad = 0;
  std::uint32_t elem_bytes = 1;
  std::uint64_t pad_value = 0;  // bit pattern of one element
  // kCopyNd2Nz: an ND matrix of `rows` x `cols` elements, `src_row_stride` elements apart in GM, into NZ fractals
  // with `dst_rows` rows per column block (>= rows, a multiple of 16).
  std::uint32_t rows = 0, cols = 0, src_row_stride = 0, dst_rows = 0;
  // kLoad2d: `repeat` 512 B fractals, source fractal i at src + i * src_stride (bytes), destination contiguous.
  std::uint32_t repeat = 0;
  std::uint32_t src_stride = 512;
  bool transpose = false;
};

// kLoad3d: img2col of a feature map in L1 into L0A. The map is NC1HWC0: channels / C0 planes of l1_h x l1_w pixels,
// each pixel's C0 = 32 / element-size channels in one 32 B block. The matrix it implies has one row per output
// pixel of the padded map (m = ho * Wo + wo, Wo = (l1_w + left + right - ((kw - 1) dw + 1)) / sw + 1, Ho likewise)
// and K = channels x kh x kw columns ordered (c1, kh, kw, c0), as the FRACTAL_Z weights are. The instruction
// writes rows [m_start, m_start + m_ext) (whole fractals: m_ext rounds up to 16) and columns
// [k_start, k_start + k_ext) as fractals of 16 rows x C0, m-major ((m / 16) * (k_ext / C0) + k / C0), the order
// Mmad reads L0A in. Taps outside the map, and rows past Ho x Wo, read pad_value.
struct Img2colArgs {
  std::uint32_t l1_h = 0, l1_w = 0, channels = 0;
  std::uint32_t kh = 1, kw = 1, sh = 1, sw = 1, dh = 1, dw = 1;
  std::array<std::uint32_t, 4> pad{};  // left, right, top, bottom (pixels)
  std::uint64_t pad_value = 0;         // bit pattern of one element
  std::uint32_t m_start = 0, m_ext = 0, k_start = 0, k_ext = 0;
};
// The padded map's output size along one axis: (in + pads - ((k - 1) d + 1)) / s + 1, or 0 when the dilated
// filter is larger than the padded map.
std::uint32_t img2col_out(std::uint32_t in, std::uint32_t pads, std::uint32_t k, std::uint32_t s, std::uint32_t d);

struct CubeArgs {
  std::uint32_t m = 0, k = 0, n = 0;
  bool init = true;        // true: C = A*B (+ bias); false: C += A*B
  bool has_bias = false;   // bias row of n fp32/int32 values in the bias table at `bias`
  std::uint64_t bias = 0;
  // kFixpipe: the L0C tile has m x n valid elements in 16x16 fractals with `src_rows` rows per column block.
  std::uint32_t src_rows = 0;
  std::uint32_t dst_row_stride = 0;  // GM ND destination: elements between rows
  bool relu = false;
  bool nz_out = false;  // destination L1: NZ of the destination type
};

struct VecArgs {
  VecOperand dst, src0, src1;
  std::uint32_t repeat = 1;
  Mask mask;
  double scalar = 0;  // tensor-scalar forms and Duplicate
  Round round = Round::kNearestEven;
  CmpMode cmp = CmpMode::kLt;
  std::uint32_t dst_rep_elems = 1;  // reductions: destination elements between consecutive repeats' results
};

struct SyncArgs {
  Pipe src = Pipe::kS, dst = Pipe::kS;  // set/wait flag; barrier uses src
  std::uint32_t id = 0;
  std::uint32_t mode = 0;  // cross-core mode 0..2
  std::uint64_t scalar_cycles = 0;  // kScalar: cycles of scalar work
};

// Where in the kernel source an instruction was issued (from the API call site).
struct SourceLoc {
  const char* file = "";
  std::uint32_t line = 0;
};
std::string format_loc(const SourceLoc& loc);

struct Instr {
  Op op = Op::kScalar;
  Pipe pipe = Pipe::kS;
  DType dtype = DType::kFp16;      // destination / main element type
  DType src_dtype = DType::kFp16;  // source element type (Cast, Mmad inputs, FixPipe source)
  Space dst_space = Space::kUb, src_space = Space::kUb;
  // Byte addresses for non-vector ops (Mmad: src0 = L0A, src1 = L0B, dst = L0C); kSelect keeps its lane mask at src1.
  std::uint64_t dst = 0, src0 = 0, src1 = 0;
  CopyArgs copy;
  Img2colArgs img2col;
  CubeArgs cube;
  VecArgs vec;
  SyncArgs sync;
  SourceLoc where;
};

// One buffer range an instruction reads or writes, for range and alignment checks.
struct Access {
  Space space;
  std::uint64_t addr;
  std::uint64_t bytes;
  bool write;
  std::string_view operand;  // "dst", "src0", ...
};

// The GM side of an instruction as contiguous segments (bursts, rows), for the memory model. Contiguous bursts
// merge into one segment.
struct Segment {
  std::uint64_t addr = 0;
  std::uint64_t bytes = 0;
};
std::uint32_t gm_segments(const Instr& in);
Segment gm_segment(const Instr& in, std::uint32_t i);

// The bytes one repeat of a vector instruction covers, as Ascend C's vector API defines it (8 blocks of 32 B). How
// many cycles the Vector unit takes for them is the config's (vector.bytes_per_repeat, vector.cycles_per_repeat).
inline constexpr std::uint32_t kRepeatBytes = 256;

// Lanes per repeat for a vector instruction: kRepeatBytes over the widest element type it touches.
std::uint32_t vector_lanes(const Instr& in);
// Bytes of payload the instruction moves or produces, for the copy-path cost formulas.
std::uint64_t payload_bytes(const Instr& in);

// A short human description used in errors and trace slices: "Add fp16 repeat=64 ub[0x0] <- ub[0x4000], ub[0x8000]".
std::string describe(const Instr& in);

}  // namespace npusim::hw::isa

namespace npusim::hw::isa {
// The pipe an instruction runs on, from its kind and spaces (sync instructions carry theirs in `pipe`).
// Returns Pipe::kAll for a copy direction the hardware has no path for.
Pipe pipe_of(const Instr& in);
}  // namespace npusim::hw::isa
