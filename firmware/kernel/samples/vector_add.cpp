// vector_add: z = x + y over n elements, the canonical Ascend C double-buffering example. Each block handles n /
// blocks elements in tiles of `tile` elements through VECIN/VECOUT queues of `buffer_num` buffers.
#include <cstring>
#include <random>

#include "firmware/kernel/kernel_api.hpp"
#include "firmware/kernel/samples/samples.hpp"

namespace npusim::fw::kernel::samples {
namespace {

template <class T>
void add_kernel(GM_ADDR x, GM_ADDR y, GM_ADDR z, std::uint64_t n, std::uint64_t tile, std::uint32_t buffer_num) {
  const std::uint64_t per_block = n / GetBlockNum();
  const std::uint64_t first = per_block * GetBlockIdx();
  GlobalTensor<T> gx, gy, gz;
  gx.SetGlobalBuffer(x + first * sizeof(T), per_block);
  gy.SetGlobalBuffer(y + first * sizeof(T), per_block);
  gz.SetGlobalBuffer(z + first * sizeof(T), per_block);
  TPipe pipe;
  TQue<TPosition::VECIN, 2> in_x, in_y;
  TQue<TPosition::VECOUT, 2> out_z;
  pipe.InitBuffer(in_x, buffer_num, tile * sizeof(T));
  pipe.InitBuffer(in_y, buffer_num, tile * sizeof(T));
  pipe.InitBuffer(out_z, buffer_num, tile * sizeof(T));
  for (std::uint64_t off = 0; off < per_block; off += tile) {
    const std::uint64_t len = std::min(tile, per_block - off);
    // CopyIn
    LocalTensor<T> lx = in_x.AllocTensor<T>(), ly = in_y.AllocTensor<T>();
    DataCopy(lx, gx[off], len);
    DataCopy(ly, gy[off], len);
    in_x.EnQue(lx);
    in_y.EnQue(ly);
    // Compute
    LocalTensor<T> ax = in_x.DeQue<T>(), ay = in_y.DeQue<T>();
    LocalTensor<T> lz = out_z.AllocTensor<T>();
    Add(lz, ax, ay, len);
    out_z.EnQue(lz);
    in_x.FreeTensor(ax);
    in_y.FreeTensor(ay);
    // CopyOut
    LocalTensor<T> oz = out_z.DeQue<T>();
    DataCopy(gz[off], oz, len);
    out_z.FreeTensor(oz);
  }
}

template <class T>
T random_value(std::mt19937_64& rng);
template <>
half random_value<half>(std::mt19937_64& rng) {
  return hw::isa::to_half(std::uniform_real_distribution<float>(-8.0f, 8.0f)(rng));
}
template <>
float random_value<float>(std::mt19937_64& rng) {
  return std::uniform_real_distribution<float>(-1000.0f, 1000.0f)(rng);
}
template <>
std::int32_t random_value<std::int32_t>(std::mt19937_64& rng) {
  return static_cast<std::int32_t>(rng());
}

// The CPU reference: IEEE addition in the element type, two's complement wrap for int32. For fp16 the sum is taken
// in fp32 and rounded once to fp16: binary32 has 24 >= 2 x 11 + 2 significand bits, so the double rounding gives
// the correctly rounded binary16 sum (Figueroa, "When is double rounding innocuous?", 1995), with no need for the
// compiler's _Float16 (clang before 15 lacks it on x86-64).
half ref_add(half a, half b) {
  return hw::isa::to_half(hw::isa::to_float(a) + hw::isa::to_float(b));
}
float ref_add(float a, float b) { return a + b; }
std::int32_t ref_add(std::int32_t a, std::int32_t b) {
  return static_cast<std::int32_t>(static_cast<std::uint32_t>(a) + static_cast<std::uint32_t>(b));
}
double as_double(half h) { return hw::isa::to_float(h); }
double as_double(float f) { return f; }
double as_double(std::int32_t i) { return i; }

template <class T>
SampleRun prepare_typed(hw::chip::Chip& chip, std::uint64_t n, std::uint64_t tile, std::uint32_t buffer_num,
                        std::uint32_t blocks) {
  GmArena arena;
  const std::uint64_t x = arena.alloc(n * sizeof(T)), y = arena.alloc(n * sizeof(T)), z = arena.alloc(n * sizeof(T));
  std::vector<T> hx, hy;
  const bool functional = chip.mode() == hw::core::Mode::kFunctional;
  if (functional) {
    std::mt19937_64 rng(42);
    hx.resize(n);
    hy.resize(n);
    for (std::uint64_t i = 0; i < n; ++i) {
      hx[i] = random_value<T>(rng);
      hy[i] = random_value<T>(rng);
    }
  }
  SampleRun run;
  run.gm_bytes = arena.used();
  add_input(run, x, functional ? hx.data() : nullptr, n * sizeof(T));
  add_input(run, y, functional ? hy.data() : nullptr, n * sizeof(T));
  run.outputs.push_back({z, n * sizeof(T)});
  run.spec.name = "vector_add";
  run.spec.type = KernelType::kVector;
  run.spec.block_dim = blocks;
  run.spec.body = [=] { add_kernel<T>(x, y, z, n, tile, buffer_num); };
  run.check = [=](const MemoryReader& read) {
    std::vector<T> out(n);
    read(z, out.data(), n * sizeof(T));
    CheckResult r;
    r.passed = true;
    for (std::uint64_t i = 0; i < n; ++i) {
      const T want = ref_add(hx[i], hy[i]);
      // Bit-exact, NaNs and signed zeros included: the representations are compared on purpose.
      // NOLINTNEXTLINE(bugprone-suspicious-memory-comparison)
      if (std::memcmp(&want, &out[i], sizeof(T)) != 0) r.passed = false;
      const double err = std::abs(as_double(out[i]) - as_double(want));
      r.max_abs_err = std::max(r.max_abs_err, err);
      if (as_double(want) != 0) r.max_rel_err = std::max(r.max_rel_err, err / std::abs(as_double(want)));
    }
    return r;
  };
  run.facts["bytes_moved"] = static_cast<double>(3 * n * sizeof(T));
  return run;
}

}  // namespace

Sample vector_add_sample() {
  return Sample{
      "vector_add", "z = x + y through double-buffered VECIN/VECOUT queues (copy-bound when large)",
      "n (1048576): elements\ntile (8192): elements per tile\nbuffer_num (2): buffers per queue, 1..3\n"
      "dtype (fp16): fp16, fp32 or int32\nblocks (1): blocks (vector cores); n must split evenly",
      [](Params& p, hw::chip::Chip& chip) {
        const std::uint64_t n = p.integer("n", 1 << 20, 1, 1ULL << 32);
        const std::uint64_t tile = p.integer("tile", 8192, 1, 1ULL << 24);
        const auto buffer_num = static_cast<std::uint32_t>(p.integer("buffer_num", 2, 1, 3));
        const std::string dtype = p.choice("dtype", "fp16", {"fp16", "fp32", "int32"});
        const auto blocks = static_cast<std::uint32_t>(p.integer("blocks", 1, 1, 65535));
        const std::uint64_t size = dtype == "fp16" ? 2 : 4;
        if (n % blocks != 0) throw InputError("parameter 'n': " + std::to_string(n) + " does not split into " +
                                              std::to_string(blocks) + " blocks");
        if ((n / blocks) % (32 / size) != 0 || tile % (32 / size) != 0) {
          throw InputError("parameters 'n' and 'tile': each block's elements and the tile must be whole 32 B blocks (" +
                           std::to_string(32 / size) + " elements of " + dtype + ")");
        }
        if (dtype == "fp16") return prepare_typed<half>(chip, n, tile, buffer_num, blocks);
        if (dtype == "fp32") return prepare_typed<float>(chip, n, tile, buffer_num, blocks);
        return prepare_typed<std::int32_t>(chip, n, tile, buffer_num, blocks);
      }};
}

}  // namespace npusim::fw::kernel::samples
