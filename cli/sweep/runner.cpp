#include "cli/sweep/runner.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>

#include "cli/sweep/results.hpp"
#include "common/util/error.hpp"

namespace npusim::cli::sweep {

namespace fs = std::filesystem;
using nlohmann::json;
using Clock = std::chrono::steady_clock;

std::vector<PlannedRun> plan_runs(const Spec& spec) {
  std::vector<PlannedRun> runs;
  for (const Point& p : spec.points)
    for (const Workload& w : spec.workloads) runs.push_back({&p, &w, run_key(p, w)});
  return runs;
}

std::vector<json> read_all_rows(const std::string& out_dir) {
  std::vector<json> rows = read_rows(out_dir + "/results.jsonl");
  for (const std::string& part : slurm_files(out_dir, "part-")) {
    std::vector<json> more = read_rows(part);
    rows.insert(rows.end(), std::make_move_iterator(more.begin()), std::make_move_iterator(more.end()));
  }
  return rows;
}

void sort_rows(const Spec& spec, std::vector<json>& rows) {
  std::map<std::string, std::size_t> order;
  for (std::size_t i = 0; i < spec.workloads.size(); ++i) order[spec.workloads[i].name] = i;
  std::stable_sort(rows.begin(), rows.end(), [&](const json& a, const json& b) {
    const auto pa = a.value("point", std::size_t{0}), pb = b.value("point", std::size_t{0});
    if (pa != pb) return pa < pb;
    return order[a.value("workload", std::string())] < order[b.value("workload", std::string())];
  });
}

namespace {

bool retried(const std::string& status, bool retry_failed) {
  return retry_failed && (status == "failed" || status == "timeout");
}

}  // namespace

void write_record(const Spec& spec, const std::string& out_dir, const std::vector<json>& previous,
                  const std::vector<json>& rows) {
  std::set<std::string> current;
  for (const PlannedRun& r : plan_runs(spec)) current.insert(r.key);
  std::string superseded;
  std::set<std::string> kept;
  for (const json& r : previous) {
    const std::string key = r["key"].get<std::string>();
    if (!current.count(key) && kept.insert(key).second) superseded += row_text(r) + "\n";
  }
  if (!superseded.empty()) std::ofstream(out_dir + "/superseded.jsonl", std::ios::app) << superseded;
  std::string text;
  for (const json& r : rows) text += row_text(r) + "\n";
  write_atomically(out_dir + "/results.jsonl", text);
}

std::vector<json> finished_rows(const Spec& spec, const std::string& out_dir, const std::vector<json>& rows,
                                bool retry_failed) {
  // The newest row of each run key wins (a failed run that was retried and succeeded, a merged Slurm part).
  std::map<std::string, const json*> by_key;
  for (const json& r : rows) by_key[r["key"].get<std::string>()] = &r;
  const ReportStore reports(out_dir);
  std::vector<json> out;
  for (const PlannedRun& run : plan_runs(spec)) {
    const Point& p = *run.point;
    if (!p.error.empty()) {
      out.push_back(make_row(spec, p, *run.workload, "invalid", p.error, 0));
      continue;
    }
    const auto it = by_key.find(run.key);
    if (it == by_key.end()) continue;
    const json& old = *it->second;
    const std::string status = old.value("status", std::string());
    if (status == "invalid" || retried(status, retry_failed)) continue;
    json row = make_row(spec, p, *run.workload, status, old["error"].is_string() ? old["error"].get<std::string>() : "",
                        old.value("wall_s", 0.0));
    if (status == "ok") {
      // The metrics come from the saved report; without it the run is not finished.
      const std::optional<json> report = reports.get(run.key);
      if (!report) continue;
      fill_metrics(row, spec, p, *report);
    }
    out.push_back(std::move(row));
  }
  return out;
}

namespace {

// One npusim process running one run; its stdout (the --json report) and stderr come through pipes.
struct Child {
  pid_t pid = -1;
  std::string key;
  std::vector<std::size_t> runs;  // indices into the planned runs sharing this key
  Clock::time_point start;
  int out_fd = -1, err_fd = -1;   // the pipes' read ends, -1 once at end of file
  std::string out, err;
  bool reaped = false;
  Clock::time_point reaped_at;
  int status = 0;
};

std::string signal_name(int sig) {
  const char* d = sigabbrev_np(sig);
  return d ? std::string("SIG") + d : std::to_string(sig);
}

// The last lines of a run's stderr: its error message.
std::string error_text(const std::string& err) {
  std::vector<std::string> lines;
  std::istringstream in(err);
  std::string line;
  while (std::getline(in, line))
    if (!line.empty()) lines.push_back(line);
  std::string out;
  const std::size_t from = lines.size() > 12 ? lines.size() - 12 : 0;
  for (std::size_t i = from; i < lines.size(); ++i) out += (out.empty() ? "" : "\n") + lines[i];
  if (out.size() > 4000) out = "..." + out.substr(out.size() - 4000);
  return out;
}

std::string duration_text(double s) {
  char buf[32];
  if (s < 60) std::snprintf(buf, sizeof buf, "%.0fs", s);
  else if (s < 3600) std::snprintf(buf, sizeof buf, "%dm%02ds", static_cast<int>(s) / 60, static_cast<int>(s) % 60);
  else std::snprintf(buf, sizeof buf, "%dh%02dm", static_cast<int>(s) / 3600, static_cast<int>(s) % 3600 / 60);
  return buf;
}

// Reads what a pipe holds now; closes it at end of file. Keeps at most `cap` bytes (the tail).
void drain(int& fd, std::string& into, std::size_t cap) {
  char buf[65536];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n > 0) {
      into.append(buf, static_cast<std::size_t>(n));
      if (into.size() > cap) into.erase(0, into.size() - cap);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN) return;
    ::close(fd);  // end of file (or an error: nothing more will come)
    fd = -1;
    return;
  }
}

