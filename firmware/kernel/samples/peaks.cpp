// vector_peak and cube_peak: long instruction loops with no data movement, to measure a unit's sustained rate
// against the config's peak. Their "ideal_cycles" fact is the peak-rate time of the same work.
#include "firmware/kernel/kernel_api.hpp"
#include "firmware/kernel/samples/samples.hpp"

namespace npusim::fw::kernel::samples {

Sample vector_peak_sample() {
  return Sample{
      "vector_peak", "a long loop of full-repeat vector Add instructions on UB data",
      "iters (1000): instructions\nrepeat (255): repeats per instruction (vector.max_repeat at most)",
      [](Params& p, hw::chip::Chip& chip) {
        const std::uint64_t iters = p.integer("iters", 1000, 1, 1ULL << 32);
        const std::uint64_t repeat = p.integer("repeat", 255, 1, chip.config().vector.max_repeat);
        SampleRun run;
        run.spec.name = "vector_peak";
        run.spec.type = KernelType::kVector;
        run.spec.block_dim = 1;
        const std::uint64_t bytes = repeat * hw::isa::kRepeatBytes;
        if (3 * bytes > chip.config().buffers.ub.size) throw InputError("parameter 'repeat': 3 operands of " + std::to_string(bytes) + " B do not fit in UB");
        run.spec.body = [=] {
          TPipe pipe;
          TBuf<TPosition::VECCALC> buf;
          pipe.InitBuffer(buf, 3 * bytes);
          LocalTensor<half> t = buf.Get<half>();
          const std::uint64_t lanes = bytes / 2 / repeat;
          for (std::uint64_t i = 0; i < iters; ++i)
            Add(t, t[repeat * lanes], t[2 * repeat * lanes], lanes, static_cast<std::uint8_t>(repeat), BinaryRepeatParams{});
        };
        // Peak: the datapath's vector.bytes_per_repeat bytes every vector.cycles_per_repeat cycles.
        const auto& vec = chip.config().vector;
        run.facts["ideal_cycles"] = static_cast<double>(iters * repeat * vec.cycles_per_repeat * hw::isa::kRepeatBytes) /
                                    static_cast<double>(vec.bytes_per_repeat);
        return run;
      }};
}

Sample cube_peak_sample() {
  return Sample{
      "cube_peak", "a long loop of accumulating fp16 Mmad instructions from L0A/L0B into L0C",
      "iters (1000): instructions\nm, k, n (128): Mmad shape (multiples of the fp16 fractal)",
      [](Params& p, hw::chip::Chip& chip) {
        const std::uint64_t iters = p.integer("iters", 1000, 1, 1ULL << 32);
        const std::uint64_t m = p.integer("m", 128, 16, 4096), k = p.integer("k", 128, 16, 4096),
                            n = p.integer("n", 128, 16, 4096);
        const config::FractalParams& f = chip.config().cube.fp16;
        if (m % f.m || k % f.k || n % f.n) throw InputError("parameters 'm', 'k', 'n' must be multiples of the fp16 fractal");
        SampleRun run;
        run.spec.name = "cube_peak";
        run.spec.type = KernelType::kCube;
        run.spec.block_dim = 1;
        run.spec.body = [=] {
          TPipe pipe;
          TBuf<TPosition::A2> a;
          TBuf<TPosition::B2> b;
          TBuf<TPosition::CO1> c;
          pipe.InitBuffer(a, m * k * 2);
          pipe.InitBuffer(b, k * n * 2);
          pipe.InitBuffer(c, m * n * 4);
          for (std::uint64_t i = 0; i < iters; ++i) {
            Mmad(c.Get<float>(), a.Get<half>(), b.Get<half>(),
                 MmadParams{static_cast<std::uint16_t>(m), static_cast<std::uint16_t>(n), static_cast<std::uint16_t>(k), i == 0});
          }
        };
        const double steps = static_cast<double>((m / f.m) * (n / f.n) * (k / f.k) * f.cycles);
        run.facts["ideal_cycles"] = steps * static_cast<double>(iters);
        run.facts["macs"] = static_cast<double>(m * k * n * iters);
        return run;
      }};
}

}  // namespace npusim::fw::kernel::samples
