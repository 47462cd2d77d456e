// Output files that appear complete or not at all (results, traces, summaries, statistics, --outputs tensors).
//
// An AtomicFile writes to a temporary name beside its path ("<path>.part-<pid>", which no reader takes for the
// result) and commit() renames it over the path once everything is written and flushed. A path that is a device or
// a pipe (/dev/null, /dev/stdout) is written in place instead, and its write errors reported the same way. Dropped
// without commit (an error or exception on the way), it removes the temporary. A run stopped by SIGINT or SIGTERM
// removes the temporaries still open in the handler that install_interrupt_handler() sets up, prints one line and exits
// 128 + the signal's number, as a shell reports a signal.
#pragma once

#include <fstream>
#include <ostream>
#include <string>

namespace npusim {

class AtomicFile {
 public:
  // Opens the temporary; InputError naming `path` when it cannot be created.
  explicit AtomicFile(std::string path);
  ~AtomicFile();
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  std::ostream& stream() { return out_; }
  // Flushes, closes and renames the temporary to the path; InputError naming the path when any step failed (the
  // temporary is removed then). Once committed, further calls do nothing.
  void commit();
  const std::string& path() const { return path_; }

 private:
  void discard() noexcept;

  std::string path_, target_, tmp_;  // target_: the regular file replaced (path_, or the file its symlink names)
  std::ofstream out_;
  int slot_ = -1;  // in the interrupt handler's table of open temporaries, or -1
  bool open_ = false;
  bool direct_ = false;  // path_ is a device or a pipe, written in place
};

// Writes `bytes` to `path` through an AtomicFile.
void write_file_atomically(const std::string& path, const std::string& bytes);

// SIGINT and SIGTERM: remove the open AtomicFile temporaries, print "npusim: interrupted by SIG...; no output file
// was left half-written" on stderr and exit 128 + signal. Called once by a program's main.
void install_interrupt_handler();

}  // namespace npusim
