#include "cli/sweep/slurm.hpp"

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <set>
#include <sstream>
#include <thread>

#include "cli/sweep/results.hpp"
#include "common/util/error.hpp"

namespace npusim::cli::sweep {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

std::string shell_quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) {
    if (c == '\'') q += "'\\''";
    else q += c;
  }
  return q + "'";
}

struct Command {
  int status = -1;
  std::string out;
};

// Runs a command line through the shell; stderr goes with stdout (so a failure's message can be shown) unless the
// command redirects it itself.
Command shell(const std::string& cmd, bool with_stderr = true) {
  Command c;
  FILE* p = popen((with_stderr ? cmd + " 2>&1" : cmd).c_str(), "r");
  if (!p) return c;
  std::array<char, 4096> buf{};
  std::size_t n = 0;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) c.out.append(buf.data(), n);
  const int raw = pclose(p);
  c.status = WIFEXITED(raw) ? WEXITSTATUS(raw) : -1;
  return c;
}

void need_command(const char* name) {
  if (shell(std::string("command -v ") + name).status != 0)
    throw InputError(std::string("--slurm needs Slurm's ") + name + " on PATH (Debian: slurm-client), and a cluster");
}

std::string trim(std::string s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.pop_back();
  std::size_t i = 0;
  while (i < s.size() && std::isspace(static_cast<unsigned char>(s[i]))) ++i;
  return s.substr(i);
}

// The job's array tasks still known to the queue, by state (PENDING, RUNNING...); empty once the job is over. A
// squeue that fails for another reason than an unknown job (the controller busy, say) leaves the job "UNKNOWN":
// the caller waits and asks again rather than taking a running job for over.
std::map<std::string, int> job_states(const std::string& job_id) {
  std::map<std::string, int> states;
  const Command c = shell("squeue -h -r -j " + job_id + " -o %T");
  if (c.status != 0) {
    if (c.out.find("Invalid job id") == std::string::npos) states["UNKNOWN"] = 1;
    return states;  // squeue refuses a job id it no longer knows
  }
  std::istringstream in(c.out);
  std::string line;
  while (std::getline(in, line))
    if (!trim(line).empty()) ++states[trim(line)];
  return states;
}

std::string state_path(const std::string& out) { return out + "/slurm/current.json"; }

// Rewrites the results from results.jsonl and every part, and the CSV; retires the parts once the job is over.
void merge(const Spec& spec, const std::string& out, bool job_over) {
  const std::vector<json> previous = read_all_rows(out);
  std::vector<json> rows = finished_rows(spec, out, previous, false);
  sort_rows(spec, rows);
  write_record(spec, out, previous, rows);
  write_csv(out + "/results.csv", spec, rows);
  if (job_over) retire_slurm_parts(out);
}

// The runs a job's tasks have reported so far.
std::size_t part_rows(const std::string& job_dir) {
  std::set<std::string> keys;
  for (const std::string& part : jsonl_files(job_dir, "part-"))
    for (const json& r : read_rows(part)) keys.insert(r["key"].get<std::string>());
  return keys.size();
}

int wait_for_job(const Spec& spec, const std::string& out, const json& state, bool quiet) {
  const std::string job_id = state["job_id"].get<std::string>();
  const std::string dir = state["dir"].get<std::string>();
  const std::size_t runs = state["runs"].get<std::size_t>();
  const bool tty = isatty(STDERR_FILENO);
  const auto t0 = std::chrono::steady_clock::now();
  std::size_t seen = 0;
  std::string last;
  for (;;) {
    const std::map<std::string, int> states = job_states(job_id);
    const bool over = states.empty();
    const std::size_t now = part_rows(dir);
    if (now != seen || over) {
      seen = now;
      merge(spec, out, over);  // the results grow as the tasks finish runs
    }
    if (!quiet) {
      std::ostringstream s;
      const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      s << "slurm job " << job_id << ": [" << now << "/" << runs << "] runs done";
      for (const auto& [st, n] : states) s << ", " << n << " " << st;
      if (now && now < runs) s << ", ETA " << static_cast<int>(elapsed / now * (runs - now)) << "s";
      // On a terminal one line is redrawn; elsewhere a line is printed when the counts change.
      std::string counts = s.str();
      counts = counts.substr(0, counts.find(", ETA"));
      if (tty) std::cerr << "\r\033[K" << s.str() << std::flush;
      else if (counts != last) std::cerr << s.str() << "\n";
      last = counts;
    }
    if (over) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }
  if (tty && !quiet) std::cerr << "\n";
  std::error_code ec;
  fs::remove(state_path(out), ec);
  const std::size_t missing = runs > seen ? runs - seen : 0;
  if (missing) {
    std::cerr << "npusim: error: slurm job " << job_id << " ended with " << missing << " of " << runs
              << " runs unfinished (see " << dir << "/task-*.log); run the same command to submit them again\n";
    return 1;
  }
  if (!quiet) std::cerr << "results: " << out << "/results.csv, " << out << "/results.jsonl\n";
  return 0;
}

}  // namespace

