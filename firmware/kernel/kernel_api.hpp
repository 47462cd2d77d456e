// The device-side kernel API, in the style of Ascend C (DESIGN.md, "Kernels"). A kernel is an ordinary C++
// function; each call below issues instructions into the pipe queues of the core the block runs on. Parameter
// structs keep Ascend C's field names and units (32 B blocks for DataCopy strides, fractals for LoadData, elements
// for Fixpipe), and the TQue calls map onto set_flag/wait_flag as the real library does:
//   EnQue = set_flag(producer -> consumer), DeQue = wait_flag(producer -> consumer),
//   FreeTensor = set_flag(consumer -> producer), AllocTensor = wait_flag(consumer -> producer) once the buffer
//   has been used before. Each buffer of a queue has its own pair of event ids.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <deque>
#include <string>
#include <type_traits>
#include <vector>

#include "hw/isa/dtype.hpp"
#include "hw/isa/instr.hpp"

// The API keeps Ascend C's names (DataCopy, AllocTensor...), so kernels read as Ascend C kernels do.
// NOLINTBEGIN(readability-identifier-naming)
namespace npusim::fw::kernel {

using half = hw::isa::Half;
using bfloat16_t = hw::isa::BFloat16;
using GM_ADDR = std::uint64_t;  // a device-memory address
using hw::isa::SourceLoc;

// This header and what it includes are what the kernel SDK installs (firmware/kernel/sdk/kernel_operator.h builds
// Ascend C's namespace on it), so it stays free of SystemC and of the core model: everything that touches the core
// is out of line in kernel_api.cpp.

// The call site of an API function, captured through a defaulted argument.
inline SourceLoc here(const char* file = __builtin_FILE(), std::uint32_t line = __builtin_LINE()) {
  return SourceLoc{file, line};
}

namespace detail {
// An element type may name its dtype (the SDK's bfloat16_t does).
template <class T, class = void>
struct has_dtype_tag : std::false_type {};
template <class T>
struct has_dtype_tag<T, std::void_t<decltype(T::npusim_dtype)>> : std::true_type {};
// The compiler's IEEE binary16 type where it has one (GCC on x86-64; clang from 15).
template <class T>
constexpr bool is_float16() {
#ifdef __FLT16_MAX__
  return std::is_same_v<T, _Float16>;
#else
  return false;
#endif
}
}  // namespace detail

template <class T>
constexpr hw::isa::DType dtype_of() {
  using hw::isa::DType;
  if constexpr (detail::has_dtype_tag<T>::value) return T::npusim_dtype;
  else if constexpr (std::is_same_v<T, half> || detail::is_float16<T>())
    return DType::kFp16;
  else if constexpr (std::is_same_v<T, bfloat16_t>) return DType::kBf16;
  else if constexpr (std::is_same_v<T, float>) return DType::kFp32;
  else if constexpr (std::is_same_v<T, std::int32_t>) return DType::kInt32;
  else if constexpr (std::is_same_v<T, std::int8_t> || std::is_same_v<T, std::uint8_t>) return DType::kInt8;
  else static_assert(sizeof(T) == 0, "unsupported element type");
}

// --- Pipes, events, positions -------------------------------------------------------------------------------------
enum pipe_t : std::uint8_t { PIPE_S, PIPE_MTE1, PIPE_MTE2, PIPE_MTE3, PIPE_M, PIPE_V, PIPE_FIX, PIPE_ALL };
inline hw::isa::Pipe to_pipe(pipe_t p) { return static_cast<hw::isa::Pipe>(p); }

// HardEvent names "SRC_DST": the flag set in SRC and waited for in DST.
enum class HardEvent : std::uint8_t {
  MTE2_V, V_MTE2, V_MTE3, MTE3_V, MTE2_MTE1, MTE1_MTE2, MTE1_M, M_MTE1, M_FIX, FIX_M, M_V, V_M,
  MTE2_S, S_MTE2, V_S, S_V, MTE3_S, S_MTE3, MTE3_MTE2, MTE2_MTE3, FIX_S, S_FIX, FIX_MTE2, MTE2_FIX,
  MTE1_V, V_MTE1, MTE2_M, M_MTE2, MTE3_MTE1, MTE1_MTE3, M_S, S_M, FIX_MTE3, MTE3_FIX, MTE1_FIX, FIX_MTE1,
  V_V, FIX_FIX,  // Ascend C names them; a flag between a pipe and itself is refused when issued
};
struct EventPipes {
  pipe_t src, dst;
};
EventPipes event_pipes(HardEvent e);

// C2 is the bias table (Mmad's bias row).
enum class TPosition : std::uint8_t { GM, VECIN, VECOUT, VECCALC, A1, B1, A2, B2, CO1, CO2, C2 };
hw::isa::Space position_space(TPosition p);

namespace detail {
// Scalar-unit accesses of a buffer (local or GM), timed and checked by the core.
void scalar_read(hw::isa::Space s, std::uint64_t addr, void* out, std::uint64_t bytes, SourceLoc where);
void scalar_write(hw::isa::Space s, std::uint64_t addr, const void* in, std::uint64_t bytes, SourceLoc where);
// The device address of a host pointer into the device-memory view that SDK kernels receive as GM_ADDR; a kernel
// error naming `api` when `p` (and `bytes` after it) is not in device memory.
std::uint64_t gm_address(const void* p, std::uint64_t bytes, const char* api, SourceLoc where);
}  // namespace detail

// --- Tensors ------------------------------------------------------------------------------------------------------
template <class T>
class GlobalTensor {
 public:
  void SetGlobalBuffer(GM_ADDR addr, std::uint64_t size = 0) {
    addr_ = addr;
    size_ = size;
  }
  // Ascend C's form: a (__gm__) pointer as an SDK kernel receives it, and the size in elements.
  // (A template, so that a literal 0 still means device address 0.)
  template <class U, class = std::enable_if_t<std::is_same_v<U, T>>>
  void SetGlobalBuffer(U* buffer, std::uint64_t size = 0, SourceLoc where = here()) {
    addr_ = detail::gm_address(buffer, size * sizeof(T), "SetGlobalBuffer", where);
    size_ = size;
  }
  // Scalar access to GM from the scalar unit (timed as a scalar instruction; no data cache is modelled).
  T GetValue(std::uint64_t i, SourceLoc where = here()) const {
    T v{};
    detail::scalar_read(hw::isa::Space::kGm, addr_ + i * sizeof(T), &v, sizeof(T), where);
    return v;
  }
  void SetValue(std::uint64_t i, T v, SourceLoc where = here()) const {
    detail::scalar_write(hw::isa::Space::kGm, addr_ + i * sizeof(T), &v, sizeof(T), where);
  }
  GlobalTensor operator[](std::uint64_t offset) const {
    GlobalTensor t;
    t.addr_ = addr_ + offset * sizeof(T);
    t.size_ = size_ > offset ? size_ - offset : 0;
    return t;
  }
  GM_ADDR address() const { return addr_; }
  std::uint64_t GetSize() const { return size_; }

