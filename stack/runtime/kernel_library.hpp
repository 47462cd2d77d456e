// User kernels built against the kernel SDK (firmware/kernel/sdk): compiling a kernel source with the host's C++
// compiler (cached by content), loading the kernel library, finding an entry point and making the body a launch
// runs on every core. docs/kernel-sdk.md describes the whole path.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "hw/core/core_engine.hpp"
#include "hw/mem/device_memory.hpp"

namespace npusim_sdk {
struct EntryInfo;
}

namespace npusim::stack::runtime {

enum class ArgKind : std::uint8_t { kPointer = 0, kSigned = 1, kUnsigned = 2, kFloat = 3 };
std::string arg_kind_name(ArgKind k);  // "GM_ADDR", "signed integer", ...

struct KernelEntry {
  std::string name;
  std::vector<ArgKind> kinds;
  std::vector<std::uint8_t> sizes;
  const npusim_sdk::EntryInfo* info = nullptr;
};

// A loaded kernel library. Libraries stay loaded until the process ends (their code may run in any launch).
class KernelLibrary {
 public:
  // Throws InputError naming the file: not loadable, no entry table (not built with the SDK), another SDK version.
  static KernelLibrary open(const std::string& path);
  // Throws InputError listing the library's entries when `name` is not one of them.
  const KernelEntry& entry(const std::string& name) const;
  const std::vector<KernelEntry>& entries() const { return entries_; }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  std::vector<KernelEntry> entries_;
};

struct CompileOptions {
  std::string compiler;              // empty: $CXX, else c++
  std::vector<std::string> flags;    // added after the SDK's own (e.g. -DTILE=64, -I...)
  std::string cache_dir;             // empty: $NPUSIM_CACHE_DIR, $XDG_CACHE_HOME/npusim, ~/.cache/npusim
  bool verbose = true;               // say on stderr when the compiler runs
};

// The `__global__` functions a kernel source declares (a textual scan, for defaults and errors).
std::vector<std::string> global_functions(const std::string& source_path);

// Compiles `source` into a kernel library exporting `entries`, or reuses the cached library when the source, every
// file it includes, the compiler and the flags are unchanged. The compiler's messages go to stderr as it printed
// them; a failed compile throws InputError. Returns the library's path.
std::string compile_kernel(const std::string& source, const std::vector<std::string>& entries,
                           const CompileOptions& opts);

// Where the SDK's headers are: the installed tree beside this executable (PREFIX/include/npusim) or the source
// tree the binary was built from. Throws InputError when neither has kernel_operator.h.
std::vector<std::string> sdk_include_dirs();

// One argument of a launch as the kernel receives it (a pointer into the device-memory view, or a scalar's word).
// The body runs `entry` on each core of each block; GM accesses outside `bounds` are kernel errors.
std::function<void()> kernel_body(const KernelEntry& entry, std::vector<std::uint64_t> words,
                                  const hw::mem::DeviceMemory& memory,
                                  std::vector<hw::core::CoreEngine::GmRange> bounds);

}  // namespace npusim::stack::runtime
