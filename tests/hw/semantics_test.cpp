// Functional semantics of the ISA against plain CPU references: bit-exact for integer ops, casts and fp
// add/sub/mul/div/max/min (the reference for fp16 is the compiler's _Float16 arithmetic); within 1 ulp for the
// transcendental ones (reference: double precision, rounded once).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "common/util/error.hpp"
#include "hw/isa/semantics.hpp"
#include "hw/mem/device_memory.hpp"

namespace npusim::hw::isa {
namespace {

class TestMemory final : public MemoryView {
 public:
  TestMemory() : gm(1 << 24) {
    for (auto& b : local_) b.assign(256 * 1024, 0);
  }
  std::uint8_t* local(Space s, std::uint64_t addr, std::uint64_t) override {
    return local_[static_cast<int>(s)].data() + addr;
  }
  void gm_read(std::uint64_t addr, void* out, std::uint64_t bytes) override { gm.read(addr, out, bytes); }
  void gm_write(std::uint64_t addr, const void* in, std::uint64_t bytes) override { gm.write(addr, in, bytes); }
  template <class T>
  T* ub(std::uint64_t byte_addr = 0) {
    return reinterpret_cast<T*>(local(Space::kUb, byte_addr, 0));
  }
  mem::DeviceMemory gm;

 private:
  std::vector<std::uint8_t> local_[kSpaceCount];
};

_Float16 f16(Half h) {
  _Float16 f;
  std::memcpy(&f, &h.bits, 2);
  return f;
}
Half h16(_Float16 f) {
  Half h;
  std::memcpy(&h.bits, &f, 2);
  return h;
}
std::uint16_t bits(_Float16 f) { return h16(f).bits; }

Instr vec(Op op, DType t, std::uint64_t dst, std::uint64_t a, std::uint64_t b, std::uint32_t repeat) {
  Instr in;
  in.op = op;
  in.dtype = in.src_dtype = t;
  in.vec.dst.addr = dst;
  in.vec.src0.addr = a;
  in.vec.src1.addr = b;
  in.vec.repeat = repeat;
  return in;
}

std::vector<Half> random_halves(std::size_t n, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<Half> v(n);
  for (auto& h : v) {
    // Any finite bit pattern, plus some specials.
    do {
      h.bits = static_cast<std::uint16_t>(rng());
    } while ((h.bits & 0x7c00) == 0x7c00 && rng() % 8);
  }
  return v;
}

// Distance in ulps between two finite floats of the same sign family.
std::int64_t ulp_distance(float a, float b) {
  auto key = [](float f) {
    std::int32_t i;
    std::memcpy(&i, &f, 4);
    return i < 0 ? static_cast<std::int64_t>(INT32_MIN) - i : static_cast<std::int64_t>(i);
  };
  return std::llabs(key(a) - key(b));
}
std::int64_t ulp_distance(Half a, Half b) {
  auto key = [](Half h) {
    const std::int32_t i = h.bits;
    return (i & 0x8000) ? -(i & 0x7fff) : i;
  };
  return std::llabs(key(a) - key(b));
}

TEST(VectorSemantics, Fp16BinaryOpsAreBitExactAgainstFloat16Arithmetic) {
  for (Op op : {Op::kAdd, Op::kSub, Op::kMul, Op::kDiv, Op::kMax, Op::kMin}) {
    TestMemory m;
    const auto a = random_halves(128 * 4, 1), b = random_halves(128 * 4, 2);
    std::memcpy(m.ub<Half>(0x1000), a.data(), a.size() * 2);
    std::memcpy(m.ub<Half>(0x2000), b.data(), b.size() * 2);
    execute(vec(op, DType::kFp16, 0x3000, 0x1000, 0x2000, 4), m);
    for (std::size_t i = 0; i < a.size(); ++i) {
      const _Float16 x = f16(a[i]), y = f16(b[i]);
      _Float16 want;
      switch (op) {
        case Op::kAdd: want = x + y; break;
        case Op::kSub: want = x - y; break;
        case Op::kMul: want = x * y; break;
        case Op::kDiv: want = x / y; break;
        case Op::kMax: want = (x != x || y != y) ? static_cast<_Float16>(NAN) : (x >= y ? x : y); break;
        default: want = (x != x || y != y) ? static_cast<_Float16>(NAN) : (x <= y ? x : y); break;
      }
      const Half got = m.ub<Half>(0x3000)[i];
      if (want != want) {
        EXPECT_TRUE(std::isnan(to_float(got))) << op_name(op) << " lane " << i;
      } else {
        ASSERT_EQ(got.bits, bits(want)) << op_name(op) << " lane " << i << ": " << static_cast<float>(x) << ", "
                                        << static_cast<float>(y);
      }
    }
  }
}

TEST(VectorSemantics, Fp32AndInt32BinaryOpsMatchCpp) {
  TestMemory m;
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> d(-1e6f, 1e6f);
  for (int i = 0; i < 64 * 2; ++i) {
    m.ub<float>(0)[i] = d(rng);
    m.ub<float>(0x1000)[i] = d(rng);
    m.ub<std::int32_t>(0x4000)[i] = static_cast<std::int32_t>(rng());
    m.ub<std::int32_t>(0x5000)[i] = static_cast<std::int32_t>(rng());
  }
  execute(vec(Op::kDiv, DType::kFp32, 0x2000, 0, 0x1000, 2), m);
  execute(vec(Op::kMul, DType::kInt32, 0x6000, 0x4000, 0x5000, 2), m);
  execute(vec(Op::kMax, DType::kInt32, 0x7000, 0x4000, 0x5000, 2), m);
  for (int i = 0; i < 128; ++i) {
    EXPECT_EQ(m.ub<float>(0x2000)[i], m.ub<float>(0)[i] / m.ub<float>(0x1000)[i]);
    const auto a = static_cast<std::uint32_t>(m.ub<std::int32_t>(0x4000)[i]);
    const auto b = static_cast<std::uint32_t>(m.ub<std::int32_t>(0x5000)[i]);
    EXPECT_EQ(static_cast<std::uint32_t>(m.ub<std::int32_t>(0x6000)[i]), a * b);  // wraps
    EXPECT_EQ(m.ub<std::int32_t>(0x7000)[i], std::max(m.ub<std::int32_t>(0x4000)[i], m.ub<std::int32_t>(0x5000)[i]));
  }
}

TEST(VectorSemantics, MaskAndStridesSelectLanesAndBlocks) {
  TestMemory m;
  for (int i = 0; i < 2048; ++i) m.ub<float>(0)[i] = static_cast<float>(i);
  Instr in = vec(Op::kAdds, DType::kFp32, 0x4000, 0, 0, 2);
  in.vec.scalar = 0.5;
  in.vec.mask.bits = {0x00000000ffff00f0ULL, 0};  // lanes 4..7 and 16..31
  in.vec.src0.blk_stride = 64;   // every other 32 B block
  in.vec.src0.rep_stride = 1024;
  in.vec.dst.rep_stride = 512;
  for (int i = 0; i < 512; ++i) m.ub<float>(0x4000)[i] = -1;
  execute(in, m);
  for (int r = 0; r < 2; ++r) {
    for (int l = 0; l < 64; ++l) {
      const bool on = in.vec.mask.test(l);
      const int lane = r * 256 + (l / 8) * 16 + l % 8;
      const float src = static_cast<float>(lane);
      EXPECT_EQ(m.ub<float>(0x4000)[r * 128 + l], on ? src + 0.5f : -1.0f) << r << "/" << l;
    }
  }
  EXPECT_EQ(Mask::count(70).bits[0], ~0ULL);
  EXPECT_EQ(Mask::count(70).bits[1], 0x3fULL);
}

TEST(VectorSemantics, ScalarFormsConvertTheScalarToTheElementType) {
  TestMemory m;
  for (int i = 0; i < 128; ++i) m.ub<Half>(0)[i] = to_half(static_cast<float>(i) - 64);
  Instr in = vec(Op::kMuls, DType::kFp16, 0x200, 0, 0, 1);
  in.vec.scalar = 0.1;  // rounds to the fp16 nearest 0.1 first
  execute(in, m);
  in.op = Op::kMaxs;
  in.vec.scalar = 3;
  in.vec.dst.addr = 0x400;
  execute(in, m);
  in.op = Op::kMins;
  in.vec.dst.addr = 0x600;
  execute(in, m);
  for (int i = 0; i < 128; ++i) {
    const _Float16 x = static_cast<_Float16>(i - 64);
    EXPECT_EQ(m.ub<Half>(0x200)[i].bits, bits(x * static_cast<_Float16>(0.1f)));
    EXPECT_EQ(to_float(m.ub<Half>(0x400)[i]), std::max(static_cast<float>(x), 3.0f));
    EXPECT_EQ(to_float(m.ub<Half>(0x600)[i]), std::min(static_cast<float>(x), 3.0f));
  }
}

TEST(VectorSemantics, TranscendentalsAreWithinOneUlp) {
  TestMemory m;
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> pos(0.01f, 10.0f), any(-10.0f, 10.0f);
  for (int i = 0; i < 64; ++i) {
    m.ub<float>(0)[i] = pos(rng);
    m.ub<float>(0x100)[i] = any(rng);
  }
  for (int i = 0; i < 128; ++i) m.ub<Half>(0x200)[i] = to_half(pos(rng));
  struct Case {
    Op op;
    double (*ref)(double);
  };
  const Case cases[] = {{Op::kExp, [](double x) { return std::exp(x); }},
                        {Op::kLn, [](double x) { return std::log(x); }},
                        {Op::kSqrt, [](double x) { return std::sqrt(x); }},
                        {Op::kRsqrt, [](double x) { return 1 / std::sqrt(x); }},
                        {Op::kReciprocal, [](double x) { return 1 / x; }}};
  for (const Case& c : cases) {
    execute(vec(c.op, DType::kFp32, 0x1000, 0, 0, 1), m);
    execute(vec(c.op, DType::kFp16, 0x2000, 0x200, 0, 1), m);
    for (int i = 0; i < 64; ++i) {
      const float want = static_cast<float>(c.ref(m.ub<float>(0)[i]));
      EXPECT_LE(ulp_distance(m.ub<float>(0x1000)[i], want), 1) << op_name(c.op) << " fp32 " << m.ub<float>(0)[i];
    }
    for (int i = 0; i < 128; ++i) {
      const Half want = to_half(static_cast<float>(c.ref(to_float(m.ub<Half>(0x200)[i]))));
      EXPECT_LE(ulp_distance(m.ub<Half>(0x2000)[i], want), 1) << op_name(c.op) << " fp16";
    }
  }
  // sqrt is exact: correctly rounded.
  execute(vec(Op::kSqrt, DType::kFp32, 0x1000, 0, 0, 1), m);
  for (int i = 0; i < 64; ++i) EXPECT_EQ(m.ub<float>(0x1000)[i], std::sqrt(m.ub<float>(0)[i]));
  execute(vec(Op::kAbs, DType::kFp32, 0x1000, 0x100, 0, 1), m);
  execute(vec(Op::kRelu, DType::kFp32, 0x1100, 0x100, 0, 1), m);
  for (int i = 0; i < 64; ++i) {
    EXPECT_EQ(m.ub<float>(0x1000)[i], std::fabs(m.ub<float>(0x100)[i]));
    EXPECT_EQ(m.ub<float>(0x1100)[i], std::max(m.ub<float>(0x100)[i], 0.0f));
  }
}

TEST(VectorSemantics, CastsRoundAsTheModeSays) {
  TestMemory m;
  std::mt19937 rng(9);
  std::uniform_real_distribution<float> d(-1000.0f, 1000.0f);
  for (int i = 0; i < 64; ++i) m.ub<float>(0)[i] = d(rng);
  m.ub<float>(0)[0] = 2.5f;
  m.ub<float>(0)[1] = -2.5f;
  const std::pair<Round, double (*)(double)> modes[] = {
      {Round::kFloor, [](double x) { return std::floor(x); }},
      {Round::kCeil, [](double x) { return std::ceil(x); }},
      {Round::kTowardZero, [](double x) { return std::trunc(x); }},
      {Round::kNearestAway, [](double x) { return std::round(x); }},
      {Round::kNearestEven, [](double x) { return std::nearbyint(x); }}};
  for (const auto& [mode, ref] : modes) {
    Instr in = vec(Op::kCast, DType::kInt32, 0x1000, 0, 0, 1);
    in.src_dtype = DType::kFp32;
    in.vec.round = mode;
    execute(in, m);
    for (int i = 0; i < 64; ++i)
      EXPECT_EQ(m.ub<std::int32_t>(0x1000)[i], static_cast<std::int32_t>(ref(m.ub<float>(0)[i]))) << m.ub<float>(0)[i];
  }
  // fp32 -> fp16 (round to nearest even) against the compiler's conversion; fp16 -> fp32 is exact.
  Instr down = vec(Op::kCast, DType::kFp16, 0x2000, 0, 0, 1);
  down.src_dtype = DType::kFp32;
  execute(down, m);
  Instr up = vec(Op::kCast, DType::kFp32, 0x3000, 0x2000, 0, 1);
  up.src_dtype = DType::kFp16;
  execute(up, m);
  for (int i = 0; i < 64; ++i) {
    EXPECT_EQ(m.ub<Half>(0x2000)[i].bits, bits(static_cast<_Float16>(m.ub<float>(0)[i])));
    EXPECT_EQ(m.ub<float>(0x3000)[i], static_cast<float>(static_cast<_Float16>(m.ub<float>(0)[i])));
  }
  // int32 -> fp32 rounds large values; toward zero differs from nearest.
  m.ub<std::int32_t>(0x4000)[0] = 16777217;  // 2^24 + 1
  Instr i2f = vec(Op::kCast, DType::kFp32, 0x5000, 0x4000, 0, 1);
  i2f.src_dtype = DType::kInt32;
  i2f.vec.mask = Mask::count(1);
  i2f.vec.round = Round::kCeil;
  execute(i2f, m);
  EXPECT_EQ(m.ub<float>(0x5000)[0], 16777218.0f);
  // int8 -> fp16 is exact.
  m.ub<std::int8_t>(0x6000)[0] = -128;
  Instr b2h = vec(Op::kCast, DType::kFp16, 0x7000, 0x6000, 0, 1);
  b2h.src_dtype = DType::kInt8;
  b2h.vec.mask = Mask::count(1);
  execute(b2h, m);
  EXPECT_EQ(to_float(m.ub<Half>(0x7000)[0]), -128.0f);
}

TEST(VectorSemantics, DuplicateReductionsCompareSelectTranspose) {
  TestMemory m;
  Instr dup = vec(Op::kDuplicate, DType::kFp32, 0, 0, 0, 2);
  dup.vec.scalar = 1.25;
  execute(dup, m);
  for (int i = 0; i < 128; ++i) EXPECT_EQ(m.ub<float>(0)[i], 1.25f);

  std::mt19937 rng(11);
  std::uniform_real_distribution<float> d(-1.0f, 1.0f);
  for (int i = 0; i < 192; ++i) m.ub<float>(0x1000)[i] = d(rng);
  for (Op op : {Op::kReduceSum, Op::kReduceMax, Op::kReduceMin}) {
    Instr r = vec(op, DType::kFp32, 0x2000, 0x1000, 0, 3);
    r.vec.dst_rep_elems = 2;
    execute(r, m);
    for (int rep = 0; rep < 3; ++rep) {
      double sum = 0;
      float mx = -INFINITY, mn = INFINITY;
      for (int l = 0; l < 64; ++l) {
        const float x = m.ub<float>(0x1000)[rep * 64 + l];
        sum += x;
        mx = std::max(mx, x);
        mn = std::min(mn, x);
      }
      const float got = m.ub<float>(0x2000)[rep * 2];
      if (op == Op::kReduceSum) {
        EXPECT_NEAR(got, sum, 1e-5);
      } else if (op == Op::kReduceMax) {
        EXPECT_EQ(got, mx);
      } else {
        EXPECT_EQ(got, mn);
      }
    }
  }
  Instr br = vec(Op::kBlockReduceMax, DType::kFp32, 0x3000, 0x1000, 0, 2);
  br.vec.dst_rep_elems = 8;
  execute(br, m);
  for (int b = 0; b < 16; ++b) {
    float mx = -INFINITY;
    for (int l = 0; l < 8; ++l) mx = std::max(mx, m.ub<float>(0x1000)[b * 8 + l]);
    EXPECT_EQ(m.ub<float>(0x3000)[b], mx);
  }

  // Compare a < b into bits, then select a where set, b elsewhere: min(a, b).
  for (int i = 0; i < 64; ++i) m.ub<float>(0x4000)[i] = d(rng);
  Instr cmp = vec(Op::kCompare, DType::kFp32, 0x5000, 0x1000, 0x4000, 1);
  cmp.vec.cmp = CmpMode::kLt;
  execute(cmp, m);
  Instr sel = vec(Op::kSelect, DType::kFp32, 0x6000, 0x1000, 0x4000, 1);
  sel.src1 = 0x5000;
  execute(sel, m);
  for (int i = 0; i < 64; ++i) {
    const float a = m.ub<float>(0x1000)[i], b = m.ub<float>(0x4000)[i];
    EXPECT_EQ(((m.ub<std::uint8_t>(0x5000)[i / 8] >> (i % 8)) & 1) != 0, a < b);
    EXPECT_EQ(m.ub<float>(0x6000)[i], std::min(a, b));
  }

  for (int i = 0; i < 256; ++i) m.ub<Half>(0x7000)[i].bits = static_cast<std::uint16_t>(i);
  execute(vec(Op::kTranspose, DType::kFp16, 0x8000, 0x7000, 0, 1), m);
  for (int r = 0; r < 16; ++r)
    for (int c = 0; c < 16; ++c) EXPECT_EQ(m.ub<Half>(0x8000)[r * 16 + c].bits, c * 16 + r);
}

TEST(CopySemantics, BurstsWithGapsPaddedCopiesAndNd2Nz) {
  TestMemory m;
  std::vector<std::uint8_t> src(4096);
  for (std::size_t i = 0; i < src.size(); ++i) src[i] = static_cast<std::uint8_t>(i * 7);
  m.gm.write(0x10000, src.data(), src.size());
  Instr c;
  c.op = Op::kCopy;
  c.src_space = Space::kGm;
  c.dst_space = Space::kUb;
  c.src0 = 0x10000;
  c.dst = 0x100;
  c.copy.nburst = 3;
  c.copy.burst_bytes = 64;
  c.copy.src_gap = 32;
  c.copy.dst_gap = 96;
  execute(c, m);
  for (int b = 0; b < 3; ++b)
    for (int i = 0; i < 64; ++i) ASSERT_EQ(m.ub<std::uint8_t>(0x100 + b * 160)[i], src[b * 96 + i]);
  const AccessList acc = accesses(c);
  ASSERT_EQ(acc.count, 2);
  EXPECT_EQ(acc.items[0].bytes, 3u * 64 + 2 * 32);
  EXPECT_EQ(acc.items[1].bytes, 3u * 64 + 2 * 96);

  // Padded GM -> UB: 10 fp16 elements per burst, 2 pad elements before, rest of the 32 B burst padded.
  Instr p;
  p.op = Op::kCopyPad;
  p.src_space = Space::kGm;
  p.dst_space = Space::kUb;
  p.src0 = 0x10000;
  p.dst = 0x2000;
  p.copy.nburst = 2;
  p.copy.burst_bytes = 20;
  p.copy.src_gap = 6;
  p.copy.left_pad = 2;
  p.copy.elem_bytes = 2;
  p.copy.pad_value = 0xabcd;
  execute(p, m);
  for (int b = 0; b < 2; ++b) {
    const auto* u = m.ub<std::uint16_t>(0x2000 + b * 32);
    EXPECT_EQ(u[0], 0xabcd);
    EXPECT_EQ(u[1], 0xabcd);
    for (int i = 0; i < 10; ++i) EXPECT_EQ(std::memcmp(&u[2 + i], &src[b * 26 + i * 2], 2), 0);
    for (int i = 12; i < 16; ++i) EXPECT_EQ(u[i], 0xabcd);
  }
  // UB -> GM with byte bursts.
  Instr q;
  q.op = Op::kCopyPad;
  q.src_space = Space::kUb;
  q.dst_space = Space::kGm;
  q.src0 = 0x100;
  q.dst = 0x20000;
  q.copy.nburst = 2;
  q.copy.burst_bytes = 40;  // UB bursts at 0x100 and 0x140 (40 B rounded up to 64 B)
  q.copy.dst_gap = 1;
  execute(q, m);
  std::vector<std::uint8_t> out(81);
  m.gm.read(0x20000, out.data(), out.size());
  for (int i = 0; i < 40; ++i) {
    EXPECT_EQ(out[i], m.ub<std::uint8_t>(0x100)[i]);
    EXPECT_EQ(out[41 + i], m.ub<std::uint8_t>(0x140)[i]);
  }

  // ND (20 x 24 fp16, row stride 32) -> NZ with 32 rows per column block.
  std::vector<Half> nd(20 * 32);
  for (std::size_t i = 0; i < nd.size(); ++i) nd[i].bits = static_cast<std::uint16_t>(i);
  m.gm.write(0x30000, nd.data(), nd.size() * 2);
  Instr z;
  z.op = Op::kCopyNd2Nz;
  z.dtype = DType::kFp16;
  z.src_space = Space::kGm;
  z.dst_space = Space::kL1;
  z.src0 = 0x30000;
  z.dst = 0;
  z.copy.rows = 20;
  z.copy.cols = 24;
  z.copy.src_row_stride = 32;
  z.copy.dst_rows = 32;
  execute(z, m);
  const auto* l1 = reinterpret_cast<Half*>(m.local(Space::kL1, 0, 0));
  for (int r = 0; r < 20; ++r)
    for (int col = 0; col < 24; ++col)
      ASSERT_EQ(l1[((col / 16) * 32 + r) * 16 + col % 16].bits, r * 32 + col) << r << "," << col;
}

// Packs A (m x k) into the documented L0A layout and B (k x n) into the L0B layout.
template <class T>
std::vector<T> pack_l0a(const std::vector<T>& a, int m, int k) {
  const int k0 = 32 / sizeof(T), m1 = (m + 15) / 16, k1 = (k + k0 - 1) / k0;
  std::vector<T> out(static_cast<std::size_t>(m1) * k1 * 16 * k0);
  for (int r = 0; r < m; ++r)
    for (int c = 0; c < k; ++c) out[((r / 16) * k1 + c / k0) * 16 * k0 + (r % 16) * k0 + c % k0] = a[r * k + c];
  return out;
}
template <class T>
std::vector<T> pack_l0b(const std::vector<T>& b, int k, int n) {
  const int k0 = 32 / sizeof(T), n1 = (n + 15) / 16, k1 = (k + k0 - 1) / k0;
  std::vector<T> out(static_cast<std::size_t>(n1) * k1 * 16 * k0);
  for (int r = 0; r < k; ++r)
    for (int c = 0; c < n; ++c) out[((r / k0) * n1 + c / 16) * 16 * k0 + (c % 16) * k0 + r % k0] = b[r * n + c];
  return out;
}

TEST(CubeSemantics, Int8MmadIsExactAndAccumulates) {
  TestMemory m;
  const int M = 20, K = 40, N = 24;  // not multiples of the fractal
  std::mt19937 rng(13);
  std::vector<std::int8_t> a(M * K), b(K * N);
  for (auto& v : a) v = static_cast<std::int8_t>(rng());
  for (auto& v : b) v = static_cast<std::int8_t>(rng());
  const auto pa = pack_l0a(a, M, K), pb = pack_l0b(b, K, N);
  std::memcpy(m.local(Space::kL0A, 0, 0), pa.data(), pa.size());
  std::memcpy(m.local(Space::kL0B, 0, 0), pb.data(), pb.size());
  std::vector<std::int32_t> bias(N);
  for (int j = 0; j < N; ++j) bias[j] = j * 1000;
  std::memcpy(m.local(Space::kBiasTable, 0, 0), bias.data(), N * 4);
  Instr mm;
  mm.op = Op::kMmad;
  mm.dtype = DType::kInt32;
  mm.src_dtype = DType::kInt8;
  mm.cube = CubeArgs{};
  mm.cube.m = M;
  mm.cube.k = K;
  mm.cube.n = N;
  mm.cube.has_bias = true;
  execute(mm, m);
  mm.cube.init = false;  // C += A*B
  mm.cube.has_bias = false;
  execute(mm, m);
  const auto* c = reinterpret_cast<std::int32_t*>(m.local(Space::kL0C, 0, 0));
  for (int i = 0; i < M; ++i) {
    for (int j = 0; j < N; ++j) {
      std::int32_t want = bias[j];
      for (int k = 0; k < K; ++k) want += 2 * a[i * K + k] * b[k * N + j];
      ASSERT_EQ(c[l0c_index(i, j, 2)], want) << i << "," << j;
    }
  }
}

TEST(CubeSemantics, Fp16MmadAccumulatesInFp32AndFixpipeConvertsToNd) {
  TestMemory m;
  const int M = 32, K = 48, N = 16;
  std::mt19937 rng(17);
  std::uniform_real_distribution<float> d(-1.0f, 1.0f);
  std::vector<Half> a(M * K), b(K * N);
  for (auto& v : a) v = to_half(d(rng));
  for (auto& v : b) v = to_half(d(rng));
  const auto pa = pack_l0a(a, M, K), pb = pack_l0b(b, K, N);
  std::memcpy(m.local(Space::kL0A, 0, 0), pa.data(), pa.size() * 2);
  std::memcpy(m.local(Space::kL0B, 0, 0), pb.data(), pb.size() * 2);
  Instr mm;
  mm.op = Op::kMmad;
  mm.dtype = DType::kFp32;
  mm.src_dtype = DType::kFp16;
  mm.cube.m = M;
  mm.cube.k = K;
  mm.cube.n = N;
  execute(mm, m);
  Instr fx;
  fx.op = Op::kFixpipe;
  fx.dtype = DType::kFp16;
  fx.src_dtype = DType::kFp32;
  fx.dst_space = Space::kGm;
  fx.src_space = Space::kL0C;
  fx.dst = 0x1000;
  fx.cube.m = M;
  fx.cube.n = N;
  fx.cube.src_rows = 32;
  fx.cube.dst_row_stride = 20;
  fx.cube.relu = true;
  execute(fx, m);
  std::vector<Half> out(M * 20);
  m.gm.read(0x1000, out.data(), out.size() * 2);
  for (int i = 0; i < M; ++i) {
    for (int j = 0; j < N; ++j) {
      double want = 0;
      for (int k = 0; k < K; ++k) want += static_cast<double>(to_float(a[i * K + k])) * to_float(b[k * N + j]);
      want = std::max(want, 0.0);
      const float got = to_float(out[i * 20 + j]);
      EXPECT_NEAR(got, want, std::abs(want) * 1e-3 + 1e-4) << i << "," << j;
    }
  }
}

// img2col against the definition (the vendor's Load3D pseudocode): the map padded on all sides, output pixel m =
// ho x Wo + wo, column k = ((c1 x kh + i) x kw + j) x C0 + c0, rows cut as fractals of 16 x C0, m-major.
TEST(CubeSemantics, Load3dCutsTheImg2colMatrixOfAPaddedStridedDilatedMap) {
  TestMemory m;
  const std::uint32_t C = 32, H = 5, W = 7, kh = 3, kw = 2, sh = 2, sw = 1, dh = 1, dw = 2;
  const std::uint32_t pl = 1, pr = 0, pt = 1, pb = 2;
  auto* l1 = reinterpret_cast<std::uint16_t*>(m.local(Space::kL1, 0, 0));
  for (std::uint32_t i = 0; i < C * H * W; ++i) l1[i] = static_cast<std::uint16_t>(i + 1);  // NC1HWC0, no zeros
  Instr ld;
  ld.op = Op::kLoad3d;
  ld.dtype = ld.src_dtype = DType::kFp16;
  ld.src_space = Space::kL1;
  ld.dst_space = Space::kL0A;
  Img2colArgs& g = ld.img2col;
  g.l1_h = H;
  g.l1_w = W;
  g.channels = C;
  g.kh = kh;
  g.kw = kw;
  g.sh = sh;
  g.sw = sw;
  g.dh = dh;
  g.dw = dw;
  g.pad = {pl, pr, pt, pb};
  g.pad_value = 0xABCD;
  g.m_start = 3;
  g.m_ext = 20;  // 32 rows written
  g.k_start = 16;
  g.k_ext = 48;
  const std::uint32_t wo = (W + pl + pr - ((kw - 1) * dw + 1)) / sw + 1,
                      ho = (H + pt + pb - ((kh - 1) * dh + 1)) / sh + 1;
  ASSERT_EQ(wo, 6u);
  ASSERT_EQ(ho, 3u);  // 18 output pixels: rows 3..17 exist, 18..34 are past the map
  execute(ld, m);
  const auto* l0a = reinterpret_cast<const std::uint16_t*>(m.local(Space::kL0A, 0, 0));
  int pads = 0;
  for (std::uint32_t r = 0; r < 32; ++r) {
    for (std::uint32_t col = 0; col < 48; ++col) {
      const std::uint32_t mm = g.m_start + r, k = g.k_start + col;
      const std::uint32_t c1 = k / 16 / (kh * kw), i = k / 16 % (kh * kw) / kw, j = k / 16 % kw, c0 = k % 16;
      std::uint16_t want = 0xABCD;
      if (mm < ho * wo) {
        const int h = static_cast<int>(mm / wo * sh + i * dh) - static_cast<int>(pt);
        const int w = static_cast<int>(mm % wo * sw + j * dw) - static_cast<int>(pl);
        if (h >= 0 && h < static_cast<int>(H) && w >= 0 && w < static_cast<int>(W))
          want = l1[((c1 * H + static_cast<std::uint32_t>(h)) * W + static_cast<std::uint32_t>(w)) * 16 + c0];
      }
      pads += want == 0xABCD;
      EXPECT_EQ(l0a[((r / 16) * 3 + col / 16) * 256 + (r % 16) * 16 + col % 16], want) << r << "," << col;
    }
  }
  EXPECT_GT(pads, 17 * 48);  // the rows past the map and some padded taps were exercised
  EXPECT_EQ(payload_bytes(ld), 32u * 48u * 2u);
}

TEST(CubeSemantics, Load2dTransposesFractalsAndUnsupportedFormsAreErrors) {
  TestMemory m;
  auto* l1 = reinterpret_cast<std::uint16_t*>(m.local(Space::kL1, 0, 0));
  for (int i = 0; i < 512; ++i) l1[i] = static_cast<std::uint16_t>(i);
  Instr ld;
  ld.op = Op::kLoad2d;
  ld.dtype = DType::kFp16;
  ld.src_space = Space::kL1;
  ld.dst_space = Space::kL0B;
  ld.src0 = 512;  // the second fractal
  ld.copy.repeat = 1;
  ld.copy.transpose = true;
  execute(ld, m);
  const auto* l0b = reinterpret_cast<std::uint16_t*>(m.local(Space::kL0B, 0, 0));
  for (int r = 0; r < 16; ++r)
    for (int c = 0; c < 16; ++c) EXPECT_EQ(l0b[r * 16 + c], 256 + c * 16 + r);
  ld.dtype = DType::kInt8;
  EXPECT_THROW(execute(ld, m), InputError);
  Instr mm;
  mm.op = Op::kMmad;
  mm.dtype = DType::kFp32;
  mm.src_dtype = DType::kInt8;
  mm.cube.m = mm.cube.k = mm.cube.n = 16;
  EXPECT_THROW(execute(mm, m), InputError);
}

}  // namespace
}  // namespace npusim::hw::isa

