// `npusim sweep SPEC.yaml`: design-space exploration (docs/exploration.md). Expands the spec into points, runs
// every point x workload as its own npusim process (-j at a time, here or as a Slurm job array), keeps the
// results (CSV and JSON Lines) and resumes where an earlier run stopped.
#pragma once

#include <string>

namespace npusim::cli {

struct SweepOptions {
  std::string spec;
  std::string out;           // default: ./sweep-NAME
  unsigned jobs = 0;         // 0: one per CPU
  bool retry_failed = false;
  double timeout_s = 0;
  bool dry_run = false;
  bool status = false;
  bool quiet = false;
  // Slurm (docs/exploration.md): submit the runs as a job array instead of running them here.
  bool slurm = false;
  bool no_wait = false;
  std::string partition, time, mem;
  unsigned array_tasks = 0;  // 0: one task per run, at most 64 (each task a chunk of runs)
  // An array task's own part (internal: the job script calls it).
  std::string slurm_task_dir;
};

int run_sweep_command(const SweepOptions& opts);

}  // namespace npusim::cli