int submit_slurm(const Spec& spec, const RunOptions& run, const SlurmOptions& opts) {
  need_command("sbatch");
  need_command("squeue");
  const std::string& out = run.out_dir;
  std::error_code ec;
  fs::create_directories(out + "/slurm", ec);
  fs::create_directories(out + "/logs", ec);
  if (ec) throw InputError(out + ": cannot make the folder: " + ec.message());

  // A job of an earlier submission still in the queue: wait for it rather than submitting its runs twice.
  if (fs::exists(state_path(out))) {
    std::ifstream f(state_path(out));
    json state = json::parse(f, nullptr, false);
    if (state.is_object() && state.contains("job_id") && !job_states(state["job_id"].get<std::string>()).empty()) {
      if (!run.quiet) std::cerr << "sweep " << spec.name << ": slurm job " << state["job_id"].get<std::string>() << " is still queued or running\n";
      if (!opts.wait) return 0;
      return wait_for_job(spec, out, state, run.quiet);
    }
  }

  write_atomically(out + "/sweep.json", spec.describe().dump(2) + "\n");
  merge(spec, out, true);
  const std::vector<json> rows = finished_rows(spec, out, read_all_rows(out), run.retry_failed);
  std::set<std::string> finished;
  for (const json& r : rows) finished.insert(r["key"].get<std::string>());
  std::vector<std::string> keys;
  std::set<std::string> listed;
  for (const PlannedRun& r : plan_runs(spec))
    if (r.point->error.empty() && !finished.count(r.key) && listed.insert(r.key).second) keys.push_back(r.key);
  if (keys.empty()) {
    if (!run.quiet) std::cerr << "sweep " << spec.name << ": every run is finished; results in " << out << "/results.csv\n";
    return 0;
  }

  int n = 0;
  while (fs::exists(out + "/slurm/job-" + std::to_string(n))) ++n;
  const std::string dir = out + "/slurm/job-" + std::to_string(n);
  fs::create_directories(dir, ec);
  const std::size_t tasks = std::min<std::size_t>(keys.size(), opts.array_tasks ? opts.array_tasks : 64);
  {
    std::ofstream f(dir + "/runs.txt");
    for (const auto& k : keys) f << k << "\n";
  }
  write_atomically(dir + "/job.json", json{{"tasks", tasks}, {"runs", keys.size()}}.dump() + "\n");
  std::string timeout;
  if (run.timeout_s > 0) {
    char buf[64];
    std::snprintf(buf, sizeof buf, " --timeout %.17g", run.timeout_s);
    timeout = buf;
  }
  std::string script = "#!/bin/sh\n# npusim sweep " + spec.name + ": one array task runs every " + std::to_string(tasks) +
                       "th run of runs.txt\nexec " + shell_quote(run.self_exe) + " sweep " + shell_quote(opts.spec_path) +
                       " --out " + shell_quote(out) + " --slurm-task " + shell_quote(dir) + timeout + "\n";
  write_atomically(dir + "/job.sh", script);
  fs::permissions(dir + "/job.sh", fs::perms::owner_all | fs::perms::group_read | fs::perms::others_read, ec);

  std::string cmd = "sbatch --parsable --array=0-" + std::to_string(tasks - 1) + " --job-name=" +
                    shell_quote("npusim-sweep-" + spec.name) + " --output=" + shell_quote(dir + "/task-%a.log") +
                    " --chdir=" + shell_quote(out) + " --cpus-per-task=1";
  if (!opts.partition.empty()) cmd += " --partition=" + shell_quote(opts.partition);
  if (!opts.time.empty()) cmd += " --time=" + shell_quote(opts.time);
  if (!opts.mem.empty()) cmd += " --mem=" + shell_quote(opts.mem);
  cmd += " " + shell_quote(dir + "/job.sh");
  // The job id is sbatch's stdout alone (--parsable: "ID" or "ID;cluster"); its warnings go to a file of their own.
  const Command c = shell(cmd + " 2>" + shell_quote(dir + "/sbatch.err"), false);
  std::string job_id = trim(c.out.substr(0, c.out.find(';')));
  if (c.status != 0 || job_id.empty() || job_id.find_first_not_of("0123456789") != std::string::npos) {
    std::ifstream e(dir + "/sbatch.err");
    std::stringstream err;
    err << e.rdbuf();
    throw InputError("sbatch refused the sweep's job array: " + trim(err.str() + "\n" + c.out));
  }
  const json state = {{"job_id", job_id}, {"dir", dir}, {"runs", keys.size()}, {"tasks", tasks}};
  write_atomically(state_path(out), row_text(state) + "\n");
  if (!run.quiet)
    std::cerr << "sweep " << spec.name << ": submitted slurm job " << job_id << ": " << keys.size() << " runs in "
              << tasks << " array tasks (" << dir << ")\n";
  if (!opts.wait) {
    std::cout << job_id << "\n";
    return 0;
  }
  return wait_for_job(spec, out, state, run.quiet);
}

