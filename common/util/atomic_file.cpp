#include "common/util/atomic_file.hpp"

#include <unistd.h>

#include <atomic>
#include <csignal>
#include <cstdio>
#include <cstring>

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
  tmp_ = path_ + ".part-" + std::to_string(::getpid());
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
    std::remove(tmp_.c_str());
    open_ = false;
  }
  release(slot_);
  slot_ = -1;
}

void AtomicFile::commit() {
  if (!open_) return;
  out_.flush();
  out_.close();
  if (!out_) {
    discard();
    throw InputError(path_ + ": error while writing (disk full?)");
  }
  if (std::rename(tmp_.c_str(), path_.c_str()) != 0) {
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
  f.stream().write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
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
