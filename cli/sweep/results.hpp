// A sweep's results (docs/exploration.md): one row per point x workload, kept as JSON Lines (the record, appended
// as runs finish) and written again as CSV. Each finished run's whole --json report is kept in reports.jsonl, so a
// metric added to the spec later is read from it without running again.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "cli/sweep/spec.hpp"

namespace npusim::cli::sweep {

// A row's status: "ok" (ran, metrics read), "failed" (the run exited with an error), "timeout", or "invalid" (the
// point's config does not load; nothing ran).
nlohmann::json make_row(const Spec& spec, const Point& p, const Workload& w, const std::string& status,
                        const std::string& error, double wall_s);

// Fills row["metrics"] from a run's report: each metric is a --json key path (a.b.0.c) or an expression whose names
// are key paths, `chip.KEY` (the point's device facts, as npusim info --json) or `config.KEY` (the resolved config in
// base units). A metric whose names a report lacks is null (a model has no op.flops).
void fill_metrics(nlohmann::json& row, const Spec& spec, const Point& p, const nlohmann::json& report);

// The key under which a run is finished: the point's config and the workload's command line.
std::string run_key(const Point& p, const Workload& w);

// A row (or any JSON) as one line of text; bytes that are not UTF-8 (a run's stderr may hold any) become U+FFFD.
std::string row_text(const nlohmann::json& row);

// Reads results.jsonl; a torn last line (a run killed while writing) is skipped.
std::vector<nlohmann::json> read_rows(const std::string& path);

// Writes the rows as CSV (point, workload, status, config_hash, the axes, the derived keys, the metrics, wall_s,
// error), through a temporary file renamed into place.
void write_csv(const std::string& path, const Spec& spec, const std::vector<nlohmann::json>& rows);

// The .jsonl files of `dir` whose names start with `prefix` ("part-", "reports-"), sorted.
std::vector<std::string> jsonl_files(const std::string& dir, const std::string& prefix);
// The same over every Slurm job folder of a results folder (OUT/slurm/job-*/PREFIX*.jsonl).
std::vector<std::string> slurm_files(const std::string& out_dir, const std::string& prefix);
// Renames the Slurm jobs' part-*.jsonl to *.merged once their rows are in results.jsonl (their reports stay).
void retire_slurm_parts(const std::string& out_dir);

// A finished run's report as a line of a reports file: {"key":"KEY","report":{...}} (the key first, so an index
// finds it without parsing the report).
std::string report_line(const std::string& key, const nlohmann::json& report);

// The reports of a results folder: OUT/reports.jsonl and the Slurm tasks' OUT/slurm/*/reports-*.jsonl. Indexed by
// key when made (one pass, no report parsed); a report is read and parsed when asked for. A torn last line is
// skipped; of two lines of one key the later counts.
class ReportStore {
 public:
  explicit ReportStore(const std::string& out_dir);
  bool has(const std::string& key) const { return index_.count(key) > 0; }
  std::optional<nlohmann::json> get(const std::string& key) const;

 private:
  struct Where {
    std::string file;
    std::uint64_t offset = 0, length = 0;
  };
  std::map<std::string, Where> index_;
};

// Writes text to path through a temporary file in the same folder renamed into place: a reader never sees half.
void write_atomically(const std::string& path, const std::string& text);

}  // namespace npusim::cli::sweep
