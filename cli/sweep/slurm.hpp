// Sweeps on a Slurm cluster (docs/exploration.md): the unfinished runs are submitted as one job array
// (`sbatch --array`), each array task runs its chunk of runs with this same binary and writes its rows to a part file
// in the results folder (a folder every node sees), and the submitting process merges the parts into the results
// as they come. A rerun or `--status` finds a job still queued or running and waits for it instead of submitting
// again.
#pragma once

#include <optional>
#include <ostream>
#include <string>

#include "cli/sweep/runner.hpp"
#include "cli/sweep/spec.hpp"

namespace npusim::cli::sweep {

struct SlurmOptions {
  std::string spec_path;               // absolute: the array tasks read it
  std::string partition, time, mem;    // passed to sbatch when given
  unsigned array_tasks = 0;            // 0: one task per run, at most 64
  bool wait = true;                    // wait for the job, merging and showing progress
};

int submit_slurm(const Spec& spec, const RunOptions& run, const SlurmOptions& opts);

// An array task: the runs of OUT/slurm/job-N/runs.txt whose line number modulo the task count is this task's
// SLURM_ARRAY_TASK_ID, with rows to OUT/slurm/job-N/part-ID.jsonl.
int run_slurm_task(const Spec& spec, RunOptions run, const std::string& job_dir);

// The id of the sweep's Slurm job while it is queued or running (a local sweep must not run beside it).
std::optional<std::string> active_slurm_job(const std::string& out_dir);

// The state of the sweep's Slurm job, if it has one (for --status).
void print_slurm_status(const std::string& out_dir, std::ostream& os);

}  // namespace npusim::cli::sweep
