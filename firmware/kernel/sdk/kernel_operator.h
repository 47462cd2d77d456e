// kernel_operator.h: the Ascend C programming surface of the npusim kernel SDK. A kernel written for Ascend's
// toolchain includes this header as it includes the real one, and is compiled by the host's C++ compiler into a
// kernel library that `npusim kernel` (or a host program linking npusim::runtime) runs on the simulated chip.
//
// Names, argument order and semantics follow the public Ascend C API. Every call issues the instructions the real
// library issues into the pipes of the simulated core, so cycles, overlap and races are the model's. What differs
// from hardware, and which calls exist, is listed in docs/kernel-sdk.md; a call of the public API that the SDK does
// not offer is a compile error naming it.
//
// The layer underneath is firmware/kernel/kernel_api.hpp (npusim's own kernels use it directly); this header adds
// Ascend C's global names, the pointer form of GM_ADDR and the parameter structs in Ascend C's field order.
#pragma once

#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>

#include "firmware/kernel/kernel_api.hpp"
#include "npusim_kernel_entry.h"

// --- Qualifiers and global types ----------------------------------------------------------------------------------
// The host compiler has one address space: the qualifiers mark code and pointers as on the real toolchain.
#define __global__
#define __aicore__
#define __gm__

// A GM address as a kernel receives it: a pointer into the simulator's view of device memory. It may be offset,
// cast and dereferenced on the scalar unit (as kernels read their tiling structs); such direct accesses take no
// simulated time. Give it to GlobalTensor::SetGlobalBuffer for timed copies.
using GM_ADDR = std::uint8_t*;

// fp16 is the compiler's _Float16 (IEEE binary16, as Ascend's half); bf16 a storage type with float conversions.
using half = _Float16;
struct bfloat16_t {
  static constexpr npusim::hw::isa::DType npusim_dtype = npusim::hw::isa::DType::kBf16;
  std::uint16_t bits = 0;
  bfloat16_t() = default;
  bfloat16_t(float f) : bits(npusim::hw::isa::to_bf16(f).bits) {}  // NOLINT: implicit, as on the toolchain
  operator float() const { return npusim::hw::isa::to_float(npusim::hw::isa::BFloat16{bits}); }
};

// Pipes are global names in Ascend C.
using npusim::fw::kernel::pipe_t;
using npusim::fw::kernel::PIPE_ALL;
using npusim::fw::kernel::PIPE_FIX;
using npusim::fw::kernel::PIPE_M;
using npusim::fw::kernel::PIPE_MTE1;
using npusim::fw::kernel::PIPE_MTE2;
using npusim::fw::kernel::PIPE_MTE3;
using npusim::fw::kernel::PIPE_S;
using npusim::fw::kernel::PIPE_V;

enum event_t : std::int32_t { EVENT_ID0, EVENT_ID1, EVENT_ID2, EVENT_ID3, EVENT_ID4, EVENT_ID5, EVENT_ID6, EVENT_ID7 };

// The kernel type is given at launch (`npusim kernel --type`): the declaration is accepted and has no effect.
#define KERNEL_TYPE_AIV_ONLY 0
#define KERNEL_TYPE_AIC_ONLY 1
#define KERNEL_TYPE_MIX_AIC_1_1 2
#define KERNEL_TYPE_MIX_AIC_1_2 3
#define KERNEL_TYPE_MIX_AIC_1_0 4
#define KERNEL_TYPE_MIX_AIV_1_0 5
#define KERNEL_TASK_TYPE_DEFAULT(type) ((void)(type))
// On a coupled core (Cube and Vector in one) both hold.
#define ASCEND_IS_AIV (!::npusim::fw::kernel::IsAic())
#define ASCEND_IS_AIC (!::npusim::fw::kernel::IsAiv())
#define ASCEND_IS_NOT_AIV (::npusim::fw::kernel::IsAic())
#define ASCEND_IS_NOT_AIC (::npusim::fw::kernel::IsAiv())

