#include "stack/runtime/kernel_library.hpp"

#include <dlfcn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <cctype>
#include <set>
#include <sstream>

#include "common/util/error.hpp"
#include "common/util/file.hpp"
#include "common/util/self_exe.hpp"
#include "firmware/kernel/context.hpp"
#include "firmware/kernel/sdk/npusim_kernel_entry.h"

#ifndef NPUSIM_SOURCE_DIR
#error "NPUSIM_SOURCE_DIR must name the source tree (stack/CMakeLists.txt defines it)"
#endif

namespace npusim::stack::runtime {

namespace fs = std::filesystem;

std::string arg_kind_name(ArgKind k) {
  switch (k) {
    case ArgKind::kPointer: return "GM_ADDR";
    case ArgKind::kSigned: return "signed integer";
    case ArgKind::kUnsigned: return "unsigned integer";
    case ArgKind::kFloat: return "floating-point number";
  }
  return "?";
}

// --- Loading ------------------------------------------------------------------------------------------------------

KernelLibrary KernelLibrary::open(const std::string& path) {
  if (!fs::is_regular_file(path)) throw InputError(path + ": no such kernel library");
  // A path without a slash would be searched for in the system's library directories.
  const std::string abs = fs::absolute(path).string();
  void* handle = dlopen(abs.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    throw InputError(path + ": cannot load the kernel library: " + std::string(dlerror()) +
                     " (was it built against this npusim's SDK?)");
  }
  using TableFn = const npusim_sdk::EntryTable* (*)();
  auto fn = reinterpret_cast<TableFn>(dlsym(handle, "npusim_sdk_entries"));
  if (!fn) {
    throw InputError(path + ": no npusim entry table (npusim_sdk_entries): build the library with npusim_add_kernel() "
                     "from find_package(npusim), or pass the kernel's source file");
  }
  const npusim_sdk::EntryTable* table = fn();
  if (!table || table->abi != npusim_sdk::kAbiVersion) {
    throw InputError(path + ": built against kernel SDK ABI " + std::to_string(table ? table->abi : 0) +
                     ", this npusim has ABI " + std::to_string(npusim_sdk::kAbiVersion) + ": rebuild it");
  }
  KernelLibrary lib;
  lib.path_ = path;
  for (std::uint32_t i = 0; i < table->count; ++i) {
    const npusim_sdk::EntryInfo& e = table->entries[i];
    KernelEntry k;
    k.name = e.name;
    k.info = &e;
    for (std::uint32_t a = 0; a < e.argc; ++a) {
      k.kinds.push_back(static_cast<ArgKind>(e.kinds[a]));
      k.sizes.push_back(e.sizes[a]);
    }
    lib.entries_.push_back(std::move(k));
  }
  return lib;  // the handle stays open: the entries' code runs in launches until the process ends
}

const KernelEntry& KernelLibrary::entry(const std::string& name) const {
  std::string names;
  for (const KernelEntry& e : entries_) {
    if (e.name == name) return e;
    names += (names.empty() ? "" : ", ") + e.name;
  }
  throw InputError(path_ + ": no kernel entry '" + name + "' (the library has: " + (names.empty() ? "none" : names) + ")");
}

// --- Compiling ----------------------------------------------------------------------------------------------------

namespace {

std::uint64_t fnv1a(const std::string& s, std::uint64_t h = 1469598103934665603ULL) {
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ULL;
  }
  return h;
}

std::string hex(std::uint64_t v) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

bool read_source(const std::string& path, std::string& out) {
  return read_bounded(path, kMaxInputFileBytes, out) == ReadStatus::kOk;
}

std::string file_hash(const std::string& path) {
  std::string text;
  return read_source(path, text) ? hex(fnv1a(text)) : std::string("missing");
}

std::string cache_root(const CompileOptions& opts) {
  if (!opts.cache_dir.empty()) return opts.cache_dir;
  if (const char* d = std::getenv("NPUSIM_CACHE_DIR"); d && *d) return d;
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x) return std::string(x) + "/npusim";
  if (const char* h = std::getenv("HOME"); h && *h) return std::string(h) + "/.cache/npusim";
  return "/tmp/npusim-cache-" + std::to_string(getuid());
}