 private:
  GM_ADDR addr_ = 0;
  std::uint64_t size_ = 0;
};

template <class T>
class LocalTensor {
 public:
  LocalTensor() = default;
  LocalTensor(hw::isa::Space space, std::uint64_t addr, std::uint64_t size) : space_(space), addr_(addr), size_(size) {}
  LocalTensor operator[](std::uint64_t offset) const {
    return LocalTensor(space_, addr_ + offset * sizeof(T), size_ > offset ? size_ - offset : 0);
  }
  template <class U>
  LocalTensor<U> ReinterpretCast() const {
    return LocalTensor<U>(space_, addr_, size_ * sizeof(T) / sizeof(U));
  }
  // Scalar access from the scalar unit (the kernel must have synchronised, e.g. with a V -> S flag).
  T GetValue(std::uint64_t i, SourceLoc where = here()) const {
    T v{};
    detail::scalar_read(space_, addr_ + i * sizeof(T), &v, sizeof(T), where);
    return v;
  }
  void SetValue(std::uint64_t i, T v, SourceLoc where = here()) const {
    detail::scalar_write(space_, addr_ + i * sizeof(T), &v, sizeof(T), where);
  }
  hw::isa::Space space() const { return space_; }
  std::uint64_t address() const { return addr_; }
  std::uint64_t GetSize() const { return size_; }

