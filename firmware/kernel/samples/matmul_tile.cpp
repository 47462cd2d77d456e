// matmul_tile: one cube core computes C (M x N, fp16) = A (M x K) B (K x N), fp16 in GM ND, the production data
// path: GM -ND->NZ-> L1 (A1/B1 queues) -> L0A/L0B (A2/B2 queues, B transposed per fractal) -> Mmad accumulating in
// L0C over K tiles -> FixPipe NZ->ND fp32->fp16 -> GM. L1 and L0 queues have two buffers (ping-pong).
#include <cmath>
#include <random>

#include "firmware/kernel/kernel_api.hpp"
#include "firmware/kernel/samples/samples.hpp"

namespace npusim::fw::kernel::samples {
namespace {

void matmul_kernel(GM_ADDR a, GM_ADDR b, GM_ADDR c, std::uint32_t M, std::uint32_t N, std::uint32_t K,
                   std::uint32_t kt, std::uint32_t buffers) {
  GlobalTensor<half> ga, gb, gc;
  ga.SetGlobalBuffer(a);
  gb.SetGlobalBuffer(b);
  gc.SetGlobalBuffer(c);
  TPipe pipe;
  TQue<TPosition::A1, 2> qa1;
  TQue<TPosition::B1, 2> qb1;
  TQue<TPosition::A2, 2> qa2;
  TQue<TPosition::B2, 2> qb2;
  TQue<TPosition::CO1, 1> qc;
  pipe.InitBuffer(qa1, buffers, M * kt * 2);
  pipe.InitBuffer(qb1, buffers, kt * N * 2);
  pipe.InitBuffer(qa2, buffers, M * kt * 2);
  pipe.InitBuffer(qb2, buffers, kt * N * 2);
  pipe.InitBuffer(qc, 1, M * N * 4);
  const std::uint32_t m1 = M / 16, n1 = N / 16, k1 = kt / 16;
  LocalTensor<float> acc = qc.AllocTensor<float>();
  for (std::uint32_t k0 = 0; k0 < K; k0 += kt) {
    LocalTensor<half> a1 = qa1.AllocTensor<half>(), b1 = qb1.AllocTensor<half>();
    DataCopy(a1, ga[k0], Nd2NzParams{1, static_cast<std::uint16_t>(M), static_cast<std::uint16_t>(kt), 0,
                                     static_cast<std::uint16_t>(K), static_cast<std::uint16_t>(M), 1, 0});
    DataCopy(b1, gb[static_cast<std::uint64_t>(k0) * N],
             Nd2NzParams{1, static_cast<std::uint16_t>(kt), static_cast<std::uint16_t>(N), 0,
                         static_cast<std::uint16_t>(N), static_cast<std::uint16_t>(kt), 1, 0});
    qa1.EnQue(a1);
    qb1.EnQue(b1);

    a1 = qa1.DeQue<half>();
    b1 = qb1.DeQue<half>();
    LocalTensor<half> a2 = qa2.AllocTensor<half>(), b2 = qb2.AllocTensor<half>();
    // L1 NZ has A's fractal (fk, fm) at fk * m1 + fm; L0A wants fm * k1 + fk: one load per fractal row.
    for (std::uint32_t fm = 0; fm < m1; ++fm)
      LoadData(a2[fm * k1 * 256], a1, LoadData2DParams{static_cast<std::uint16_t>(fm), static_cast<std::uint8_t>(k1),
                                                       static_cast<std::uint16_t>(m1), false});
    // L1 NZ has B's fractal (fn, fk) at fn * k1 + fk; L0B wants (fk, fn) at fk * n1 + fn, each transposed.
    for (std::uint32_t fk = 0; fk < k1; ++fk)
      LoadData(b2[fk * n1 * 256], b1, LoadData2DParams{static_cast<std::uint16_t>(fk), static_cast<std::uint8_t>(n1),
                                                       static_cast<std::uint16_t>(k1), true});
    qa2.EnQue(a2);
    qb2.EnQue(b2);
    qa1.FreeTensor(a1);
    qb1.FreeTensor(b1);

    a2 = qa2.DeQue<half>();
    b2 = qb2.DeQue<half>();
    Mmad(acc, a2, b2, MmadParams{static_cast<std::uint16_t>(M), static_cast<std::uint16_t>(N),
                                 static_cast<std::uint16_t>(kt), k0 == 0});
    qa2.FreeTensor(a2);
    qb2.FreeTensor(b2);
  }
  qc.EnQue(acc);
  acc = qc.DeQue<float>();
  Fixpipe(gc, acc, FixpipeParams{static_cast<std::uint16_t>(N), static_cast<std::uint16_t>(M),
                                 static_cast<std::uint16_t>(M), N, false});
  qc.FreeTensor(acc);
}

}  // namespace

Sample matmul_tile_sample() {
  return Sample{
      "matmul_tile", "one cube core: GM -> L1 -> L0 -> Mmad -> FixPipe -> GM with ping-pong L1/L0 buffers (fp16)",
      "M (128), N (128): output tile, multiples of 16\nK (512): reduction length, a multiple of k_tile\n"
      "k_tile (64): K per L1/L0 buffer, a multiple of 16\nbuffers (2): buffers per L1/L0 queue, 1..2",
      [](Params& p, hw::chip::Chip& chip) {
        const auto M = static_cast<std::uint32_t>(p.integer("M", 128, 16, 4096));
        const auto N = static_cast<std::uint32_t>(p.integer("N", 128, 16, 4096));
        const auto K = static_cast<std::uint32_t>(p.integer("K", 512, 16, 65535));
        const auto kt = static_cast<std::uint32_t>(p.integer("k_tile", 64, 16, 4096));
        const auto buffers = static_cast<std::uint32_t>(p.integer("buffers", 2, 1, 2));
        if (M % 16 || N % 16 || kt % 16 || K % kt || kt / 16 > 255 || N / 16 > 255)
          throw InputError("parameters: M, N and k_tile must be multiples of 16 (at most 4080 for k_tile and N), K a multiple of k_tile");
        GmArena arena;
        const std::uint64_t a = arena.alloc(2ULL * M * K), b = arena.alloc(2ULL * K * N), c = arena.alloc(2ULL * M * N);
        std::vector<half> ha, hb;
        if (chip.mode() == hw::core::Mode::kFunctional) {
          std::mt19937_64 rng(7);
          std::uniform_real_distribution<float> d(-1.0f, 1.0f);
          ha.resize(static_cast<std::size_t>(M) * K);
          hb.resize(static_cast<std::size_t>(K) * N);
          for (auto& v : ha) v = hw::isa::to_half(d(rng));
          for (auto& v : hb) v = hw::isa::to_half(d(rng));
        }
        const bool functional = chip.mode() == hw::core::Mode::kFunctional;
        SampleRun run;
        run.gm_bytes = arena.used();
        add_input(run, a, functional ? ha.data() : nullptr, 2ULL * M * K);
        add_input(run, b, functional ? hb.data() : nullptr, 2ULL * K * N);
        run.outputs.push_back({c, 2ULL * M * N});
        run.spec.name = "matmul_tile";
        run.spec.type = KernelType::kCube;
        run.spec.block_dim = 1;
        run.spec.body = [=] { matmul_kernel(a, b, c, M, N, K, kt, buffers); };
        run.check = [=](const MemoryReader& read) {
          std::vector<half> out(static_cast<std::size_t>(M) * N);
          read(c, out.data(), out.size() * 2);
          CheckResult r;
          r.passed = true;
          // Reference: exact products and sums in double, from the same fp16 inputs.
          for (std::uint32_t i = 0; i < M; ++i) {
            for (std::uint32_t j = 0; j < N; ++j) {
              double want = 0;
              for (std::uint32_t k = 0; k < K; ++k)
                want += static_cast<double>(hw::isa::to_float(ha[static_cast<std::size_t>(i) * K + k])) *
                        hw::isa::to_float(hb[static_cast<std::size_t>(k) * N + j]);
              const double got = hw::isa::to_float(out[static_cast<std::size_t>(i) * N + j]);
              const double err = std::abs(got - want);
              r.max_abs_err = std::max(r.max_abs_err, err);
              if (want != 0) r.max_rel_err = std::max(r.max_rel_err, err / std::abs(want));
              // fp16 output rounding (2^-11 relative) plus fp32 accumulation error over K terms.
              if (err > std::abs(want) * std::ldexp(1.0, -10) + 1e-5 * K) r.passed = false;
            }
          }
          return r;
        };
        run.facts["macs"] = static_cast<double>(M) * N * K;
        return run;
      }};
}

}  // namespace npusim::fw::kernel::samples
