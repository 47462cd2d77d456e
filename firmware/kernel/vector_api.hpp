// Vector instructions of the kernel API, in two forms as in Ascend C:
// - the count form, Add(dst, a, b, count): the library splits `count` elements into full repeats (up to
//   vector.max_repeat per instruction) and one masked tail repeat;
// - the repeat form, Add(dst, a, b, mask, repeat, params): one instruction with a lane mask (a count or two 64-bit
//   words) and block/repeat strides in 32 B blocks.
#pragma once

#include <array>
#include <cstdint>

#include "firmware/kernel/kernel_api.hpp"

// The API keeps Ascend C's names (DataCopy, AllocTensor...), so kernels read as Ascend C kernels do.
// NOLINTBEGIN(readability-identifier-naming)
namespace npusim::fw::kernel {

struct BinaryRepeatParams {
  std::uint8_t dstBlkStride = 1, src0BlkStride = 1, src1BlkStride = 1;
  std::uint8_t dstRepStride = 8, src0RepStride = 8, src1RepStride = 8;
};
struct UnaryRepeatParams {
  std::uint16_t dstBlkStride = 1, srcBlkStride = 1;
  std::uint8_t dstRepStride = 8, srcRepStride = 8;
};
enum class RoundMode : std::uint8_t { CAST_RINT, CAST_ROUND, CAST_FLOOR, CAST_CEIL, CAST_TRUNC, CAST_NONE };
enum class CMPMODE : std::uint8_t { LT, GT, EQ, LE, GE, NE };

namespace detail {
struct VecSpec {
  hw::isa::Op op;
  hw::isa::DType dtype, src_dtype;
  std::uint64_t dst, src0, src1;
  double scalar = 0;
  hw::isa::Round round = hw::isa::Round::kNearestEven;
  hw::isa::CmpMode cmp = hw::isa::CmpMode::kLt;
  std::uint64_t sel_mask = 0;
};
// Count form: splits into instructions with contiguous operands.
void vec_count(const VecSpec& s, std::uint64_t count, SourceLoc where);
// Repeat form with explicit mask and strides (strides in 32 B blocks).
void vec_repeat(const VecSpec& s, const hw::isa::Mask& mask, std::uint32_t repeat,
                const std::array<std::uint32_t, 6>& strides /* dst, src0, src1 blk; dst, src0, src1 rep */,
                std::uint32_t dst_rep_elems, SourceLoc where);
hw::isa::Round to_round(RoundMode m);
inline hw::isa::Mask mask_bits(const std::uint64_t bits[2]) {
  hw::isa::Mask m;
  m.bits = {bits[0], bits[1]};
  return m;
}
template <class T>
VecSpec spec(hw::isa::Op op, const LocalTensor<T>& dst, const LocalTensor<T>& a, const LocalTensor<T>& b) {
  return VecSpec{op, dtype_of<T>(), dtype_of<T>(), dst.address(), a.address(), b.address()};
}
inline std::array<std::uint32_t, 6> strides(const BinaryRepeatParams& p) {
  return {p.dstBlkStride, p.src0BlkStride, p.src1BlkStride, p.dstRepStride, p.src0RepStride, p.src1RepStride};
}
inline std::array<std::uint32_t, 6> strides(const UnaryRepeatParams& p) {
  return {p.dstBlkStride, p.srcBlkStride, 1, p.dstRepStride, p.srcRepStride, 8};
}
}  // namespace detail

#define NPUSIM_BINARY_OP(Name, OP)                                                                                  \
  template <class T>                                                                                                \
  void Name(const LocalTensor<T>& dst, const LocalTensor<T>& a, const LocalTensor<T>& b, std::uint64_t count,      \
            SourceLoc where = here()) {                                                                             \
    detail::vec_count(detail::spec(hw::isa::Op::OP, dst, a, b), count, where);                                     \
  }                                                                                                                 \
  template <class T>                                                                                                \
  void Name(const LocalTensor<T>& dst, const LocalTensor<T>& a, const LocalTensor<T>& b, std::uint64_t mask,       \
            std::uint8_t repeat, const BinaryRepeatParams& p, SourceLoc where = here()) {                          \
    detail::vec_repeat(detail::spec(hw::isa::Op::OP, dst, a, b), hw::isa::Mask::count(static_cast<std::uint32_t>(mask)), \
                       repeat, detail::strides(p), 1, where);                                                       \
  }                                                                                                                 \
  template <class T>                                                                                                \
  void Name(const LocalTensor<T>& dst, const LocalTensor<T>& a, const LocalTensor<T>& b, const std::uint64_t mask[2], \
            std::uint8_t repeat, const BinaryRepeatParams& p, SourceLoc where = here()) {                          \
    detail::vec_repeat(detail::spec(hw::isa::Op::OP, dst, a, b), detail::mask_bits(mask), repeat, detail::strides(p), \
                       1, where);                                                                                   \
  }
NPUSIM_BINARY_OP(Add, kAdd)
NPUSIM_BINARY_OP(Sub, kSub)
NPUSIM_BINARY_OP(Mul, kMul)
NPUSIM_BINARY_OP(Div, kDiv)
NPUSIM_BINARY_OP(Max, kMax)
NPUSIM_BINARY_OP(Min, kMin)
NPUSIM_BINARY_OP(FusedMulAdd, kFusedMulAdd)  // dst = a * dst + b
#undef NPUSIM_BINARY_OP

#define NPUSIM_UNARY_OP(Name, OP)                                                                                   \
  template <class T>                                                                                                \
  void Name(const LocalTensor<T>& dst, const LocalTensor<T>& src, std::uint64_t count, SourceLoc where = here()) { \
    detail::vec_count(detail::spec(hw::isa::Op::OP, dst, src, src), count, where);                                 \
  }                                                                                                                 \
  template <class T>                                                                                                \
  void Name(const LocalTensor<T>& dst, const LocalTensor<T>& src, std::uint64_t mask, std::uint8_t repeat,         \
            const UnaryRepeatParams& p, SourceLoc where = here()) {                                                 \
    detail::vec_repeat(detail::spec(hw::isa::Op::OP, dst, src, src), hw::isa::Mask::count(static_cast<std::uint32_t>(mask)), \
                       repeat, detail::strides(p), 1, where);                                                       \
  }                                                                                                                 \
  template <class T>                                                                                                \
  void Name(const LocalTensor<T>& dst, const LocalTensor<T>& src, const std::uint64_t mask[2], std::uint8_t repeat, \
            const UnaryRepeatParams& p, SourceLoc where = here()) {                                                 \
    detail::vec_repeat(detail::spec(hw::isa::Op::OP, dst, src, src), detail::mask_bits(mask), repeat,               \
                       detail::strides(p), 1, where);                                                               \
  }
NPUSIM_UNARY_OP(Exp, kExp)
NPUSIM_UNARY_OP(Ln, kLn)
NPUSIM_UNARY_OP(Abs, kAbs)
NPUSIM_UNARY_OP(Sqrt, kSqrt)
NPUSIM_UNARY_OP(Rsqrt, kRsqrt)
NPUSIM_UNARY_OP(Reciprocal, kReciprocal)
NPUSIM_UNARY_OP(Relu, kRelu)
#undef NPUSIM_UNARY_OP

#define NPUSIM_SCALAR_OP(Name, OP)                                                                                  \
  template <class T, class S>                                                                                       \
  void Name(const LocalTensor<T>& dst, const LocalTensor<T>& src, S scalar, std::uint64_t count,                   \
            SourceLoc where = here()) {                                                                             \
    auto s = detail::spec(hw::isa::Op::OP, dst, src, src);                                                          \
    s.scalar = static_cast<double>(scalar);                                                                         \
    detail::vec_count(s, count, where);                                                                             \
  }                                                                                                                 \
  template <class T, class S>                                                                                       \
  void Name(const LocalTensor<T>& dst, const LocalTensor<T>& src, S scalar, std::uint64_t mask, std::uint8_t repeat, \
            const UnaryRepeatParams& p, SourceLoc where = here()) {                                                 \
    auto s = detail::spec(hw::isa::Op::OP, dst, src, src);                                                          \
    s.scalar = static_cast<double>(scalar);                                                                         \
    detail::vec_repeat(s, hw::isa::Mask::count(static_cast<std::uint32_t>(mask)), repeat, detail::strides(p), 1, where); \
  }
NPUSIM_SCALAR_OP(Adds, kAdds)
NPUSIM_SCALAR_OP(Muls, kMuls)
NPUSIM_SCALAR_OP(Maxs, kMaxs)
NPUSIM_SCALAR_OP(Mins, kMins)
#undef NPUSIM_SCALAR_OP

template <class T, class S>
void Duplicate(const LocalTensor<T>& dst, S scalar, std::uint64_t count, SourceLoc where = here()) {
  auto s = detail::spec(hw::isa::Op::kDuplicate, dst, dst, dst);
  s.scalar = static_cast<double>(scalar);
  detail::vec_count(s, count, where);
}

// Repeat form with a lane mask (count or two 64-bit words) and dst strides in 32 B blocks.
template <class T, class S>
void Duplicate(const LocalTensor<T>& dst, S scalar, const std::uint64_t mask[2], std::uint8_t repeat,
               std::uint16_t dstBlkStride, std::uint8_t dstRepStride, SourceLoc where = here()) {
  auto s = detail::spec(hw::isa::Op::kDuplicate, dst, dst, dst);
  s.scalar = static_cast<double>(scalar);
  detail::vec_repeat(s, detail::mask_bits(mask), repeat, {dstBlkStride, 1, 1, dstRepStride, 8, 8}, 1, where);
}
template <class T, class S>
void Duplicate(const LocalTensor<T>& dst, S scalar, std::uint64_t mask, std::uint8_t repeat, std::uint16_t dstBlkStride,
               std::uint8_t dstRepStride, SourceLoc where = here()) {
  auto s = detail::spec(hw::isa::Op::kDuplicate, dst, dst, dst);
  s.scalar = static_cast<double>(scalar);
  detail::vec_repeat(s, hw::isa::Mask::count(static_cast<std::uint32_t>(mask)), repeat,
                     {dstBlkStride, 1, 1, dstRepStride, 8, 8}, 1, where);
}

// Brcb: repeat r reads the 8 elements src[8r .. 8r+7] and fills dst block i of the repeat with element i
// (a per-row scalar broadcast into 32 B blocks, strides in 32 B blocks).
struct BrcbRepeatParams {
  std::uint16_t dstBlkStride = 1;
  std::uint16_t dstRepStride = 8;
};
template <class T>
void Brcb(const LocalTensor<T>& dst, const LocalTensor<T>& src, std::uint8_t repeat, const BrcbRepeatParams& p,
          SourceLoc where = here()) {
  detail::vec_repeat(detail::spec(hw::isa::Op::kBrcb, dst, src, src), hw::isa::Mask::count(256), repeat,
                     {p.dstBlkStride, 1, 1, p.dstRepStride, 8, 8}, 1, where);
}

template <class D, class S>
void Cast(const LocalTensor<D>& dst, const LocalTensor<S>& src, RoundMode mode, std::uint64_t count,
          SourceLoc where = here()) {
  detail::VecSpec s{hw::isa::Op::kCast, dtype_of<D>(), dtype_of<S>(), dst.address(), src.address(), src.address()};
  s.round = detail::to_round(mode);
  detail::vec_count(s, count, where);
}
template <class D, class S>
void Cast(const LocalTensor<D>& dst, const LocalTensor<S>& src, RoundMode mode, std::uint64_t mask, std::uint8_t repeat,
          const UnaryRepeatParams& p, SourceLoc where = here()) {
  detail::VecSpec s{hw::isa::Op::kCast, dtype_of<D>(), dtype_of<S>(), dst.address(), src.address(), src.address()};
  s.round = detail::to_round(mode);
  detail::vec_repeat(s, hw::isa::Mask::count(static_cast<std::uint32_t>(mask)), repeat, detail::strides(p), 1, where);
}

// Whole-repeat reductions: one value per repeat, written dstRepStride elements apart.
#define NPUSIM_REDUCE_OP(Name, OP, PER_REPEAT)                                                                      \
  template <class T>                                                                                                \
  void Name(const LocalTensor<T>& dst, const LocalTensor<T>& src, std::uint64_t mask, std::uint8_t repeat,         \
            std::uint32_t dstRepStride, std::uint16_t srcBlkStride, std::uint8_t srcRepStride,                    \
            SourceLoc where = here()) {                                                                             \
    detail::vec_repeat(detail::spec(hw::isa::Op::OP, dst, src, src), hw::isa::Mask::count(static_cast<std::uint32_t>(mask)), \
                       repeat, {1, srcBlkStride, 1, 8, srcRepStride, 8}, dstRepStride * (PER_REPEAT), where);     \
  }
NPUSIM_REDUCE_OP(WholeReduceSum, kReduceSum, 1)
NPUSIM_REDUCE_OP(WholeReduceMax, kReduceMax, 1)
NPUSIM_REDUCE_OP(WholeReduceMin, kReduceMin, 1)
// Per-block reductions: eight values per repeat (one per 32 B block); dstRepStride counts repeats' outputs.
NPUSIM_REDUCE_OP(BlockReduceSum, kBlockReduceSum, 8)
NPUSIM_REDUCE_OP(BlockReduceMax, kBlockReduceMax, 8)
NPUSIM_REDUCE_OP(BlockReduceMin, kBlockReduceMin, 8)
#undef NPUSIM_REDUCE_OP

// Compare writes one bit per lane (lanes/8 bytes per repeat) into `dst`.
template <class T>
void Compare(const LocalTensor<std::uint8_t>& dst, const LocalTensor<T>& a, const LocalTensor<T>& b, CMPMODE mode,
             std::uint64_t count, SourceLoc where = here()) {
  detail::VecSpec s{hw::isa::Op::kCompare, dtype_of<T>(), dtype_of<T>(), dst.address(), a.address(), b.address()};
  s.cmp = static_cast<hw::isa::CmpMode>(mode);
  detail::vec_count(s, count, where);
}
// Select: dst = mask bit ? a : b, with the mask laid out as Compare writes it.
template <class T>
void Select(const LocalTensor<T>& dst, const LocalTensor<std::uint8_t>& mask, const LocalTensor<T>& a,
            const LocalTensor<T>& b, std::uint64_t count, SourceLoc where = here()) {
  detail::VecSpec s{hw::isa::Op::kSelect, dtype_of<T>(), dtype_of<T>(), dst.address(), a.address(), b.address()};
  s.sel_mask = mask.address();
  detail::vec_count(s, count, where);
}
// Gather: dst[i] = the element `offsets[i]` bytes after src, for i < count (offsets: uint32 byte offsets in UB).
template <class T>
void Gather(const LocalTensor<T>& dst, const LocalTensor<T>& src, const LocalTensor<std::uint32_t>& offsets,
            std::uint64_t count, SourceLoc where = here()) {
  detail::VecSpec s{hw::isa::Op::kGather, dtype_of<T>(), dtype_of<T>(), dst.address(), src.address(), offsets.address()};
  detail::vec_count(s, count, where);
}
// Transposes one 16x16 matrix of 16-bit elements (512 B).
template <class T>
void Transpose(const LocalTensor<T>& dst, const LocalTensor<T>& src, SourceLoc where = here()) {
  detail::vec_repeat(detail::spec(hw::isa::Op::kTranspose, dst, src, src), hw::isa::Mask{}, 1, {1, 1, 1, 8, 8, 8}, 1,
                     where);
}

}  // namespace npusim::fw::kernel
// NOLINTEND(readability-identifier-naming)