namespace npusim::hw::isa {
namespace {

TEST(CubeSemantics, Bf16AndFp32MmadAndFixpipeToL1) {
  for (DType t : {DType::kBf16, DType::kFp32}) {
    TestMemory m;
    const int M = 16, K = 24, N = 32;
    std::mt19937 rng(19);
    std::uniform_int_distribution<int> d(-4, 4);  // small integers: every product and sum is exact in fp32
    std::vector<float> a(M * K), b(K * N);
    for (auto& v : a) v = static_cast<float>(d(rng));
    for (auto& v : b) v = static_cast<float>(d(rng));
    if (t == DType::kBf16) {
      std::vector<BFloat16> ab(a.size()), bb(b.size());
      for (std::size_t i = 0; i < a.size(); ++i) ab[i] = to_bf16(a[i]);
      for (std::size_t i = 0; i < b.size(); ++i) bb[i] = to_bf16(b[i]);
      const auto pa = pack_l0a(ab, M, K), pb = pack_l0b(bb, K, N);
      std::memcpy(m.local(Space::kL0A, 0, 0), pa.data(), pa.size() * 2);
      std::memcpy(m.local(Space::kL0B, 0, 0), pb.data(), pb.size() * 2);
    } else {
      const auto pa = pack_l0a(a, M, K), pb = pack_l0b(b, K, N);
      std::memcpy(m.local(Space::kL0A, 0, 0), pa.data(), pa.size() * 4);
      std::memcpy(m.local(Space::kL0B, 0, 0), pb.data(), pb.size() * 4);
    }
    Instr mm;
    mm.op = Op::kMmad;
    mm.dtype = DType::kFp32;
    mm.src_dtype = t;
    mm.cube.m = M;
    mm.cube.k = K;
    mm.cube.n = N;
    execute(mm, m);
    // FixPipe into L1 as NZ fp16 (c0 = 16), 16 rows per column block.
    Instr fx;
    fx.op = Op::kFixpipe;
    fx.dtype = DType::kFp16;
    fx.src_dtype = DType::kFp32;
    fx.src_space = Space::kL0C;
    fx.dst_space = Space::kL1;
    fx.cube.m = M;
    fx.cube.n = N;
    fx.cube.src_rows = 16;
    fx.cube.nz_out = true;
    execute(fx, m);
    const auto* l1 = reinterpret_cast<Half*>(m.local(Space::kL1, 0, 0));
    for (int i = 0; i < M; ++i) {
      for (int j = 0; j < N; ++j) {
        float want = 0;
        for (int k = 0; k < K; ++k) want += a[i * K + k] * b[k * N + j];
        ASSERT_EQ(to_float(l1[nz_index(i, j, 16, 16)]), want) << dtype_name(t) << " " << i << "," << j;
      }
    }
  }
}

TEST(CopySemantics, L0cToUbMovesFractalsUnchanged) {
  TestMemory m;
  auto* c = reinterpret_cast<float*>(m.local(Space::kL0C, 0, 0));
  for (int i = 0; i < 512; ++i) c[i] = static_cast<float>(i) * 0.25f;
  Instr in;
  in.op = Op::kCopyL0cToUb;
  in.src_space = Space::kL0C;
  in.dst_space = Space::kUb;
  in.dst = 0x400;
  in.copy.burst_bytes = 2048;
  execute(in, m);
  EXPECT_EQ(pipe_of(in), Pipe::kV);
  for (int i = 0; i < 512; ++i) EXPECT_EQ(m.ub<float>(0x400)[i], static_cast<float>(i) * 0.25f);
}

TEST(VectorSemantics, CompareModesIntegerOpsAndFp16Reductions) {
  TestMemory m;
  for (int i = 0; i < 64; ++i) {
    m.ub<float>(0)[i] = static_cast<float>(i % 5);
    m.ub<float>(0x100)[i] = 2.0f;
  }
  const std::pair<CmpMode, bool (*)(float, float)> modes[] = {
      {CmpMode::kLt, [](float a, float b) { return a < b; }}, {CmpMode::kGt, [](float a, float b) { return a > b; }},
      {CmpMode::kEq, [](float a, float b) { return a == b; }}, {CmpMode::kLe, [](float a, float b) { return a <= b; }},
      {CmpMode::kGe, [](float a, float b) { return a >= b; }}, {CmpMode::kNe, [](float a, float b) { return a != b; }}};
  for (const auto& [mode, ref] : modes) {
    Instr cmp = vec(Op::kCompare, DType::kFp32, 0x1000, 0, 0x100, 1);
    cmp.vec.cmp = mode;
    execute(cmp, m);
    for (int i = 0; i < 64; ++i)
      EXPECT_EQ(((m.ub<std::uint8_t>(0x1000)[i / 8] >> (i % 8)) & 1) != 0, ref(m.ub<float>(0)[i], 2.0f));
  }
  // int32: abs, relu, adds, duplicate; sub wraps.
  for (int i = 0; i < 64; ++i) m.ub<std::int32_t>(0x2000)[i] = (i - 32) * 1000;
  m.ub<std::int32_t>(0x2000)[0] = INT32_MIN;
  execute(vec(Op::kAbs, DType::kInt32, 0x3000, 0x2000, 0, 1), m);
  execute(vec(Op::kRelu, DType::kInt32, 0x3100, 0x2000, 0, 1), m);
  Instr adds = vec(Op::kAdds, DType::kInt32, 0x3200, 0x2000, 0, 1);
  adds.vec.scalar = 7;
  execute(adds, m);
  execute(vec(Op::kSub, DType::kInt32, 0x3300, 0x2000, 0x3200, 1), m);
  for (int i = 1; i < 64; ++i) {
    const std::int32_t x = (i - 32) * 1000;
    EXPECT_EQ(m.ub<std::int32_t>(0x3000)[i], std::abs(x));
    EXPECT_EQ(m.ub<std::int32_t>(0x3100)[i], std::max(x, 0));
    EXPECT_EQ(m.ub<std::int32_t>(0x3200)[i], x + 7);
    EXPECT_EQ(m.ub<std::int32_t>(0x3300)[i], -7);
  }
  EXPECT_EQ(m.ub<std::int32_t>(0x3000)[0], INT32_MIN);  // |INT32_MIN| wraps, as two's complement does
  // fp16 WholeReduceSum accumulates in fp32 and rounds once; BlockReduceSum/Min per 16-element block.
  for (int i = 0; i < 128; ++i) m.ub<Half>(0x4000)[i] = to_half(static_cast<float>(i % 16) + 0.5f);
  execute(vec(Op::kReduceSum, DType::kFp16, 0x5000, 0x4000, 0, 1), m);
  EXPECT_EQ(to_float(m.ub<Half>(0x5000)[0]), 8 * (120 + 8.0f));
  Instr bs = vec(Op::kBlockReduceSum, DType::kFp16, 0x6000, 0x4000, 0, 1);
  bs.vec.dst_rep_elems = 8;
  execute(bs, m);
  Instr bm = vec(Op::kBlockReduceMin, DType::kFp16, 0x6100, 0x4000, 0, 1);
  bm.vec.dst_rep_elems = 8;
  execute(bm, m);
  for (int b = 0; b < 8; ++b) {
    EXPECT_EQ(to_float(m.ub<Half>(0x6000)[b]), 128.0f);
    EXPECT_EQ(to_float(m.ub<Half>(0x6100)[b]), 0.5f);
  }
  // Masked-out lanes do not take part: the sum of lanes 0..9 only.
  Instr part = vec(Op::kReduceSum, DType::kFp16, 0x7000, 0x4000, 0, 1);
  part.vec.mask = Mask::count(10);
  execute(part, m);
  EXPECT_EQ(to_float(m.ub<Half>(0x7000)[0]), 45 + 5.0f);
  // bf16 arithmetic rounds to bf16 once.
  for (int i = 0; i < 128; ++i) {
    m.ub<BFloat16>(0x8000)[i] = to_bf16(1.0f);
    m.ub<BFloat16>(0x8100)[i] = to_bf16(std::ldexp(1.0f, -9));  // below half an ulp of 1 in bf16 (2^-8)
  }
  execute(vec(Op::kAdd, DType::kBf16, 0x8200, 0x8000, 0x8100, 1), m);
  EXPECT_EQ(to_float(m.ub<BFloat16>(0x8200)[0]), 1.0f);
}

}  // namespace
}  // namespace npusim::hw::isa