 private:
  hw::isa::Space space_ = hw::isa::Space::kUb;
  std::uint64_t addr_ = 0;
  std::uint64_t size_ = 0;
};

// --- TPipe, TQue, TBuf --------------------------------------------------------------------------------------------
class TQueBase {
 public:
  explicit TQueBase(TPosition pos);
  // With --sanitize: a buffer still allocated is reported; the last FreeTensor's flag of each buffer is expected
  // to be left set (the next AllocTensor would wait for it).
  ~TQueBase();
  TQueBase(const TQueBase&) = delete;
  TQueBase& operator=(const TQueBase&) = delete;
  TPosition position() const { return pos_; }

 protected:
  friend class TPipe;
  struct Buffer {
    std::uint64_t addr = 0;
    std::uint32_t enq_event = 0, free_event = 0;
    bool used_before = false;  // freed at least once: the next Alloc waits for the free event
    bool outstanding = false;  // allocated and not freed yet
    bool free_pending = false; // freed, and no AllocTensor has waited for that free yet
    SourceLoc alloc_at;
  };
  std::uint64_t alloc_raw(SourceLoc where);
  void enque_raw(std::uint64_t addr, SourceLoc where);
  std::uint64_t deque_raw(SourceLoc where);
  void free_raw(std::uint64_t addr, SourceLoc where);
  std::size_t slot_of(std::uint64_t addr, const char* what, SourceLoc where) const;

  TPosition pos_;
  pipe_t producer_, consumer_;
  std::vector<Buffer> buffers_;
  std::uint64_t buffer_bytes_ = 0;
  std::uint64_t allocs_ = 0, deques_ = 0;
};

template <TPosition pos, int depth = 1>
class TQue : public TQueBase {
 public:
  TQue() : TQueBase(pos) {}
  template <class T>
  LocalTensor<T> AllocTensor(SourceLoc where = here()) {
    return LocalTensor<T>(position_space(pos), alloc_raw(where), buffer_bytes_ / sizeof(T));
  }
  template <class T>
  void EnQue(const LocalTensor<T>& t, SourceLoc where = here()) {
    enque_raw(t.address(), where);
  }
  template <class T>
  LocalTensor<T> DeQue(SourceLoc where = here()) {
    return LocalTensor<T>(position_space(pos), deque_raw(where), buffer_bytes_ / sizeof(T));
  }
  template <class T>
  void FreeTensor(const LocalTensor<T>& t, SourceLoc where = here()) {
    free_raw(t.address(), where);
  }
};

template <TPosition pos>
class TBuf {
 public:
  template <class T>
  LocalTensor<T> Get() const {
    return LocalTensor<T>(position_space(pos), addr_, bytes_ / sizeof(T));
  }
  // The first `len` elements (at most the buffer).
  template <class T>
  LocalTensor<T> Get(std::uint32_t len) const {
    return LocalTensor<T>(position_space(pos), addr_, std::min<std::uint64_t>(len, bytes_ / sizeof(T)));
  }