// The files a compile read, from the compiler's make-style dependency file.
std::vector<std::string> dependencies(const std::string& dep_file) {
  std::string text;
  if (!read_source(dep_file, text)) return {};
  std::vector<std::string> out;
  std::string cur;
  bool after_colon = false;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '\\' && i + 1 < text.size() && (text[i + 1] == '\n' || text[i + 1] == ' ')) {
      if (text[i + 1] == ' ') cur += ' ';
      ++i;
      continue;
    }
    if (c == ' ' || c == '\n' || c == '\t') {
      if (!cur.empty()) {
        if (!after_colon && cur.back() == ':') after_colon = true;
        else if (after_colon) out.push_back(cur);
        cur.clear();
      }
      continue;
    }
    cur += c;
  }
  if (!cur.empty() && after_colon) out.push_back(cur);
  return out;
}

// Runs argv with its stdout sent to stderr (the caller's stdout may be a JSON report); returns the exit status.
int run_compiler(const std::vector<std::string>& argv) {
  std::vector<char*> args;
  args.reserve(argv.size() + 1);
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  std::cout.flush();
  std::cerr.flush();
  const pid_t pid = fork();
  if (pid < 0) throw InputError("cannot start the compiler: " + std::string(std::strerror(errno)));
  if (pid == 0) {
    dup2(2, 1);
    execvp(args[0], args.data());
    std::fprintf(stderr, "npusim: error: cannot run the compiler '%s': %s\n", args[0], std::strerror(errno));
    _exit(127);
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) throw InputError("waiting for the compiler failed: " + std::string(std::strerror(errno)));
  }
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  return 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
}

std::vector<std::string> split_words(const char* s) {
  std::vector<std::string> out;
  std::istringstream in(s ? s : "");
  for (std::string w; in >> w;) out.push_back(w);
  return out;
}

}  // namespace

std::vector<std::string> sdk_include_dirs() {
  const std::string rel = "firmware/kernel/sdk/kernel_operator.h";
  const fs::path exe = self_executable();
  std::vector<fs::path> roots;
  if (!exe.empty()) roots.push_back(exe.parent_path().parent_path() / "include" / "npusim");  // installed: PREFIX/bin/npusim
  roots.push_back(NPUSIM_SOURCE_DIR);                                               // the build tree
  for (const fs::path& r : roots) {
    if (fs::is_regular_file(r / rel)) return {(r / "firmware/kernel/sdk").string(), r.string()};
  }
  throw InputError("the kernel SDK's headers are not found (looked for " + rel + " under " + roots.front().string() +
                   " and " + std::string(NPUSIM_SOURCE_DIR) + ")");
}

std::vector<std::string> global_functions(const std::string& source_path) {
  std::string text;
  text = read_file(source_path, "cannot read the kernel source");
  // Comments and string literals out (a plain scan; std::regex is slow on big sources), then every
  // `__global__ ... name(` with no ';', '{' or '}' in between.
  std::string code;
  code.reserve(text.size());
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text.compare(i, 2, "//") == 0) {
      while (i < text.size() && text[i] != '\n') ++i;
      code += '\n';
    } else if (text.compare(i, 2, "/*") == 0) {
      const std::size_t e = text.find("*/", i + 2);
      i = e == std::string::npos ? text.size() : e + 1;
      code += ' ';
    } else if (text[i] == '"') {
      for (++i; i < text.size() && text[i] != '"'; ++i)
        if (text[i] == '\\') ++i;
      code += "\"\"";
    } else {
      code += text[i];
    }
  }
  const auto ident = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; };
  std::vector<std::string> names;
  for (std::size_t at = code.find("__global__"); at != std::string::npos; at = code.find("__global__", at + 10)) {
    if ((at > 0 && ident(code[at - 1])) || (at + 10 < code.size() && ident(code[at + 10]))) continue;
    const std::size_t paren = code.find_first_of("(;{}", at + 10);
    if (paren == std::string::npos || code[paren] != '(') continue;
    std::size_t e = paren;
    while (e > at && std::isspace(static_cast<unsigned char>(code[e - 1]))) --e;
    std::size_t b = e;
    while (b > at && ident(code[b - 1])) --b;
    const std::string n = code.substr(b, e - b);
    if (!n.empty() && n != "__global__" && !std::isdigit(static_cast<unsigned char>(n[0])) &&
        std::find(names.begin(), names.end(), n) == names.end()) {
      names.push_back(n);
    }
  }
  return names;
}

