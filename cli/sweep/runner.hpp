// Running a sweep's points on this machine: each run is a separate `npusim` process (SystemC elaborates once per
// process), at most `jobs` at a time, with progress on stderr, rows appended to the results as runs finish, and
// resumption (a finished run is never redone).
#pragma once

#include <nlohmann/json.hpp>

#include <set>
#include <string>
#include <vector>

#include "cli/sweep/spec.hpp"

namespace npusim::cli::sweep {

struct RunOptions {
  std::string out_dir;            // results.jsonl, results.csv, reports.jsonl, logs/
  unsigned jobs = 1;              // runs at a time
  bool retry_failed = false;      // run again the runs recorded as failed or timed out
  double timeout_s = 0;           // per run; 0: none
  bool quiet = false;             // no progress lines
  std::string self_exe;           // the npusim binary each run starts
  std::string run_dir;            // each run's working directory: the spec's (relative paths in args are the spec's)
  // A Slurm array task runs only these runs (run keys) and writes its rows to `results_file` only; empty: all.
  std::set<std::string> only_keys;
  std::string results_file;       // default: OUT/results.jsonl
};

// What a spec's runs are: every point x workload with its key, in point order.
struct PlannedRun {
  const Point* point;
  const Workload* workload;
  std::string key;
};
std::vector<PlannedRun> plan_runs(const Spec& spec);

// The rows for the spec's runs that `rows` (read from results files) already finished, with their metrics
// extracted again from the saved reports (the spec's metrics may have changed). `retry_failed` leaves failed and
// timed-out runs out. Invalid points get their row here too.
std::vector<nlohmann::json> finished_rows(const Spec& spec, const std::string& out_dir,
                                          const std::vector<nlohmann::json>& rows, bool retry_failed);

// Rewrites OUT/results.jsonl with `rows` (this spec's); rows of `previous` whose runs the spec no longer has are
// appended to OUT/superseded.jsonl rather than lost.
void write_record(const Spec& spec, const std::string& out_dir, const std::vector<nlohmann::json>& previous,
                  const std::vector<nlohmann::json>& rows);

// Runs every unfinished run; returns the exit status of `npusim sweep` (0 done, 130 interrupted).
int run_local(const Spec& spec, const RunOptions& opts);

// Reads the rows of OUT/results.jsonl and of the Slurm tasks' parts (OUT/slurm/*/part-*.jsonl), newest last.
std::vector<nlohmann::json> read_all_rows(const std::string& out_dir);

// Orders rows by point, then by the spec's workload order.
void sort_rows(const Spec& spec, std::vector<nlohmann::json>& rows);

}  // namespace npusim::cli::sweep
