#include "cli/sweep_command.hpp"

#include <unistd.h>

#include <filesystem>
#include <iostream>
#include <map>
#include <thread>

#include "cli/sweep/results.hpp"
#include "cli/sweep/runner.hpp"
#include "cli/sweep/slurm.hpp"
#include "cli/sweep/spec.hpp"
#include "common/util/error.hpp"
#include "common/util/self_exe.hpp"

namespace npusim::cli {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

std::string self_exe() {
  const fs::path p = self_executable();
  if (p.empty()) throw InputError("cannot find the npusim binary (/proc/self/exe is not readable)");
  return p.string();
}

void print_points(const sweep::Spec& spec) {
  std::cout << "sweep " << spec.name << ": " << spec.points.size() << " points x " << spec.workloads.size()
            << " workloads, base config " << spec.base << "\n";
  for (const sweep::Point& p : spec.points) {
    std::cout << "  point " << p.index << ":";
    for (const auto& [k, v] : p.axes) std::cout << " " << k << "=" << v;
    for (const auto& [k, v] : p.derived) std::cout << " " << k << "=" << v << " (derived)";
    if (p.error.empty()) std::cout << "  config " << p.config_hash << "\n";
    else std::cout << "\n    " << p.error << "\n";
  }
  for (const sweep::Workload& w : spec.workloads) {
    std::cout << "  workload " << w.name << ": npusim";
    for (const auto& a : w.argv) std::cout << " " << a;
    std::cout << "\n";
  }
  std::cout << "  metrics:";
  for (const sweep::Metric& m : spec.metrics) std::cout << " " << m.name << (m.name == m.expr ? "" : " = " + m.expr) << ";";
  std::cout << "\n";
}

int print_status(const sweep::Spec& spec, const std::string& out) {
  const std::vector<json> rows = sweep::finished_rows(spec, out, sweep::read_all_rows(out), false);
  std::map<std::string, std::size_t> counts;
  for (const json& r : rows) ++counts[r["status"].get<std::string>()];
  const std::size_t total = spec.points.size() * spec.workloads.size();
  std::cout << "sweep " << spec.name << " (" << out << "): " << total << " runs: ";
  for (const char* s : {"ok", "failed", "timeout", "invalid"}) std::cout << counts[s] << " " << s << ", ";
  std::cout << (total - rows.size()) << " not run\n";
  sweep::print_slurm_status(out, std::cout);
  return 0;
}

}  // namespace

int run_sweep_command(const SweepOptions& opts) {
  const sweep::Spec spec = sweep::load_spec(opts.spec);
  if (opts.dry_run) {
    print_points(spec);
    return 0;
  }
  const std::string out = fs::absolute(opts.out.empty() ? "sweep-" + spec.name : opts.out).lexically_normal().string();
  if (opts.status) return print_status(spec, out);

  sweep::RunOptions run;
  run.out_dir = out;
  run.jobs = opts.jobs ? opts.jobs : std::max(1u, std::thread::hardware_concurrency());
  run.retry_failed = opts.retry_failed;
  run.timeout_s = opts.timeout_s;
  run.quiet = opts.quiet;
  run.self_exe = self_exe();
  run.run_dir = fs::absolute(opts.spec).parent_path().string();
  if (!opts.slurm_task_dir.empty()) return sweep::run_slurm_task(spec, run, opts.slurm_task_dir);
  if (opts.slurm) {
    sweep::SlurmOptions s;
    s.partition = opts.partition;
    s.time = opts.time;
    s.mem = opts.mem;
    s.array_tasks = opts.array_tasks;
    s.wait = !opts.no_wait;
    s.spec_path = fs::absolute(opts.spec).lexically_normal().string();
    return sweep::submit_slurm(spec, run, s);
  }
  if (const auto job = sweep::active_slurm_job(out))
    throw InputError("slurm job " + *job + " of this sweep is still queued or running in " + out +
                     ": wait for it (npusim sweep " + opts.spec + " --slurm) or cancel it (scancel " + *job + ")");
  return sweep::run_local(spec, run);
}

}  // namespace npusim::cli