namespace npusim_sdk {
template <class... A>
inline constexpr bool always_false = false;
}  // namespace npusim_sdk

namespace AscendC {

namespace k = ::npusim::fw::kernel;
using k::SourceLoc;
using k::here;

// --- Tensors, queues, pipe ----------------------------------------------------------------------------------------
using k::GlobalTensor;
using k::LocalTensor;
using k::TBuf;
using k::TPipe;
using k::TPosition;
using k::TQue;
using QuePosition = TPosition;
using TEventID = std::int8_t;

// TQueBind<src, dst>: the queue between two positions; its buffers live at the one that is not GM.
template <TPosition src, TPosition dst, int depth = 1>
class TQueBind : public TQue<src == TPosition::GM ? dst : src, depth> {};

// --- Block queries and synchronisation ----------------------------------------------------------------------------
using k::CrossCoreSetFlag;
using k::CrossCoreWaitFlag;
using k::GetSubBlockIdx;
using k::GetSubBlockNum;

// In a mix kernel each vector core has its own index: [0, GetBlockNum()) on a cube core, [0, GetBlockNum() x 2)
// on its vector cores (the block's index x GetTaskRation() + GetSubBlockIdx()); elsewhere the block's index.
inline std::int64_t GetTaskRation() { return k::IsAiv() ? static_cast<std::int64_t>(k::GetSubBlockNum()) : 1; }
inline std::int64_t GetBlockIdx() {
  return static_cast<std::int64_t>(k::GetBlockIdx()) * GetTaskRation() + k::GetSubBlockIdx();
}
inline std::int64_t GetBlockNum() { return k::GetBlockNum(); }
// CrossCoreWaitFlag<modeId, pipe>(id): the pipe that waits (PIPE_S: the scalar unit, nothing later is issued).
template <std::uint8_t modeId = 0, pipe_t pipe = PIPE_S>
void CrossCoreWaitFlag(std::uint16_t id, SourceLoc where = here()) {
  k::cross_core_wait_flag(id, pipe == PIPE_S ? PIPE_ALL : pipe, where);
}
using k::HardEvent;
using k::PipeBarrier;
using k::SetFlag;
using k::WaitFlag;

// --- Data movement ------------------------------------------------------------------------------------------------
using k::DataCopy;
using k::DataCopyExtParams;
using k::DataCopyPad;
using k::DataCopyPadExtParams;
using k::DataCopyParams;

// Nd2NzParams in Ascend C's field order and defaults; one ND matrix with consecutive NZ rows is modelled.
struct Nd2NzParams {
  std::uint16_t ndNum = 0, nValue = 0, dValue = 0, srcNdMatrixStride = 0, srcDValue = 0, dstNzC0Stride = 0,
                dstNzNStride = 0, dstNzMatrixStride = 0;
  Nd2NzParams() = default;
  Nd2NzParams(std::uint16_t ndNum_, std::uint16_t nValue_, std::uint16_t dValue_, std::uint16_t srcNdMatrixStride_,
              std::uint16_t srcDValue_, std::uint16_t dstNzC0Stride_, std::uint16_t dstNzNStride_,
              std::uint16_t dstNzMatrixStride_)
      : ndNum(ndNum_), nValue(nValue_), dValue(dValue_), srcNdMatrixStride(srcNdMatrixStride_), srcDValue(srcDValue_),
        dstNzC0Stride(dstNzC0Stride_), dstNzNStride(dstNzNStride_), dstNzMatrixStride(dstNzMatrixStride_) {}
};
template <class T>
void DataCopy(const LocalTensor<T>& dst, const GlobalTensor<T>& src, const Nd2NzParams& p, SourceLoc where = here()) {
  if (p.ndNum != 1 || p.dstNzNStride != 1) {
    k::detail::bad_param("DataCopy(Nd2NzParams)", "only ndNum = 1 with dstNzNStride = 1 is modelled", where);
  }
  k::DataCopy(dst, src, k::Nd2NzParams{1, p.nValue, p.dValue, 0, p.srcDValue, p.dstNzC0Stride, 1, 0}, where);
}

// DataCopyPad's older form: blockLen in bytes, strides as in DataCopyExtParams.
struct DataCopyPadParams {
  bool isPad = false;
  std::uint8_t leftPadding = 0;
  std::uint8_t rightPadding = 0;
  std::uint64_t paddingValue = 0;
};
template <class T>
void DataCopyPad(const LocalTensor<T>& dst, const GlobalTensor<T>& src, const DataCopyParams& p,
                 const DataCopyPadParams& pad, SourceLoc where = here()) {
  k::DataCopyPadExtParams<T> ext;
  ext.isPad = pad.isPad;
  ext.leftPadding = pad.leftPadding;
  ext.rightPadding = pad.rightPadding;
  std::memcpy(&ext.paddingValue, &pad.paddingValue, sizeof(T) < 8 ? sizeof(T) : 8);
  k::DataCopyPad(dst, src, DataCopyExtParams{p.blockCount, p.blockLen, p.srcStride, p.dstStride}, ext, where);
}
template <class T>
void DataCopyPad(const GlobalTensor<T>& dst, const LocalTensor<T>& src, const DataCopyParams& p,
                 SourceLoc where = here()) {
  k::DataCopyPad(dst, src, DataCopyExtParams{p.blockCount, p.blockLen, p.srcStride, p.dstStride}, where);
}

// --- Vector -------------------------------------------------------------------------------------------------------
using k::Abs;
using k::Add;
using k::Adds;
using k::BinaryRepeatParams;
using k::Brcb;
using k::BrcbRepeatParams;
using k::Cast;
using k::CMPMODE;
using k::Compare;
using k::Div;
using k::Duplicate;
using k::Exp;
using k::Ln;
using k::Max;
using k::Maxs;
using k::Min;
using k::Mins;
using k::Mul;
using k::Muls;
using k::Reciprocal;
using k::Relu;
using k::RoundMode;
using k::Rsqrt;
using k::Sqrt;
using k::Sub;
using k::Transpose;  // one 16x16 matrix of 16-bit elements
using k::UnaryRepeatParams;
using k::WholeReduceSum;

enum class ReduceOrder : std::uint8_t { ORDER_VALUE_INDEX, ORDER_INDEX_VALUE, ORDER_ONLY_VALUE, ORDER_ONLY_INDEX };
// WholeReduceMax/Min: the maximum (minimum) of each repeat. Ascend C's default order writes value and index pairs,
// which is not modelled: pass ReduceOrder::ORDER_ONLY_VALUE.
#define NPUSIM_WHOLE_REDUCE_ORDERED(Name)                                                                          \
  template <class T>                                                                                              \
  void Name(const LocalTensor<T>& dst, const LocalTensor<T>& src, std::uint64_t mask, std::uint8_t repeat,        \
            std::uint32_t dstRepStride, std::uint16_t srcBlkStride, std::uint8_t srcRepStride,                    \
            ReduceOrder order = ReduceOrder::ORDER_VALUE_INDEX, SourceLoc where = here()) {                       \
    if (order != ReduceOrder::ORDER_ONLY_VALUE) {                                                                 \
      k::detail::bad_param(#Name, "only ReduceOrder::ORDER_ONLY_VALUE is modelled (no index output; the default " \
                                  "ORDER_VALUE_INDEX writes value/index pairs)", where);                          \
    }                                                                                                             \
    k::Name(dst, src, mask, repeat, dstRepStride, srcBlkStride, srcRepStride, where);                             \
  }
NPUSIM_WHOLE_REDUCE_ORDERED(WholeReduceMax)
NPUSIM_WHOLE_REDUCE_ORDERED(WholeReduceMin)
#undef NPUSIM_WHOLE_REDUCE_ORDERED

// BlockReduceSum/Max/Min in Ascend C's argument order (repeat before mask).
#define NPUSIM_BLOCK_REDUCE(Name)                                                                                  \
  template <class T>                                                                                              \
  void Name(const LocalTensor<T>& dst, const LocalTensor<T>& src, std::int32_t repeat, std::uint64_t mask,        \
            std::int32_t dstRepStride, std::int32_t srcBlkStride, std::int32_t srcRepStride, SourceLoc where = here()) { \
    k::Name(dst, src, mask, static_cast<std::uint8_t>(repeat), static_cast<std::uint32_t>(dstRepStride),          \
            static_cast<std::uint16_t>(srcBlkStride), static_cast<std::uint8_t>(srcRepStride), where);            \
  }
NPUSIM_BLOCK_REDUCE(BlockReduceSum)
NPUSIM_BLOCK_REDUCE(BlockReduceMax)
NPUSIM_BLOCK_REDUCE(BlockReduceMin)
#undef NPUSIM_BLOCK_REDUCE

namespace detail {
// Level-2 reductions: whole-repeat reductions into `work`, again over their results, until one value is left in
// dst[0], with a vector barrier between the passes (each pass reads the previous one's results). A vector
// instruction's operands start 32 B-aligned, so a pass's partial last repeat writes its result at the next aligned
// element, and the gap before it is filled with the reduction's identity (a lane-masked Duplicate).
template <class T, class Reduce>
void reduce_all(const LocalTensor<T>& dst, const LocalTensor<T>& src, const LocalTensor<T>& work, std::uint64_t count,
                double identity, const char* api, SourceLoc where, Reduce reduce) {
  if (count == 0) k::detail::bad_param(api, "count must be at least 1", where);
  constexpr std::uint64_t lanes = 256 / sizeof(T), per_block = 32 / sizeof(T);
  constexpr std::uint64_t max_repeat = 255 / per_block * per_block;  // each instruction's results start aligned
  LocalTensor<T> in = src;
  std::uint64_t n = count;
  for (;;) {
    const LocalTensor<T>& out = n <= lanes ? dst : work;
    const std::uint64_t full = n / lanes, tail = n % lanes;
    for (std::uint64_t r = 0; r < full; r += max_repeat) {
      const auto reps = static_cast<std::uint8_t>(full - r < max_repeat ? full - r : max_repeat);
      reduce(out[r], in[r * lanes], lanes, reps, where);
    }
    std::uint64_t next = full;
    if (tail) {
      next = (full + per_block - 1) / per_block * per_block;
      if (next != full) {
        const std::uint64_t mask[2] = {((1ULL << per_block) - 1) & ~((1ULL << (full % per_block)) - 1), 0};
        k::Duplicate(out[full / per_block * per_block], identity, mask, 1, 1, 8, where);
      }
      reduce(out[next], in[full * lanes], tail, 1, where);
      ++next;
    }
    if (n <= lanes) return;
    k::PipeBarrier<PIPE_V>(where);
    n = next;
    in = work;
  }
}
}  // namespace detail

template <class T>
void ReduceSum(const LocalTensor<T>& dst, const LocalTensor<T>& src, const LocalTensor<T>& work, std::int32_t count,
               SourceLoc where = here()) {
  detail::reduce_all(dst, src, work, static_cast<std::uint64_t>(count < 0 ? 0 : count), 0.0, "ReduceSum", where,
                     [](const LocalTensor<T>& d, const LocalTensor<T>& s, std::uint64_t mask, std::uint8_t reps,
                        SourceLoc w) { k::WholeReduceSum(d, s, mask, reps, 1, 1, 8, w); });
}
template <class T>
void ReduceMax(const LocalTensor<T>& dst, const LocalTensor<T>& src, const LocalTensor<T>& work, std::int32_t count,
               bool calIndex = false, SourceLoc where = here()) {
  if (calIndex) k::detail::bad_param("ReduceMax", "calIndex = true (the index output) is not modelled", where);
  detail::reduce_all(dst, src, work, static_cast<std::uint64_t>(count < 0 ? 0 : count),
                     -std::numeric_limits<double>::infinity(), "ReduceMax", where,
                     [](const LocalTensor<T>& d, const LocalTensor<T>& s, std::uint64_t mask, std::uint8_t reps,
                        SourceLoc w) { k::WholeReduceMax(d, s, mask, reps, 1, 1, 8, w); });
}
template <class T>
void ReduceMin(const LocalTensor<T>& dst, const LocalTensor<T>& src, const LocalTensor<T>& work, std::int32_t count,
               bool calIndex = false, SourceLoc where = here()) {
  if (calIndex) k::detail::bad_param("ReduceMin", "calIndex = true (the index output) is not modelled", where);
  detail::reduce_all(dst, src, work, static_cast<std::uint64_t>(count < 0 ? 0 : count),
                     std::numeric_limits<double>::infinity(), "ReduceMin", where,
                     [](const LocalTensor<T>& d, const LocalTensor<T>& s, std::uint64_t mask, std::uint8_t reps,
                        SourceLoc w) { k::WholeReduceMin(d, s, mask, reps, 1, 1, 8, w); });
}

enum class SELMODE : std::uint8_t { VSEL_CMPMASK_SPR, VSEL_TENSOR_SCALAR_MODE, VSEL_TENSOR_TENSOR_MODE };
// dst = mask bit ? src0 : src1, the mask as Compare writes it (VSEL_TENSOR_TENSOR_MODE).
template <class T, class U>
void Select(const LocalTensor<T>& dst, const LocalTensor<U>& selMask, const LocalTensor<T>& src0,
            const LocalTensor<T>& src1, SELMODE mode, std::uint32_t count, SourceLoc where = here()) {
  if (mode != SELMODE::VSEL_TENSOR_TENSOR_MODE) {
    k::detail::bad_param("Select", "only SELMODE::VSEL_TENSOR_TENSOR_MODE is modelled", where);
  }
  k::Select(dst, selMask.template ReinterpretCast<std::uint8_t>(), src0, src1, count, where);
}

// --- Cube ---------------------------------------------------------------------------------------------------------
// The parameter structs in Ascend C's field order (positional initialisation means what it means there).
struct LoadData2DParams {
  std::uint16_t startIndex = 0;
  std::uint8_t repeatTimes = 0;
  std::uint16_t srcStride = 0;
  std::uint8_t sid = 0;
  std::uint16_t dstGap = 0;
  bool ifTranspose = false;
  std::uint8_t addrMode = 0;
  LoadData2DParams() = default;
  LoadData2DParams(std::uint16_t startIndex_, std::uint8_t repeatTimes_, std::uint16_t srcStride_, std::uint8_t sid_ = 0,
                   std::uint16_t dstGap_ = 0, bool ifTranspose_ = false, std::uint8_t addrMode_ = 0)
      : startIndex(startIndex_), repeatTimes(repeatTimes_), srcStride(srcStride_), sid(sid_), dstGap(dstGap_),
        ifTranspose(ifTranspose_), addrMode(addrMode_) {}
};
template <class T>
void LoadData(const LocalTensor<T>& dst, const LocalTensor<T>& src, const LoadData2DParams& p, SourceLoc where = here()) {
  if (p.dstGap != 0) k::detail::bad_param("LoadData", "dstGap other than 0 is not modelled", where);
  if (p.addrMode != 0) k::detail::bad_param("LoadData", "addrMode other than 0 (increasing) is not modelled", where);
  k::LoadData(dst, src, k::LoadData2DParams{p.startIndex, p.repeatTimes, p.srcStride, p.ifTranspose}, where);
}

// LoadData 3D (img2col from an NC1HWC0 feature map in L1 into L0A), LoadData3DParamsV2's fields in its order.
template <class T>
struct LoadData3DParamsV2 {
  std::uint8_t padList[4] = {0, 0, 0, 0};  // left, right, top, bottom
  std::uint16_t l1H = 0, l1W = 0, channelSize = 0, kExtension = 0, mExtension = 0, kStartPt = 0, mStartPt = 0;
  std::uint8_t strideW = 1, strideH = 1, filterW = 1, filterH = 1, dilationFilterW = 1, dilationFilterH = 1;
  bool enTranspose = false, enSmallK = false;
  T padValue = T(0);
  bool filterSizeW = false, filterSizeH = false, fMatrixCtrl = false;
  LoadData3DParamsV2() = default;
  LoadData3DParamsV2(const std::uint8_t padList_[4], std::uint16_t l1H_, std::uint16_t l1W_, std::uint16_t channelSize_,
                     std::uint16_t kExtension_, std::uint16_t mExtension_, std::uint16_t kStartPt_,
                     std::uint16_t mStartPt_, std::uint8_t strideW_, std::uint8_t strideH_, std::uint8_t filterW_,
                     std::uint8_t filterH_, std::uint8_t dilationFilterW_, std::uint8_t dilationFilterH_,
                     bool enTranspose_, bool enSmallK_, T padValue_)
      : l1H(l1H_),
        l1W(l1W_),
        channelSize(channelSize_),
        kExtension(kExtension_),
        mExtension(mExtension_),
        kStartPt(kStartPt_),
        mStartPt(mStartPt_),
        strideW(strideW_),
        strideH(strideH_),
        filterW(filterW_),
        filterH(filterH_),
        dilationFilterW(dilationFilterW_),
        dilationFilterH(dilationFilterH_),
        enTranspose(enTranspose_),
        enSmallK(enSmallK_),
        padValue(padValue_) {
    for (int i = 0; i < 4; ++i) padList[i] = padList_[i];
  }
};
template <class T>
void LoadData(const LocalTensor<T>& dst, const LocalTensor<T>& src, const LoadData3DParamsV2<T>& p,
              SourceLoc where = here()) {
  if (p.enTranspose || p.enSmallK || p.fMatrixCtrl)
    k::detail::bad_param("LoadData(LoadData3DParamsV2)", "enTranspose, enSmallK and fMatrixCtrl are not modelled",
                         where);
  k::LoadData3DParams q;
  for (int i = 0; i < 4; ++i) q.padList[static_cast<std::size_t>(i)] = p.padList[i];
  q.l1H = p.l1H;
  q.l1W = p.l1W;
  q.channelSize = p.channelSize;
  q.kExtension = p.kExtension;
  q.mExtension = p.mExtension;
  q.kStartPt = p.kStartPt;
  q.mStartPt = p.mStartPt;
  q.strideW = p.strideW;
  q.strideH = p.strideH;
  q.filterW = static_cast<std::uint16_t>(p.filterW + (p.filterSizeW ? 256 : 0));
  q.filterH = static_cast<std::uint16_t>(p.filterH + (p.filterSizeH ? 256 : 0));
  q.dilationFilterW = p.dilationFilterW;
  q.dilationFilterH = p.dilationFilterH;
  std::memcpy(&q.padValue, &p.padValue, sizeof(T));
  k::LoadData(dst, src, q, where);
}

struct MmadParams {
  std::uint16_t m = 0, n = 0, k = 0;
  bool isBias = false;
  std::int32_t fmOffset = 0;
  bool enSsparse = false, enWinogradA = false, enWinogradB = false;
  std::uint8_t unitFlag = 0;
  bool kDirectionAlign = false;
  bool cmatrixSource = false;
  bool cmatrixInitVal = true;
  MmadParams() = default;
  MmadParams(std::uint16_t m_, std::uint16_t n_, std::uint16_t k_) : m(m_), n(n_), k(k_) {}
  MmadParams(std::uint16_t m_, std::uint16_t n_, std::uint16_t k_, std::uint8_t unitFlag_, bool cmatrixSource_,
             bool cmatrixInitVal_)
      : m(m_), n(n_), k(k_), unitFlag(unitFlag_), cmatrixSource(cmatrixSource_), cmatrixInitVal(cmatrixInitVal_) {}
  MmadParams(std::uint16_t m_, std::uint16_t n_, std::uint16_t k_, bool isBias_, std::int32_t fmOffset_,
             bool enSsparse_, bool enWinogradA_, bool enWinogradB_)
      : m(m_), n(n_), k(k_), isBias(isBias_), fmOffset(fmOffset_), enSsparse(enSsparse_), enWinogradA(enWinogradA_),
        enWinogradB(enWinogradB_) {}
};
namespace detail {
inline k::MmadParams to_internal(const MmadParams& p, SourceLoc where) {
  if (p.fmOffset != 0 || p.enSsparse || p.enWinogradA || p.enWinogradB || p.cmatrixSource) {
    k::detail::bad_param("Mmad", "fmOffset, sparsity, Winograd and cmatrixSource are not modelled", where);
  }
  // isBias (deprecated in Ascend C) accumulates onto what L0C holds: C += A*B.
  return k::MmadParams{p.m, p.n, p.k, p.cmatrixInitVal && !p.isBias, false};
}
}  // namespace detail
template <class Acc, class In>
void Mmad(const LocalTensor<Acc>& c, const LocalTensor<In>& a, const LocalTensor<In>& b, const MmadParams& p,
          SourceLoc where = here()) {
  k::Mmad(c, a, b, detail::to_internal(p, where), where);
}
template <class Acc, class In>
void Mmad(const LocalTensor<Acc>& c, const LocalTensor<In>& a, const LocalTensor<In>& b, const LocalTensor<Acc>& bias,
          const MmadParams& p, SourceLoc where = here()) {
  k::Mmad(c, a, b, bias, detail::to_internal(p, where), where);
}

enum class QuantMode_t : std::uint8_t { NoQuant, F322F16, F322BF16, DEQF16, VDEQF16, QF322B8_PRE, REQ8 };
struct FixpipeParamsV220 {
  std::uint16_t nSize = 0, mSize = 0;
  std::uint16_t srcStride = 0;
  std::uint32_t dstStride = 0;
  QuantMode_t quantPre = QuantMode_t::NoQuant;
  std::uint64_t deqScalar = 0;
  std::uint16_t ndNum = 1, srcNdStride = 0, dstNdStride = 0;
  bool reluEn = false;
  std::uint8_t unitFlag = 0;
  bool isChannelSplit = false;
  // Ascend C's constructor order (reluEn fifth).
  FixpipeParamsV220(std::uint16_t nSize_ = 0, std::uint16_t mSize_ = 0, std::uint16_t srcStride_ = 0,
                    std::uint32_t dstStride_ = 0, bool reluEn_ = false, QuantMode_t quantPre_ = QuantMode_t::NoQuant,
                    std::uint64_t deqScalar_ = 0, std::uint16_t ndNum_ = 1, std::uint16_t srcNdStride_ = 0,
                    std::uint16_t dstNdStride_ = 0, std::uint8_t unitFlag_ = 0, bool isChannelSplit_ = false)
      : nSize(nSize_), mSize(mSize_), srcStride(srcStride_), dstStride(dstStride_), quantPre(quantPre_),
        deqScalar(deqScalar_), ndNum(ndNum_), srcNdStride(srcNdStride_), dstNdStride(dstNdStride_), reluEn(reluEn_),
        unitFlag(unitFlag_), isChannelSplit(isChannelSplit_) {}
};
enum class CO2Layout : std::uint8_t { NZ, ROW_MAJOR };
struct FixpipeConfig {
  CO2Layout format;
};
inline constexpr FixpipeConfig CFG_NZ{CO2Layout::NZ};
inline constexpr FixpipeConfig CFG_ROW_MAJOR{CO2Layout::ROW_MAJOR};
namespace detail {
inline k::FixpipeParams to_internal(const FixpipeParamsV220& p, SourceLoc where) {
  if (p.ndNum != 1 || p.isChannelSplit) k::detail::bad_param("Fixpipe", "ndNum other than 1 and channel split are not modelled", where);
  if (p.quantPre == QuantMode_t::DEQF16 || p.quantPre == QuantMode_t::VDEQF16 || p.quantPre == QuantMode_t::QF322B8_PRE ||
      p.quantPre == QuantMode_t::REQ8) {
    k::detail::bad_param("Fixpipe", "quantisation modes are not modelled (the conversion follows the destination type)", where);
  }
  return k::FixpipeParams{p.nSize, p.mSize, p.srcStride, p.dstStride, p.reluEn};
}
}  // namespace detail
// L0C -> GM, ND (CFG_ROW_MAJOR) with conversion to T.
template <class T, class U, const FixpipeConfig& config = CFG_ROW_MAJOR>
void Fixpipe(const GlobalTensor<T>& dst, const LocalTensor<U>& src, const FixpipeParamsV220& p, SourceLoc where = here()) {
  if (config.format != CO2Layout::ROW_MAJOR) k::detail::bad_param("Fixpipe", "to GM only CFG_ROW_MAJOR is modelled", where);
  k::Fixpipe(dst, src, detail::to_internal(p, where), where);
}
// L0C -> L1, NZ (Ascend C's default config is CFG_ROW_MAJOR here too: name CFG_NZ).
template <class T, class U, const FixpipeConfig& config = CFG_ROW_MAJOR>
void Fixpipe(const LocalTensor<T>& dst, const LocalTensor<U>& src, const FixpipeParamsV220& p, SourceLoc where = here()) {
  if (config.format != CO2Layout::NZ) k::detail::bad_param("Fixpipe", "to L1 only CFG_NZ is modelled", where);
  k::Fixpipe(dst, src, detail::to_internal(p, where), where);
}

// --- Calls of the public API the SDK does not offer: using one is a compile error that names it. --------------------
#define NPUSIM_SDK_MISSING(Name)                                                                                   \
  template <class... A>                                                                                            \
  void Name(A&&...) {                                                                                              \
    static_assert(::npusim_sdk::always_false<A...>,                                                                \
                  "AscendC::" #Name " is not in the npusim kernel SDK (docs/kernel-sdk.md lists what is)");        \
  }
NPUSIM_SDK_MISSING(Sin)
NPUSIM_SDK_MISSING(Cos)
NPUSIM_SDK_MISSING(Tanh)
NPUSIM_SDK_MISSING(Sigmoid)
NPUSIM_SDK_MISSING(Gelu)
NPUSIM_SDK_MISSING(SoftMax)
NPUSIM_SDK_MISSING(LayerNorm)
NPUSIM_SDK_MISSING(LeakyRelu)
NPUSIM_SDK_MISSING(Axpy)
NPUSIM_SDK_MISSING(Not)
NPUSIM_SDK_MISSING(And)
NPUSIM_SDK_MISSING(Or)
NPUSIM_SDK_MISSING(ShiftLeft)
NPUSIM_SDK_MISSING(ShiftRight)
NPUSIM_SDK_MISSING(Power)
NPUSIM_SDK_MISSING(Sort)
NPUSIM_SDK_MISSING(GatherMask)
NPUSIM_SDK_MISSING(Pad)
NPUSIM_SDK_MISSING(SetAtomicAdd)
NPUSIM_SDK_MISSING(SetAtomicNone)
NPUSIM_SDK_MISSING(SetVectorMask)
NPUSIM_SDK_MISSING(ResetMask)
NPUSIM_SDK_MISSING(SetMaskCount)
NPUSIM_SDK_MISSING(SetMaskNorm)
NPUSIM_SDK_MISSING(DataCacheCleanAndInvalid)
NPUSIM_SDK_MISSING(DumpTensor)
NPUSIM_SDK_MISSING(printf)
NPUSIM_SDK_MISSING(SyncAll)
NPUSIM_SDK_MISSING(IBSet)
NPUSIM_SDK_MISSING(IBWait)
#undef NPUSIM_SDK_MISSING

}  // namespace AscendC