 private:
  friend class TPipe;
  std::uint64_t addr_ = 0, bytes_ = 0;
};

class TPipe {
 public:
  TPipe();
  void InitBuffer(TQueBase& que, std::uint32_t num, std::uint64_t bytes, SourceLoc where = here());
  template <TPosition pos>
  void InitBuffer(TBuf<pos>& buf, std::uint64_t bytes, SourceLoc where = here()) {
    buf.addr_ = allocate(position_space(pos), bytes, where);
    buf.bytes_ = bytes;
  }
  // Event ids for a flag of the given pipes, allocated as the library's TPipe does.
  std::uint32_t AllocEventID(pipe_t src, pipe_t dst, SourceLoc where = here());
  // Ascend C's forms: Alloc takes the next free id of the event's pipe pair; Fetch names it without taking it
  // (for a set/wait pair used at once); Release gives back the most recently allocated id.
  template <HardEvent e>
  std::uint32_t AllocEventID(SourceLoc where = here()) {
    return AllocEventID(event_pipes(e).src, event_pipes(e).dst, where);
  }
  std::uint32_t FetchEventID(HardEvent e, SourceLoc where = here());
  template <HardEvent e>
  std::uint32_t FetchEventID(SourceLoc where = here()) {
    return FetchEventID(e, where);
  }
  template <HardEvent e>
  void ReleaseEventID(std::uint32_t id, SourceLoc where = here()) {
    release_event(event_pipes(e).src, event_pipes(e).dst, id, where);
  }