std::string compile_kernel(const std::string& source, const std::vector<std::string>& entries,
                           const CompileOptions& opts) {
  std::string text;
  text = read_file(source, "cannot read the kernel source");
  if (entries.empty()) throw InputError(source + ": no kernel entry to export");
  const std::string abs = fs::absolute(source).lexically_normal().string();
  const std::vector<std::string> includes = sdk_include_dirs();

  std::vector<std::string> compiler = opts.compiler.empty() ? split_words(std::getenv("CXX")) : split_words(opts.compiler.c_str());
  if (compiler.empty()) compiler = {"c++"};
  std::vector<std::string> argv = compiler;
  for (const char* f : {"-std=c++17", "-O2", "-fPIC", "-shared", "-fvisibility=hidden", "-fno-omit-frame-pointer"})
    argv.push_back(f);
  for (const std::string& d : includes) argv.push_back("-I" + d);
  for (const std::string& f : opts.flags) argv.push_back(f);

  // The key: everything that decides the library except the included files, which the .deps record checks.
  std::string key_text = "abi " + std::to_string(npusim_sdk::kAbiVersion) + "\nsource " + abs + "\n" + text + "\n";
  for (const std::string& a : argv) key_text += "arg " + a + "\n";
  for (const std::string& e : entries) key_text += "entry " + e + "\n";
  const fs::path dir = fs::path(cache_root(opts)) / "kernels";
  const std::string key = hex(fnv1a(key_text));
  const fs::path lib = dir / (key + ".so"), deps = dir / (key + ".deps");

  // Reuse when every recorded dependency still hashes the same.
  if (fs::is_regular_file(lib) && fs::is_regular_file(deps)) {
    std::ifstream in(deps);
    bool fresh = true;
    for (std::string hash, path; in >> hash && std::getline(in >> std::ws, path);) {
      if (file_hash(path) != hash) fresh = false;
    }
    if (fresh) return lib.string();
  }

  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw InputError("cannot create the kernel cache " + dir.string() + ": " + ec.message());
  const std::string tmp_tag = "." + std::to_string(getpid()) + ".tmp";
  const fs::path stub = dir / (key + "_entries.cpp");
  {
    std::ofstream out(stub.string() + tmp_tag);
    out << "// Generated by npusim: the kernel source and its entry table (npusim_kernel_entry.h).\n"
        << "#include \"" << abs << "\"\n#include \"npusim_kernel_entry.h\"\nNPUSIM_ENTRY_TABLE_BEGIN\n";
    for (const std::string& e : entries) out << "NPUSIM_ENTRY(" << e << ")\n";
    out << "NPUSIM_ENTRY_TABLE_END\n";
    if (!out) throw InputError("cannot write " + stub.string() + tmp_tag);
  }
  fs::rename(stub.string() + tmp_tag, stub, ec);
  const std::string lib_tmp = lib.string() + tmp_tag, dep_tmp = deps.string() + ".d" + tmp_tag;
  argv.push_back("-I" + fs::path(abs).parent_path().string());
  argv.insert(argv.end(), {"-MD", "-MF", dep_tmp, stub.string(), "-o", lib_tmp});
  if (opts.verbose) std::cerr << "npusim: compiling " << source << " (" << compiler.front() << ")\n";
  const int status = run_compiler(argv);
  if (status != 0) {
    fs::remove(lib_tmp, ec);
    fs::remove(dep_tmp, ec);
    throw InputError(source + ": the kernel does not compile (" + compiler.front() + " exit status " +
                     std::to_string(status) + "; its messages are above)");
  }
  {
    std::ofstream out(deps.string() + tmp_tag);
    for (const std::string& d : dependencies(dep_tmp)) {
      if (d == stub.string()) continue;
      out << file_hash(d) << " " << d << "\n";
    }
  }
  fs::remove(dep_tmp, ec);
  fs::rename(lib_tmp, lib);
  fs::rename(deps.string() + tmp_tag, deps);
  return lib.string();
}

// --- Launch body --------------------------------------------------------------------------------------------------

std::function<void()> kernel_body(const KernelEntry& entry, std::vector<std::uint64_t> words,
                                  const hw::mem::DeviceMemory& memory,
                                  std::vector<hw::core::CoreEngine::GmRange> bounds) {
  if (words.size() != entry.kinds.size()) {
    throw std::logic_error("kernel_body: " + std::to_string(words.size()) + " words for " +
                           std::to_string(entry.kinds.size()) + " parameters");
  }
  const npusim_sdk::EntryInfo* info = entry.info;
  return [info, words = std::move(words), mem = &memory, bounds = std::move(bounds)] {
    fw::kernel::KernelContext& c = fw::kernel::ctx();
    c.gm_view = mem;
    c.engine->set_gm_bounds(bounds);
    info->invoke(words.data());
    c.engine->set_gm_bounds({});
  };
}

}  // namespace npusim::stack::runtime