int run_slurm_task(const Spec& spec, RunOptions run, const std::string& job_dir) {
  const char* id_text = std::getenv("SLURM_ARRAY_TASK_ID");
  if (!id_text) throw InputError("--slurm-task is run by the sweep's Slurm job array (SLURM_ARRAY_TASK_ID is not set)");
  const std::size_t id = std::stoul(id_text);
  std::ifstream jf(job_dir + "/job.json");
  const json job = json::parse(jf, nullptr, false);
  if (!job.is_object() || !job.contains("tasks")) throw InputError(job_dir + "/job.json: missing or unreadable");
  const std::size_t tasks = job["tasks"].get<std::size_t>();
  std::ifstream rf(job_dir + "/runs.txt");
  std::string key;
  for (std::size_t line = 0; std::getline(rf, key); ++line)
    if (line % tasks == id && !key.empty()) run.only_keys.insert(key);
  if (run.only_keys.empty()) return 0;
  run.results_file = job_dir + "/part-" + std::to_string(id) + ".jsonl";
  const char* cpus = std::getenv("SLURM_CPUS_PER_TASK");
  run.jobs = cpus ? std::max(1, std::atoi(cpus)) : 1;
  return run_local(spec, run);
}

std::optional<std::string> active_slurm_job(const std::string& out_dir) {
  std::ifstream f(state_path(out_dir));
  if (!f) return std::nullopt;
  const json state = json::parse(f, nullptr, false);
  if (!state.is_object() || !state.contains("job_id")) return std::nullopt;
  const std::string job_id = state["job_id"].get<std::string>();
  if (shell("command -v squeue").status != 0 || job_states(job_id).empty()) return std::nullopt;
  return job_id;
}

void print_slurm_status(const std::string& out_dir, std::ostream& os) {
  std::ifstream f(state_path(out_dir));
  if (!f) return;
  const json state = json::parse(f, nullptr, false);
  if (!state.is_object() || !state.contains("job_id")) return;
  const std::string job_id = state["job_id"].get<std::string>();
  const std::map<std::string, int> states = job_states(job_id);
  os << "slurm job " << job_id << ": " << part_rows(state["dir"].get<std::string>()) << " of " << state["runs"]
     << " runs done";
  if (states.empty()) os << "; the job is over (run the sweep again to merge its results)";
  for (const auto& [st, n] : states) os << ", " << n << " " << st;
  os << "\n";
}

}  // namespace npusim::cli::sweep
