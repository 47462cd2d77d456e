// Simulation speed: simulated instructions per host second for sample kernels in timing-only mode.
// SystemC elaborates once per process, so run one benchmark per process: scripts/bench.sh does.
#include <benchmark/benchmark.h>

#include <systemc>

#include "common/config/loader.hpp"
#include "firmware/kernel/launch_spec.hpp"
#include "firmware/kernel/samples/samples.hpp"
#include "firmware/platform/platform.hpp"

namespace {

using namespace npusim;

void run_sample(benchmark::State& state, const std::string& name, const std::map<std::string, std::string>& params,
                const std::vector<std::string>& sets = {}) {
  const auto cfg = config::load_config("910b", sets).chip;
  fw::Platform platform(cfg, hw::core::Mode::kTimingOnly);
  fw::kernel::samples::Params p(params);
  auto run = fw::kernel::samples::find_sample(name)->prepare(p, platform.chip());
  fw::kernel::LaunchResult result;
  // One simulation per process (SystemC): each benchmark is registered with one iteration.
  for (auto _ : state) result = platform.run_kernel(run.spec);  // NOLINT(clang-analyzer-deadcode.DeadStores): the idiom
  state.counters["instructions"] = static_cast<double>(result.instructions);
  state.counters["instr_per_s"] = benchmark::Counter(static_cast<double>(result.instructions), benchmark::Counter::kIsRate);
  state.counters["sim_cycles"] = static_cast<double>(result.end - result.start);
}

// Google Benchmark names its benchmarks BM_*.
// NOLINTBEGIN(readability-identifier-naming)
void BM_vector_add(benchmark::State& state) {
  run_sample(state, "vector_add", {{"n", "67108864"}, {"tile", "8192"}, {"buffer_num", "2"}});
}
void BM_matmul_tile(benchmark::State& state) {
  run_sample(state, "matmul_tile", {{"M", "128"}, {"N", "128"}, {"K", "65280"}, {"k_tile", "32"}});
}
void BM_vector_peak(benchmark::State& state) { run_sample(state, "vector_peak", {{"iters", "2000000"}}); }
// The core engine alone: the same kernels with the flat GM model of the AI-core issue (sim.memory_model=simple).
void BM_vector_add_simple_gm(benchmark::State& state) {
  run_sample(state, "vector_add", {{"n", "67108864"}, {"tile", "8192"}, {"buffer_num", "2"}}, {"sim.memory_model=simple"});
}
void BM_matmul_tile_simple_gm(benchmark::State& state) {
  run_sample(state, "matmul_tile", {{"M", "128"}, {"N", "128"}, {"K", "65280"}, {"k_tile", "32"}}, {"sim.memory_model=simple"});
}
// The memory system under load: 1 GiB through all 48 vector cores of 910b (issue target: under 20 s).
void BM_hbm_stream_1GiB(benchmark::State& state) {
  run_sample(state, "hbm_stream", {{"bytes", "1073741824"}});
  state.counters["bytes"] = 1073741824.0;
}

// NOLINTEND(readability-identifier-naming)

BENCHMARK(BM_vector_add)->Iterations(1)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_matmul_tile)->Iterations(1)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_vector_peak)->Iterations(1)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_vector_add_simple_gm)->Iterations(1)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_matmul_tile_simple_gm)->Iterations(1)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_hbm_stream_1GiB)->Iterations(1)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace

int sc_main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}

int main(int argc, char** argv) {
  setenv("SYSTEMC_DISABLE_COPYRIGHT_MESSAGE", "1", 1);
  return sc_core::sc_elab_and_sim(argc, argv);
}