 private:
  std::uint64_t allocate(hw::isa::Space s, std::uint64_t bytes, SourceLoc where);
  void release_event(pipe_t src, pipe_t dst, std::uint32_t id, SourceLoc where);
};

// --- Block and core queries ---------------------------------------------------------------------------------------
std::uint32_t GetBlockIdx();
std::uint32_t GetBlockNum();
std::uint32_t GetSubBlockIdx();
std::uint32_t GetSubBlockNum();
bool IsAic();  // the core is a cube core (AIC) of a split chip
bool IsAiv();  // the core has a Vector unit only
// Scalar work the kernel wants accounted (e.g. a loop's address arithmetic): `cycles` of the scalar unit.
void ScalarWork(std::uint64_t cycles);

// --- Synchronisation ----------------------------------------------------------------------------------------------
void set_flag(pipe_t src, pipe_t dst, std::uint32_t id, SourceLoc where = here());
void wait_flag(pipe_t src, pipe_t dst, std::uint32_t id, SourceLoc where = here());
template <HardEvent e>
void SetFlag(std::uint32_t id, SourceLoc where = here()) {
  set_flag(event_pipes(e).src, event_pipes(e).dst, id, where);
}
template <HardEvent e>
void WaitFlag(std::uint32_t id, SourceLoc where = here()) {
  wait_flag(event_pipes(e).src, event_pipes(e).dst, id, where);
}
void pipe_barrier(pipe_t p, SourceLoc where = here());
template <pipe_t p>
void PipeBarrier(SourceLoc where = here()) {
  pipe_barrier(p, where);
}
void cross_core_set_flag(std::uint32_t mode, pipe_t pipe, std::uint32_t id, SourceLoc where = here());
// pipe = PIPE_ALL: the scalar unit waits (nothing later is issued before the count arrives).
void cross_core_wait_flag(std::uint32_t id, pipe_t pipe = PIPE_ALL, SourceLoc where = here());
template <std::uint8_t mode, pipe_t pipe>
void CrossCoreSetFlag(std::uint16_t id, SourceLoc where = here()) {
  cross_core_set_flag(mode, pipe, id, where);
}
inline void CrossCoreWaitFlag(std::uint16_t id, SourceLoc where = here()) { cross_core_wait_flag(id, PIPE_ALL, where); }

// --- Data movement ------------------------------------------------------------------------------------------------
struct DataCopyParams {  // 32 B units
  std::uint16_t blockCount = 1;
  std::uint16_t blockLen = 0;
  std::uint16_t srcStride = 0;
  std::uint16_t dstStride = 0;
};
struct DataCopyExtParams {  // blockLen in bytes; GM-side stride in bytes, UB-side stride in 32 B blocks
  std::uint16_t blockCount = 1;
  std::uint32_t blockLen = 0;
  std::uint32_t srcStride = 0;
  std::uint32_t dstStride = 0;
  std::uint32_t rsv = 0;  // reserved, as in Ascend C
};
template <class T>
struct DataCopyPadExtParams {
  bool isPad = false;
  std::uint8_t leftPadding = 0;
  std::uint8_t rightPadding = 0;
  T paddingValue{};
};
struct Nd2NzParams {
  std::uint16_t ndNum = 1;
  std::uint16_t nValue = 0;          // rows
  std::uint16_t dValue = 0;          // columns (elements)
  std::uint16_t srcNdMatrixStride = 0;
  std::uint16_t srcDValue = 0;       // GM row stride (elements)
  std::uint16_t dstNzC0Stride = 0;   // rows per column block in L1 (a multiple of 16, >= nValue)
  std::uint16_t dstNzNStride = 1;
  std::uint16_t dstNzMatrixStride = 0;
};
struct LoadData2DParams {
  std::uint16_t startIndex = 0;  // first fractal
  std::uint8_t repeatTimes = 1;  // fractals to load
  std::uint16_t srcStride = 1;   // fractals between consecutive source fractals
  bool ifTranspose = false;
};
// LoadData 3D (img2col, L1 feature map in NC1HWC0 -> L0A), in the units of Ascend C's LoadData3DParamsV2: pixels
// for the map, the pads, strides and dilations; elements for channelSize and the K and M starts and extents.
// hw/isa/instr.hpp (Img2colArgs) defines the matrix it cuts from.
struct LoadData3DParams {
  std::array<std::uint8_t, 4> padList{};  // left, right, top, bottom
  std::uint16_t l1H = 0, l1W = 0, channelSize = 0;
  std::uint16_t kExtension = 0, mExtension = 0, kStartPt = 0, mStartPt = 0;
  std::uint8_t strideW = 1, strideH = 1;
  std::uint16_t filterW = 1, filterH = 1;  // Ascend C: filterW + 256 x filterSizeW
  std::uint8_t dilationFilterW = 1, dilationFilterH = 1;
  std::uint64_t padValue = 0;  // bit pattern of one element
};
struct MmadParams {
  std::uint16_t m = 0, n = 0, k = 0;
  bool cmatrixInitVal = true;  // true: C = A*B (+bias); false: C += A*B
  bool isBias = false;
};
struct FixpipeParams {
  std::uint16_t nSize = 0, mSize = 0;
  std::uint16_t srcStride = 0;  // L0C rows per column block (ceil16(mSize))
  std::uint32_t dstStride = 0;  // GM row stride in elements
  bool reluEn = false;
};

namespace detail {
void issue(hw::isa::Instr in);
hw::isa::Instr copy_instr(hw::isa::Space dst_space, std::uint64_t dst, hw::isa::Space src_space, std::uint64_t src,
                          std::uint32_t nburst, std::uint32_t burst_bytes, std::uint32_t src_gap,
                          std::uint32_t dst_gap, SourceLoc where);
[[noreturn]] void bad_param(const std::string& api, const std::string& what, SourceLoc where);
// LoadData 3D's instruction after checking its parameters against what the hardware takes.
hw::isa::Instr load3d_instr(hw::isa::Space dst_space, std::uint64_t dst, hw::isa::Space src_space, std::uint64_t src,
                            hw::isa::DType t, const LoadData3DParams& p, SourceLoc where);
// For --sanitize: the most recent set of this flag is left set at the kernel's end by design (a buffer's last
// "free" that nothing needs to wait for). No instruction; never throws.
void expect_left_set(pipe_t src, pipe_t dst, std::uint32_t id) noexcept;
}  // namespace detail

// GM -> UB/L1, contiguous `count` elements (count x sizeof(T) must be a multiple of 32 B).
template <class T>
void DataCopy(const LocalTensor<T>& dst, const GlobalTensor<T>& src, std::uint64_t count, SourceLoc where = here()) {
  if ((count * sizeof(T)) % 32 != 0) detail::bad_param("DataCopy", "count x element size must be a multiple of 32 B (use DataCopyPad)", where);
  detail::issue(detail::copy_instr(dst.space(), dst.address(), hw::isa::Space::kGm, src.address(), 1,
                                   static_cast<std::uint32_t>(count * sizeof(T)), 0, 0, where));
}
// UB -> GM, contiguous.
template <class T>
void DataCopy(const GlobalTensor<T>& dst, const LocalTensor<T>& src, std::uint64_t count, SourceLoc where = here()) {
  if ((count * sizeof(T)) % 32 != 0) detail::bad_param("DataCopy", "count x element size must be a multiple of 32 B (use DataCopyPad)", where);
  detail::issue(detail::copy_instr(hw::isa::Space::kGm, dst.address(), src.space(), src.address(), 1,
                                   static_cast<std::uint32_t>(count * sizeof(T)), 0, 0, where));
}
// Local -> local (L1 -> UB, UB -> L1), contiguous.
template <class T>
void DataCopy(const LocalTensor<T>& dst, const LocalTensor<T>& src, std::uint64_t count, SourceLoc where = here()) {
  if ((count * sizeof(T)) % 32 != 0) detail::bad_param("DataCopy", "count x element size must be a multiple of 32 B", where);
  hw::isa::Instr in = detail::copy_instr(dst.space(), dst.address(), src.space(), src.address(), 1,
                                         static_cast<std::uint32_t>(count * sizeof(T)), 0, 0, where);
  if (src.space() == hw::isa::Space::kL0C) in.op = hw::isa::Op::kCopyL0cToUb;
  detail::issue(in);
}
// Strided bursts (units of 32 B).
template <class T>
void DataCopy(const LocalTensor<T>& dst, const GlobalTensor<T>& src, const DataCopyParams& p, SourceLoc where = here()) {
  detail::issue(detail::copy_instr(dst.space(), dst.address(), hw::isa::Space::kGm, src.address(), p.blockCount,
                                   p.blockLen * 32u, p.srcStride * 32u, p.dstStride * 32u, where));
}
template <class T>
void DataCopy(const GlobalTensor<T>& dst, const LocalTensor<T>& src, const DataCopyParams& p, SourceLoc where = here()) {
  detail::issue(detail::copy_instr(hw::isa::Space::kGm, dst.address(), src.space(), src.address(), p.blockCount,
                                   p.blockLen * 32u, p.srcStride * 32u, p.dstStride * 32u, where));
}
// GM ND -> L1 NZ.
template <class T>
void DataCopy(const LocalTensor<T>& dst, const GlobalTensor<T>& src, const Nd2NzParams& p, SourceLoc where = here()) {
  if (p.ndNum != 1) detail::bad_param("DataCopy(Nd2Nz)", "ndNum must be 1", where);
  if (p.dstNzC0Stride % 16 != 0 || p.dstNzC0Stride < p.nValue)
    detail::bad_param("DataCopy(Nd2Nz)", "dstNzC0Stride must be a multiple of 16 and at least nValue", where);
  if (p.srcDValue < p.dValue) detail::bad_param("DataCopy(Nd2Nz)", "srcDValue must be at least dValue", where);
  hw::isa::Instr in;
  in.op = hw::isa::Op::kCopyNd2Nz;
  in.dtype = dtype_of<T>();
  in.dst_space = dst.space();
  in.src_space = hw::isa::Space::kGm;
  in.dst = dst.address();
  in.src0 = src.address();
  in.copy.rows = p.nValue;
  in.copy.cols = p.dValue;
  in.copy.src_row_stride = p.srcDValue;
  in.copy.dst_rows = p.dstNzC0Stride;
  in.where = where;
  detail::issue(in);
}
// GM -> UB with byte-granular bursts, each padded to 32 B in UB.
template <class T>
void DataCopyPad(const LocalTensor<T>& dst, const GlobalTensor<T>& src, const DataCopyExtParams& p,
                 const DataCopyPadExtParams<T>& pad, SourceLoc where = here()) {
  if (p.blockLen % sizeof(T) != 0) detail::bad_param("DataCopyPad", "blockLen must be a whole number of elements", where);
  hw::isa::Instr in = detail::copy_instr(dst.space(), dst.address(), hw::isa::Space::kGm, src.address(), p.blockCount,
                                         p.blockLen, p.srcStride, p.dstStride * 32u, where);
  in.op = hw::isa::Op::kCopyPad;
  in.copy.elem_bytes = sizeof(T);
  if (pad.isPad) {
    in.copy.left_pad = pad.leftPadding;
    in.copy.right_pad = pad.rightPadding;
    std::memcpy(&in.copy.pad_value, &pad.paddingValue, sizeof(T));
  }
  detail::issue(in);
}
// UB -> GM with byte-granular bursts (UB bursts start 32 B-aligned).
template <class T>
void DataCopyPad(const GlobalTensor<T>& dst, const LocalTensor<T>& src, const DataCopyExtParams& p, SourceLoc where = here()) {
  hw::isa::Instr in = detail::copy_instr(hw::isa::Space::kGm, dst.address(), src.space(), src.address(), p.blockCount,
                                         p.blockLen, p.srcStride * 32u, p.dstStride, where);
  in.op = hw::isa::Op::kCopyPad;
  in.copy.elem_bytes = sizeof(T);
  detail::issue(in);
}

// L1 -> L0A/L0B fractal load.
template <class T>
void LoadData(const LocalTensor<T>& dst, const LocalTensor<T>& src, const LoadData2DParams& p, SourceLoc where = here()) {
  hw::isa::Instr in;
  in.op = hw::isa::Op::kLoad2d;
  in.dtype = dtype_of<T>();
  in.dst_space = dst.space();
  in.src_space = src.space();
  in.dst = dst.address();
  in.src0 = src.address() + static_cast<std::uint64_t>(p.startIndex) * 512;
  in.copy.repeat = p.repeatTimes;
  in.copy.src_stride = static_cast<std::uint32_t>(p.srcStride) * 512;
  in.copy.transpose = p.ifTranspose;
  in.where = where;
  detail::issue(in);
}

// L1 feature map -> L0A, img2col on the fly (MTE1).
template <class T>
void LoadData(const LocalTensor<T>& dst, const LocalTensor<T>& src, const LoadData3DParams& p,
              SourceLoc where = here()) {
  detail::issue(detail::load3d_instr(dst.space(), dst.address(), src.space(), src.address(), dtype_of<T>(), p, where));
}

// L1 -> bias table (C2): `count` bias values converted to fp32 (MTE1).
template <class T>
void DataCopyBias(const LocalTensor<float>& dst, const LocalTensor<T>& src, std::uint32_t count, SourceLoc where = here()) {
  if (dst.space() != hw::isa::Space::kBiasTable || src.space() != hw::isa::Space::kL1)
    detail::bad_param("DataCopyBias", "copies from L1 to the bias table", where);
  hw::isa::Instr in;
  in.op = hw::isa::Op::kLoadBias;
  in.dtype = hw::isa::DType::kFp32;
  in.src_dtype = dtype_of<T>();
  in.dst_space = dst.space();
  in.src_space = src.space();
  in.dst = dst.address();
  in.src0 = src.address();
  in.copy.cols = count;
  in.where = where;
  detail::issue(in);
}

namespace detail {
// The Cube and FixPipe instructions shared by the overloads below; the operand spaces are checked here because
// the instruction names its spaces by role (a LocalTensor in the wrong buffer would otherwise be read as L0A).
template <class Acc, class In>
hw::isa::Instr mmad_instr(const LocalTensor<Acc>& c, const LocalTensor<In>& a, const LocalTensor<In>& b,
                          const MmadParams& p, SourceLoc where) {
  if (c.space() != hw::isa::Space::kL0C || a.space() != hw::isa::Space::kL0A || b.space() != hw::isa::Space::kL0B)
    bad_param("Mmad", "operands must be in L0C, L0A and L0B", where);
  hw::isa::Instr in;
  in.op = hw::isa::Op::kMmad;
  in.dtype = dtype_of<Acc>();
  in.src_dtype = dtype_of<In>();
  in.dst_space = hw::isa::Space::kL0C;
  in.dst = c.address();
  in.src0 = a.address();
  in.src1 = b.address();
  in.cube.m = p.m;
  in.cube.k = p.k;
  in.cube.n = p.n;
  in.cube.init = p.cmatrixInitVal;
  in.where = where;
  return in;
}
template <class T, class Acc>
hw::isa::Instr fixpipe_instr(hw::isa::Space dst_space, std::uint64_t dst, const LocalTensor<Acc>& src,
                             const FixpipeParams& p, SourceLoc where) {
  if (src.space() != hw::isa::Space::kL0C) bad_param("Fixpipe", "the source must be in L0C", where);
  if (p.srcStride % 16 != 0 || p.srcStride < p.mSize)
    bad_param("Fixpipe", "srcStride must be a multiple of 16 and at least mSize", where);
  hw::isa::Instr in;
  in.op = hw::isa::Op::kFixpipe;
  in.dtype = dtype_of<T>();
  in.src_dtype = dtype_of<Acc>();
  in.dst_space = dst_space;
  in.src_space = hw::isa::Space::kL0C;
  in.dst = dst;
  in.src0 = src.address();
  in.cube.m = p.mSize;
  in.cube.n = p.nSize;
  in.cube.src_rows = p.srcStride;
  in.cube.relu = p.reluEn;
  in.where = where;
  return in;
}
}  // namespace detail

template <class Acc, class In>
void Mmad(const LocalTensor<Acc>& c, const LocalTensor<In>& a, const LocalTensor<In>& b, const MmadParams& p,
          SourceLoc where = here()) {
  detail::issue(detail::mmad_instr(c, a, b, p, where));
}
// With a bias row (n values in the bias table): C = A*B + bias.
template <class Acc, class In>
void Mmad(const LocalTensor<Acc>& c, const LocalTensor<In>& a, const LocalTensor<In>& b, const LocalTensor<Acc>& bias,
          const MmadParams& p, SourceLoc where = here()) {
  if (bias.space() != hw::isa::Space::kBiasTable) detail::bad_param("Mmad", "the bias must be in the bias table", where);
  hw::isa::Instr in = detail::mmad_instr(c, a, b, p, where);
  in.cube.init = true;
  in.cube.has_bias = true;
  in.cube.bias = bias.address();
  detail::issue(in);
}

// L0C -> GM (NZ -> ND) with conversion to T and optional ReLU.
template <class T, class Acc>
void Fixpipe(const GlobalTensor<T>& dst, const LocalTensor<Acc>& src, const FixpipeParams& p, SourceLoc where = here()) {
  if (p.dstStride < p.nSize) detail::bad_param("Fixpipe", "dstStride must be at least nSize", where);
  hw::isa::Instr in = detail::fixpipe_instr<T>(hw::isa::Space::kGm, dst.address(), src, p, where);
  in.cube.dst_row_stride = p.dstStride;
  detail::issue(in);
}
// L0C -> L1 (NZ of T).
template <class T, class Acc>
void Fixpipe(const LocalTensor<T>& dst, const LocalTensor<Acc>& src, const FixpipeParams& p, SourceLoc where = here()) {
  hw::isa::Instr in = detail::fixpipe_instr<T>(dst.space(), dst.address(), src, p, where);
  in.cube.nz_out = true;
  detail::issue(in);
}

}  // namespace npusim::fw::kernel
// NOLINTEND(readability-identifier-naming)

#include "firmware/kernel/vector_api.hpp"