// Appends whole lines with one write each to a file opened for appending: a kill leaves at most a torn last line,
// which the readers skip.
class Appender {
 public:
  explicit Appender(std::string path) : path_(std::move(path)) {
    fd_ = ::open(path_.c_str(), O_RDWR | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
    if (fd_ < 0) throw InputError(path_ + ": cannot write: " + std::strerror(errno));
    // A line torn by a kill is ended, so the next line is not glued to it (the readers skip the torn one).
    const off_t size = ::lseek(fd_, 0, SEEK_END);
    char last = '\n';
    if (size > 0 && ::pread(fd_, &last, 1, size - 1) == 1 && last != '\n') line("");
  }
  ~Appender() { ::close(fd_); }
  Appender(const Appender&) = delete;
  Appender& operator=(const Appender&) = delete;
  void line(const std::string& text) {
    const std::string l = text + "\n";
    if (::write(fd_, l.data(), l.size()) != static_cast<ssize_t>(l.size()))
      throw InputError(path_ + ": cannot write: " + std::strerror(errno));
  }

 private:
  std::string path_;
  int fd_ = -1;
};

}  // namespace

int run_local(const Spec& spec, const RunOptions& opts) {
  const std::string& out = opts.out_dir;
  std::error_code ec;
  for (const char* sub : {"", "/logs"}) {
    fs::create_directories(out + sub, ec);
    if (ec) throw InputError(out + sub + ": cannot make the folder: " + ec.message());
  }
  const bool part = !opts.results_file.empty();
  const std::string results = part ? opts.results_file : out + "/results.jsonl";
  // A Slurm task keeps its reports beside its rows (part-ID.jsonl -> reports-ID.jsonl).
  const std::string reports_file =
      part ? (fs::path(results).parent_path() / ("reports-" + fs::path(results).stem().string().substr(5) + ".jsonl")).string()
           : out + "/reports.jsonl";
  if (!part) write_atomically(out + "/sweep.json", spec.describe().dump(2) + "\n");

  // What is finished: the rows of every results file; the record is rewritten with this spec's rows (rows of runs
  // the spec no longer has are kept in superseded.jsonl).
  const std::vector<json> previous = part ? read_rows(results) : read_all_rows(out);
  std::vector<json> done = finished_rows(spec, out, previous, opts.retry_failed);
  const std::vector<PlannedRun> runs = plan_runs(spec);
  if (!part) {
    sort_rows(spec, done);
    write_record(spec, out, previous, done);
    retire_slurm_parts(out);  // their rows are in the record now
  }

  // The runs left, grouped by key (points with the same config share a run).
  std::set<std::string> finished_keys;
  std::size_t invalid = 0;
  for (const json& r : done) {
    finished_keys.insert(r["key"].get<std::string>());
    invalid += r["status"] == "invalid";
  }
  std::vector<std::string> order;
  std::map<std::string, std::vector<std::size_t>> pending;
  for (std::size_t i = 0; i < runs.size(); ++i) {
    const PlannedRun& r = runs[i];
    if (!r.point->error.empty() || finished_keys.count(r.key)) continue;
    if (!opts.only_keys.empty() && !opts.only_keys.count(r.key)) continue;
    if (!pending.count(r.key)) order.push_back(r.key);
    pending[r.key].push_back(i);
  }
  std::size_t to_run = 0;
  for (const auto& [k, v] : pending) to_run += v.size();
  const std::size_t earlier = done.size() - invalid;
  if (!opts.quiet) {
    std::cerr << "sweep " << spec.name << ": " << spec.points.size() << " points x " << spec.workloads.size()
              << " workloads = " << runs.size() << " runs";
    if (earlier) std::cerr << "; " << earlier << " finished earlier";
    if (invalid) std::cerr << "; " << invalid << " with an invalid config (recorded, not run)";
    std::cerr << "; " << to_run << " to run, " << opts.jobs << " at a time -> " << out << "\n";
  }

  Appender rows_out(results), reports_out(reports_file);

  // SIGCHLD, SIGINT and SIGTERM arrive through a signalfd polled with the runs' pipes: no handler, no race with a
  // child's end.
  // A sweep started with SIGCHLD ignored (inherited) would have its runs reaped by the kernel and never see them end.
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  sigaction(SIGCHLD, &dfl, nullptr);
  sigset_t wait_set, old_mask;
  sigemptyset(&wait_set);
  sigaddset(&wait_set, SIGCHLD);
  sigaddset(&wait_set, SIGINT);
  sigaddset(&wait_set, SIGTERM);
  sigprocmask(SIG_BLOCK, &wait_set, &old_mask);
  const int sig_fd = signalfd(-1, &wait_set, SFD_CLOEXEC | SFD_NONBLOCK);
  if (sig_fd < 0) {
    sigprocmask(SIG_SETMASK, &old_mask, nullptr);
    throw InputError(std::string("cannot watch the runs (signalfd): ") + std::strerror(errno));
  }

  const bool tty = isatty(STDERR_FILENO);
  const Clock::time_point t0 = Clock::now();
  std::map<pid_t, Child> children;
  std::size_t next = 0, completed = 0, failed = 0;
  bool interrupted = false;
  Clock::time_point interrupted_at;

  auto progress = [&](const std::string& event) {
    if (opts.quiet) return;
    const double elapsed = std::chrono::duration<double>(Clock::now() - t0).count();
    std::ostringstream s;
    s << "[" << completed << "/" << to_run << "] ";
    if (failed) s << failed << " failed, ";
    s << children.size() << " running";
    if (completed && completed < to_run) s << ", ETA " << duration_text(elapsed / completed * (to_run - completed));
    s << ", " << duration_text(elapsed) << " elapsed";
    if (tty) {
      if (!event.empty()) std::cerr << "\r\033[K" << event << "\n";
      std::cerr << "\r\033[K" << s.str() << std::flush;
    } else if (!event.empty()) {
      std::cerr << s.str() << ": " << event << "\n";
    }
  };

  auto spawn = [&](const std::string& key) {
    const PlannedRun& r = runs[pending[key].front()];
    std::vector<std::string> args = {opts.self_exe};
    args.insert(args.end(), r.workload->argv.begin(), r.workload->argv.end());
    args.push_back("--config");
    args.push_back(spec.base);
    for (const std::string& s : r.point->sets) {
      args.push_back("--set");
      args.push_back(s);
    }
    args.push_back("--json");
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    int out_pipe[2], err_pipe[2];
    if (pipe2(out_pipe, O_CLOEXEC) != 0) throw InputError(std::string("cannot start a run: ") + std::strerror(errno));
    if (pipe2(err_pipe, O_CLOEXEC) != 0) {
      ::close(out_pipe[0]);
      ::close(out_pipe[1]);
      throw InputError(std::string("cannot start a run: ") + std::strerror(errno));
    }
    const int null_fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
    const std::string exec_error = "cannot start " + args[0] + "\n";
    const std::string chdir_error = "cannot enter " + opts.run_dir + " (the spec's folder)\n";
    const pid_t parent = getpid();
    // vfork: the child borrows the sweep's memory until it execs, so starting a run copies no page tables (fork's
    // copy-on-write made the sweep's own time per run several times longer). Until execv the child makes system
    // calls only: its own process group (a Ctrl-C reaches the sweep, which stops the runs), ended if the sweep
    // dies, the signal mask the sweep had, the pipes as stdout and stderr, the spec's folder as its own.
    const pid_t pid = vfork();
    if (pid < 0) throw InputError(std::string("cannot start a run: ") + std::strerror(errno));
    if (pid == 0) {
      setpgid(0, 0);
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (getppid() != parent) _exit(127);
      sigprocmask(SIG_SETMASK, &old_mask, nullptr);
      dup2(out_pipe[1], STDOUT_FILENO);
      dup2(err_pipe[1], STDERR_FILENO);
      if (null_fd >= 0) dup2(null_fd, STDIN_FILENO);
      if (!opts.run_dir.empty() && chdir(opts.run_dir.c_str()) != 0) {
        if (::write(STDERR_FILENO, chdir_error.data(), chdir_error.size()) < 0) _exit(126);
        _exit(125);
      }
      execv(argv[0], argv.data());
      if (::write(STDERR_FILENO, exec_error.data(), exec_error.size()) < 0) _exit(126);
      _exit(127);
    }
    setpgid(pid, pid);
    ::close(out_pipe[1]);
    ::close(err_pipe[1]);
    if (null_fd >= 0) ::close(null_fd);
    fcntl(out_pipe[0], F_SETFL, O_NONBLOCK);
    fcntl(err_pipe[0], F_SETFL, O_NONBLOCK);
    Child c;
    c.pid = pid;
    c.key = key;
    c.runs = pending[key];
    c.start = Clock::now();
    c.out_fd = out_pipe[0];
    c.err_fd = err_pipe[0];
    children[pid] = std::move(c);
  };

  auto close_pipes = [](Child& c) {
    if (c.out_fd >= 0) ::close(c.out_fd);
    if (c.err_fd >= 0) ::close(c.err_fd);
    c.out_fd = c.err_fd = -1;
  };

  auto finish = [&](Child& c, const std::string& status_in, std::string error) {
    const double wall = std::chrono::duration<double>(Clock::now() - c.start).count();
    std::string status = status_in;
    json report;
    if (status == "ok") {
      try {
        report = json::parse(c.out);
        reports_out.line(report_line(c.key, report));
      } catch (const json::exception&) {
        status = "failed";
        error = "the run printed no JSON report";
      }
    }
    for (std::size_t i : c.runs) {
      const PlannedRun& r = runs[i];
      json row = make_row(spec, *r.point, *r.workload, status, error, wall);
      if (status == "ok") fill_metrics(row, spec, *r.point, report);
      rows_out.line(row_text(row));
      done.push_back(std::move(row));
      ++completed;
      failed += status != "ok";
    }
    if (status != "ok") std::ofstream(out + "/logs/" + c.key + ".err", std::ios::trunc) << c.err;
    const PlannedRun& r = runs[c.runs.front()];
    std::ostringstream e;
    e << "point " << r.point->index << " " << r.workload->name << " " << status;
    char buf[32];
    std::snprintf(buf, sizeof buf, " (%.2fs)", wall);
    e << buf;
    if (status != "ok") e << ": " << error.substr(error.rfind('\n') == std::string::npos ? 0 : error.rfind('\n') + 1);
    progress(e.str());
  };

  // A run is over when it has been reaped and both its pipes are at end of file (whatever it wrote last is read).
  auto settle = [&](std::map<pid_t, Child>::iterator it) {
    Child& c = it->second;
    // A process the run left behind may hold a pipe open: take what is there and stop waiting.
    if (c.out_fd >= 0) drain(c.out_fd, c.out, std::string::npos);
    if (c.err_fd >= 0) drain(c.err_fd, c.err, 1 << 20);
    close_pipes(c);
    const int st = c.status;
    if (WIFEXITED(st) && WEXITSTATUS(st) == 0) {
      finish(c, "ok", "");  // finished before an interruption reached it: a result all the same
    } else if (interrupted) {
      // stopped by the sweep: not a result
    } else if (WIFEXITED(st)) {
      std::string err = error_text(c.err);
      if (err.empty()) err = "exit status " + std::to_string(WEXITSTATUS(st));
      finish(c, "failed", err);
    } else {
      finish(c, "failed", "killed by " + signal_name(WTERMSIG(st)));
    }
    children.erase(it);
  };

  progress("");
  std::vector<pollfd> fds;
  std::vector<pid_t> owner;
  while (true) {
    while (!interrupted && children.size() < opts.jobs && next < order.size()) spawn(order[next++]);
    if (children.empty()) break;
    // Wait for output, a signal, the first run's --timeout, or a second (progress on a terminal).
    double wait_s = 1.0;
    if (opts.timeout_s > 0 && !interrupted)
      for (const auto& [cpid, c] : children)
        wait_s = std::min(wait_s, opts.timeout_s - std::chrono::duration<double>(Clock::now() - c.start).count());
    const int wait_ms = static_cast<int>(std::ceil(std::max(wait_s, 0.001) * 1000));
    fds.assign(1, pollfd{sig_fd, POLLIN, 0});
    owner.assign(1, 0);
    for (const auto& [cpid, c] : children) {
      for (int fd : {c.out_fd, c.err_fd}) {
        if (fd < 0) continue;
        fds.push_back(pollfd{fd, POLLIN, 0});
        owner.push_back(cpid);
      }
    }
    const int ready = poll(fds.data(), fds.size(), wait_ms);
    if (ready < 0 && errno != EINTR) throw InputError(std::string("cannot watch the runs (poll): ") + std::strerror(errno));
    for (std::size_t i = 1; ready > 0 && i < fds.size(); ++i) {
      if (!(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      Child& c = children.at(owner[i]);
      if (fds[i].fd == c.out_fd) drain(c.out_fd, c.out, std::string::npos);
      else if (fds[i].fd == c.err_fd) drain(c.err_fd, c.err, 1 << 20);
    }
    if (fds[0].revents & POLLIN) {
      signalfd_siginfo si;
      while (::read(sig_fd, &si, sizeof si) == static_cast<ssize_t>(sizeof si)) {
        if (si.ssi_signo != SIGINT && si.ssi_signo != SIGTERM) continue;
        if (!interrupted) {
          interrupted = true;
          interrupted_at = Clock::now();
          if (!opts.quiet) std::cerr << (tty ? "\r\033[K" : "") << "sweep: interrupted; stopping " << children.size() << " runs\n";
          for (const auto& [cpid, c] : children) kill(-cpid, SIGTERM);
        } else {
          for (const auto& [cpid, c] : children) kill(-cpid, SIGKILL);  // a second Ctrl-C: now
        }
      }
    }
    // Reap every child that ended (SIGCHLD may merge several ends into one signal).
    int status = 0;
    pid_t pid;
    while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
      auto it = children.find(pid);
      if (it == children.end()) continue;
      it->second.reaped = true;
      it->second.reaped_at = Clock::now();
      it->second.status = status;
      // What it wrote before it ended is in the pipes now.
      if (it->second.out_fd >= 0) drain(it->second.out_fd, it->second.out, std::string::npos);
      if (it->second.err_fd >= 0) drain(it->second.err_fd, it->second.err, 1 << 20);
    }
    // Settle the ended runs whose pipes are closed, and those whose pipes a process they left behind has kept open
    // for a second.
    for (auto it = children.begin(); it != children.end();) {
      auto here = it++;
      const Child& c = here->second;
      if (c.reaped && ((c.out_fd < 0 && c.err_fd < 0) ||
                       std::chrono::duration<double>(Clock::now() - c.reaped_at).count() > 1.0))
        settle(here);
    }
    // Runs that ignore the SIGTERM of an interruption are killed after 5 s.
    if (interrupted && std::chrono::duration<double>(Clock::now() - interrupted_at).count() > 5.0)
      for (const auto& [cpid, c] : children) kill(-cpid, SIGKILL);
    if (opts.timeout_s > 0 && !interrupted) {
      for (auto it = children.begin(); it != children.end();) {
        auto here = it++;
        Child& c = here->second;
        if (c.reaped || std::chrono::duration<double>(Clock::now() - c.start).count() <= opts.timeout_s) continue;
        kill(-here->first, SIGKILL);
        waitpid(here->first, &status, 0);
        close_pipes(c);
        char buf[64];
        std::snprintf(buf, sizeof buf, "no result within --timeout %gs", opts.timeout_s);
        finish(c, "timeout", buf);
        children.erase(here);
      }
    }
    if (ready == 0 && tty) progress("");
  }
  ::close(sig_fd);
  sigprocmask(SIG_SETMASK, &old_mask, nullptr);
  if (tty && !opts.quiet) std::cerr << "\r\033[K";

  if (!part) {
    sort_rows(spec, done);
    write_csv(out + "/results.csv", spec, done);
  }
  if (!opts.quiet) {
    const double elapsed = std::chrono::duration<double>(Clock::now() - t0).count();
    // The sweep's own CPU time (this process, not its runs): what exploring costs on top of simulating.
    rusage self{};
    getrusage(RUSAGE_SELF, &self);
    const double own_ms = (self.ru_utime.tv_sec + self.ru_stime.tv_sec) * 1e3 + (self.ru_utime.tv_usec + self.ru_stime.tv_usec) / 1e3;
    std::cerr << "sweep " << spec.name << ": " << completed << " runs in " << duration_text(elapsed) << " (the sweep's own CPU: "
              << static_cast<long>(own_ms + 0.5) << " ms)";
    if (failed) std::cerr << ", " << failed << " failed (their errors are in the results)";
    if (interrupted) std::cerr << "; interrupted with " << (to_run - completed) << " not run: run the same command to resume";
    std::cerr << "\n";
    if (!part) std::cerr << "results: " << out << "/results.csv, " << out << "/results.jsonl\n";
  }
  return interrupted ? 130 : 0;
}

}  // namespace npusim::cli::sweep
