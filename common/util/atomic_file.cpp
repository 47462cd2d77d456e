#include "common/util/atomic_file.hpp"

#include <unistd.h>

#include <atomic>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "common/util/error.hpp"

namespace npusim {

namespace {

// The open temporaries, for the signal handler: fixed storage it can read without allocating (unlink and write are
// async-signal-safe). A slot is taken, its path written, and only then marked ready, so the handler never reads a
// path being copied. A file that finds no free slot is still atomic; only an interrupt would leave its temporary.
constexpr int kSlots = 64;
constexpr std::size_t kPathMax = 4096;
char g_tmp[kSlots][kPathMax];
std::atomic<bool> g_taken[kSlots], g_ready[kSlots];

int claim(const std::string& tmp) {
  if (tmp.size() >= kPathMax) return -1;
  for (int i = 0; i < kSlots; ++i) {
    bool expected = false;
    if (g_taken[i].compare_exchange_strong(expected, true)) {
      std::memcpy(g_tmp[i], tmp.c_str(), tmp.size() + 1);
      g_ready[i].store(true);
      return i;
    }
  }
  return -1;
}

void release(int slot) {
  if (slot < 0) return;
  g_ready[slot].store(false);
  g_taken[slot].store(false);
}

extern "C" void on_interrupt(int sig) {
  for (int i = 0; i < kSlots; ++i)
    if (g_ready[i].load()) ::unlink(g_tmp[i]);
  const char* name = sig == SIGINT ? "SIGINT" : sig == SIGTERM ? "SIGTERM" : "a signal";
  const char* parts[] = {"npusim: interrupted by ", name, "; no output file was left half-written\n"};
  for (const char* p : parts) {
    const ssize_t n = ::write(STDERR_FILENO, p, std::strlen(p));
    (void)n;
  }
  ::_exit(128 + sig);
}

}  // namespace

AtomicFile::AtomicFile(std::string path) : path_(std::move(path)) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::file_status st = fs::status(path_, ec);  // through symlinks
  if (ec && ec != std::errc::no_such_file_or_directory) {
    throw InputError(path_ + ": cannot be written (" + ec.message() + ")");  // a symlink loop, a denied directory
  }
  if (fs::is_directory(st)) throw InputError(path_ + ": cannot be written (it is a directory)");
  // Through a symlink, the file it names is replaced and the link kept. A path through /dev or /proc is a
  // process's stream or a device (/dev/stdout -> /proc/self/fd/1 -> a file the shell holds open): written in place,
  // as a rename would leave the shell writing to a file no longer linked.
  fs::path target = path_;
  bool special = path_.rfind("/dev/", 0) == 0 || path_.rfind("/proc/", 0) == 0;
  for (int hops = 0; fs::is_symlink(fs::symlink_status(target, ec)); ++hops) {
    const fs::path next = fs::read_symlink(target, ec);
    if (ec || hops == 40) throw InputError(path_ + ": cannot be written (a symlink chain that does not end)");
    target = next.is_absolute() ? next : target.parent_path() / next;
    special = special || target.string().rfind("/dev/", 0) == 0 || target.string().rfind("/proc/", 0) == 0;
  }
  if ((fs::exists(st) && !fs::is_regular_file(st)) || special) {
    // A device or a pipe (/dev/null, /dev/stdout, a FIFO): written in place. Renaming a file over it would replace
    // the device node itself (as root, /dev/full became a regular file).
    direct_ = true;
    out_.open(path_, std::ios::binary | std::ios::app);  // a file behind /dev/stdout is appended to, not cut
    if (!out_) throw InputError(path_ + ": cannot be written (" + std::strerror(errno) + ")");
    open_ = true;
    return;
  }
  target_ = target.string();
  tmp_ = target_ + ".part-" + std::to_string(::getpid());
  slot_ = claim(tmp_);
  out_.open(tmp_, std::ios::binary | std::ios::trunc);
  if (!out_) {
    release(slot_);
    slot_ = -1;
    throw InputError(path_ + ": cannot be written (" + std::strerror(errno) + ")");
  }
  open_ = true;
}

AtomicFile::~AtomicFile() {
  discard();
}

void AtomicFile::discard() noexcept {
  if (open_) {
    out_.close();
    if (!direct_) std::remove(tmp_.c_str());
    open_ = false;
  }
  release(slot_);
  slot_ = -1;
}

void AtomicFile::commit() {
  if (!open_) return;
  if (out_) {
    errno = 0;  // else errno still tells why the stream failed (write_file_atomically flushes right after writing)
    out_.flush();
  }
  out_.close();
  if (!out_) {
    const std::string why = errno != 0 ? std::strerror(errno) : "disk full?";
    discard();
    throw InputError(path_ + ": error while writing (" + why + ")");
  }
  if (direct_) {
    open_ = false;
    return;
  }
  if (std::rename(tmp_.c_str(), target_.c_str()) != 0) {
    const std::string why = std::strerror(errno);
    discard();
    throw InputError(path_ + ": cannot be written (" + why + ")");
  }
  open_ = false;
  release(slot_);
  slot_ = -1;
}

void write_file_atomically(const std::string& path, const std::string& bytes) {
  AtomicFile f(path);
  errno = 0;
  f.stream().write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  f.stream().flush();
  f.commit();
}

void install_interrupt_handler() {
  struct sigaction sa {};
  sa.sa_handler = on_interrupt;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
}

}  // namespace npusim