namespace npusim::hw::isa {
namespace {

TEST(VectorSemantics, BrcbBroadcastsEachElementIntoABlockAndMaskedDuplicateKeepsOtherLanes) {
  TestMemory m;
  for (int i = 0; i < 16; ++i) m.ub<float>(0x100)[i] = static_cast<float>(i + 1);
  // Two repeats; blocks two apart (stride 2 blocks), repeats 16 blocks apart: element k at block 2k.
  Instr b = vec(Op::kBrcb, DType::kFp32, 0x1000, 0x100, 0, 2);
  b.vec.dst.blk_stride = 64;
  b.vec.dst.rep_stride = 512;
  execute(b, m);
  for (int k = 0; k < 16; ++k)
    for (int l = 0; l < 8; ++l) EXPECT_EQ(m.ub<float>(0x1000)[k * 16 + l], k + 1.0f) << k << " " << l;
  EXPECT_EQ(m.ub<float>(0x1000)[8], 0.0f);  // the blocks in between are untouched
  for (int i = 0; i < 128; ++i) m.ub<float>(0x3000)[i] = 5.0f;
  Instr d = vec(Op::kDuplicate, DType::kFp32, 0x3000, 0, 0, 2);
  d.vec.scalar = -1.0;
  d.vec.mask.bits = {0xffffffff00000000ULL, 0};  // lanes 32..63 of each repeat
  execute(d, m);
  for (int i = 0; i < 128; ++i) EXPECT_EQ(m.ub<float>(0x3000)[i], (i % 64) >= 32 ? -1.0f : 5.0f) << i;
}

TEST(VectorSemantics, GatherReadsByByteOffsetsAndChecksThem) {
  TestMemory m;
  for (int i = 0; i < 64; ++i) m.ub<float>(0x100)[i] = static_cast<float>(i);
  for (int i = 0; i < 64; ++i) m.ub<std::uint32_t>(0x800)[i] = static_cast<std::uint32_t>((63 - i) * 4);  // reverse
  Instr g = vec(Op::kGather, DType::kFp32, 0x1000, 0x100, 0x800, 1);
  execute(g, m);
  for (int i = 0; i < 64; ++i) EXPECT_EQ(m.ub<float>(0x1000)[i], 63.0f - i);
  EXPECT_EQ(pipe_of(g), Pipe::kV);
}

TEST(CubeSemantics, BiasLoadConvertsToFp32OnMte1) {
  TestMemory m;
  for (int i = 0; i < 16; ++i) reinterpret_cast<Half*>(m.local(Space::kL1, 0x200, 0))[i] = to_half(0.5f * i);
  Instr in;
  in.op = Op::kLoadBias;
  in.dtype = DType::kFp32;
  in.src_dtype = DType::kFp16;
  in.src_space = Space::kL1;
  in.dst_space = Space::kBiasTable;
  in.src0 = 0x200;
  in.dst = 0;
  in.copy.cols = 16;
  execute(in, m);
  for (int i = 0; i < 16; ++i) EXPECT_EQ(reinterpret_cast<float*>(m.local(Space::kBiasTable, 0, 0))[i], 0.5f * i);
  EXPECT_EQ(pipe_of(in), Pipe::kMte1);
}

}  // namespace
}  // namespace npusim::hw::isa
