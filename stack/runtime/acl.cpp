// The ACL host API (stack/runtime/sdk/acl/acl.h) over the runtime's Device, driven one call at a time: each call
// runs on the simulated host thread (Device::call), so its host overheads and waits are on the timeline.
#include "acl/acl.h"

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <string>

#include "common/config/loader.hpp"
#include "common/util/error.hpp"
#include "stack/runtime/kernel_library.hpp"
#include "stack/runtime/report.hpp"
#include "stack/runtime/run_outputs.hpp"
#include "stack/runtime/runtime.hpp"

namespace rt = npusim::stack::runtime;

namespace {

struct StreamHandle {
  rt::Stream s;
};
struct EventHandle {
  rt::Event e;
};

struct AclState {
  bool initialised = false;
  bool device_used = false;  // SystemC elaborates once per process: one device
  std::unique_ptr<npusim::config::LoadedConfig> loaded;
  std::unique_ptr<rt::RunOutputs> outputs;
  std::unique_ptr<rt::Device> dev;
  std::string json_path;
  rt::Stream default_stream;
  std::set<StreamHandle*> streams;
  std::set<EventHandle*> events;
  std::map<std::uint64_t, std::uint64_t> allocations;  // device address -> bytes
  std::set<void*> host_allocations;
  npusim::fw::kernel::KernelType kernel_type = npusim::fw::kernel::KernelType::kVector;
  std::string last_error;
  std::chrono::steady_clock::time_point start;
};

AclState& state() {
  static AclState s;
  return s;
}

aclError fail(aclError code, const std::string& what) {
  state().last_error = what;
  std::cerr << "npusim: error: " << what << "\n";
  return code;
}

// Runs `f`, turning exceptions into an error code and a message (printed, and kept for aclGetRecentErrMsg).
template <class F>
aclError guarded(const char* api, F f) {
  try {
    f();
    return ACL_SUCCESS;
  } catch (const npusim::InputError& e) {
    return fail(ACL_ERROR_RT_FAILURE, std::string(api) + ": " + e.what());
  } catch (const std::exception& e) {
    return fail(ACL_ERROR_RT_FAILURE, std::string(api) + ": internal error: " + e.what());
  }
}

rt::Device& device(const char* api) {
  AclState& s = state();
  if (!s.dev || s.dev->stopped()) {
    throw npusim::InputError(s.dev ? "the device stopped after an earlier error" : "no device: call aclrtSetDevice first");
  }
  (void)api;
  return *s.dev;
}

rt::Stream stream_of(aclrtStream h) {
  AclState& s = state();
  if (!h) return s.default_stream;
  auto* sh = static_cast<StreamHandle*>(h);
  if (!s.streams.count(sh)) throw npusim::InputError("the stream handle is not a live stream (aclrtCreateStream)");
  return sh->s;
}

rt::Event event_of(aclrtEvent h) {
  auto* eh = static_cast<EventHandle*>(h);
  if (!h || !state().events.count(eh)) throw npusim::InputError("the event handle is not a live event (aclrtCreateEvent)");
  return eh->e;
}

// The device address of a pointer aclrtMalloc returned (or an offset into such a block), checked for `bytes`.
std::uint64_t device_address(const void* p, std::uint64_t bytes, const char* what) {
  rt::Device& d = device(what);
  std::uint64_t addr = 0;
  if (!d.chip().memory().device_address(p, bytes, addr)) {
    throw npusim::InputError(std::string(what) + " is not device memory (a pointer from aclrtMalloc)");
  }
  for (const auto& [base, size] : state().allocations) {
    if (addr >= base && addr - base <= size && bytes <= size - (addr - base)) return addr;
  }
  throw npusim::InputError(std::string(what) + ": " + std::to_string(bytes) + " B at device address " +
                           std::to_string(addr) + " are not inside one aclrtMalloc block");
}

std::vector<std::string> split_sets(const char* env) {
  std::vector<std::string> out;
  if (!env) return out;
  std::stringstream ss(env);
  for (std::string kv; std::getline(ss, kv, ';');)
    if (!kv.empty()) out.push_back(kv);
  return out;
}

const char* env(const char* name) {
  const char* v = std::getenv(name);
  return v && *v ? v : nullptr;
}

}  // namespace

extern "C" {

aclError aclInit(const char*) {
  AclState& s = state();
  if (s.initialised) return fail(ACL_ERROR_REPEAT_INITIALIZE, "aclInit: already initialised");
  s.initialised = true;
  return ACL_SUCCESS;
}

aclError aclFinalize() {
  AclState& s = state();
  if (!s.initialised) return fail(ACL_ERROR_UNINITIALIZE, "aclFinalize: aclInit was not called");
  aclError e = ACL_SUCCESS;
  if (s.dev) e = aclrtResetDevice(0);
  s.initialised = false;
  return e;
}

aclError aclrtGetDeviceCount(uint32_t* count) {
  if (!count) return fail(ACL_ERROR_INVALID_PARAM, "aclrtGetDeviceCount: count is null");
  *count = 1;
  return ACL_SUCCESS;
}

aclError aclrtSetDevice(int32_t deviceId) {
  AclState& s = state();
  if (deviceId != 0) return fail(ACL_ERROR_INVALID_DEVICE, "aclrtSetDevice: the simulated machine has device 0 only");
  if (s.dev) return ACL_SUCCESS;
  if (s.device_used) {
    return fail(ACL_ERROR_INVALID_DEVICE, "aclrtSetDevice: the device was reset; a process simulates one device run");
  }
  return guarded("aclrtSetDevice", [&] {
    setenv("SYSTEMC_DISABLE_COPYRIGHT_MESSAGE", "1", 1);
    std::vector<std::string> sets = split_sets(env("NPUSIM_SET"));
    if (const char* san = env("NPUSIM_SANITIZE"); san && std::string(san) != "0") sets.push_back("sim.sanitize=true");
    s.loaded = std::make_unique<npusim::config::LoadedConfig>(
        npusim::config::load_config(env("NPUSIM_CONFIG") ? env("NPUSIM_CONFIG") : npusim::config::kDefaultConfig, sets));
    const std::string mode = env("NPUSIM_MODE") ? env("NPUSIM_MODE") : "functional";
    if (mode != "functional" && mode != "timing") throw npusim::InputError("NPUSIM_MODE=" + mode + ": functional or timing");
    const std::string type = env("NPUSIM_KERNEL_TYPE") ? env("NPUSIM_KERNEL_TYPE") : "vector";
    if (type == "vector") s.kernel_type = npusim::fw::kernel::KernelType::kVector;
    else if (type == "cube") s.kernel_type = npusim::fw::kernel::KernelType::kCube;
    else if (type == "mix") s.kernel_type = npusim::fw::kernel::KernelType::kMix;
    else throw npusim::InputError("NPUSIM_KERNEL_TYPE=" + type + ": vector, cube or mix");
    s.json_path = env("NPUSIM_JSON") ? env("NPUSIM_JSON") : "";
    rt::OutputPaths files{env("NPUSIM_TRACE") ? env("NPUSIM_TRACE") : "",
                          env("NPUSIM_SUMMARY") ? env("NPUSIM_SUMMARY") : "",
                          env("NPUSIM_STATS") ? env("NPUSIM_STATS") : "",
                          {}};
    if (env("NPUSIM_TRACE_LEVEL"))
      files.trace_options.level = rt::parse_trace_level(env("NPUSIM_TRACE_LEVEL"), "NPUSIM_TRACE_LEVEL");
    if (env("NPUSIM_TRACE_CORES")) {
      files.trace_options.cores = env("NPUSIM_TRACE_CORES");
      files.trace_options.cores_option = "NPUSIM_TRACE_CORES";
    }
    if (env("NPUSIM_TRACE_WINDOW"))
      rt::parse_trace_window(env("NPUSIM_TRACE_WINDOW"), "NPUSIM_TRACE_WINDOW", files.trace_options);
    s.outputs = std::make_unique<rt::RunOutputs>(files, s.loaded->chip);
    s.dev = std::make_unique<rt::Device>(s.loaded->chip,
                                         mode == "functional" ? npusim::hw::core::Mode::kFunctional
                                                              : npusim::hw::core::Mode::kTimingOnly,
                                         s.outputs->trace_factory());
    s.device_used = true;
    s.start = std::chrono::steady_clock::now();
    s.dev->begin();
    s.dev->call([&](rt::Device& d) { s.default_stream = d.create_stream(); });
  });
}

aclError aclrtResetDevice(int32_t deviceId) {
  AclState& s = state();
  if (deviceId != 0 || !s.dev) return fail(ACL_ERROR_INVALID_DEVICE, "aclrtResetDevice: device " + std::to_string(deviceId) + " is not set");
  const aclError e = guarded("aclrtResetDevice", [&] {
    std::unique_ptr<rt::Device> dev = std::move(s.dev);
    dev->end();
    const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - s.start).count();
    bool kernels = false;
    for (const auto& t : dev->tasks()) kernels |= t.type == npusim::fw::ts::TaskType::kKernel;
    nlohmann::json report = kernels ? rt::run_report(*dev, wall) : rt::runtime_report(*dev);
    report["config"] = s.loaded->chip.name;
    s.outputs->finish(*dev, report);
    if (!s.json_path.empty()) {
      std::ofstream out(s.json_path);
      out << report.dump(2) << "\n";
      if (!out) throw npusim::InputError("NPUSIM_JSON=" + s.json_path + ": cannot write");
    }
    std::cerr << std::fixed << std::setprecision(3) << "npusim: " << s.loaded->chip.name << ", "
              << report["tasks"].size() << " task(s), " << report["time_us"].get<double>() << " us of device time";
    if (kernels) std::cerr << ", last kernel " << report["kernel"]["cycles"].get<std::uint64_t>() << " cycles";
    if (!s.json_path.empty()) std::cerr << " (report: " << s.json_path << ")";
    std::cerr << "\n";
  });
  for (StreamHandle* h : s.streams) delete h;
  for (EventHandle* h : s.events) delete h;
  s.streams.clear();
  s.events.clear();
  s.allocations.clear();
  return e;
}

aclError aclrtCreateStream(aclrtStream* stream) {
  if (!stream) return fail(ACL_ERROR_INVALID_PARAM, "aclrtCreateStream: stream is null");
  return guarded("aclrtCreateStream", [&] {
    rt::Stream st;
    device("aclrtCreateStream").call([&](rt::Device& d) { st = d.create_stream(); });
    auto* h = new StreamHandle{st};
    state().streams.insert(h);
    *stream = h;
  });
}

aclError aclrtDestroyStream(aclrtStream stream) {
  return guarded("aclrtDestroyStream", [&] {
    const rt::Stream st = stream_of(stream);
    if (!stream) throw npusim::InputError("the default stream cannot be destroyed");
    device("aclrtDestroyStream").call([&](rt::Device& d) { d.destroy_stream(st); });
    state().streams.erase(static_cast<StreamHandle*>(stream));
    delete static_cast<StreamHandle*>(stream);
  });
}

aclError aclrtSynchronizeStream(aclrtStream stream) {
  return guarded("aclrtSynchronizeStream", [&] {
    const rt::Stream st = stream_of(stream);
    device("aclrtSynchronizeStream").call([&](rt::Device& d) { d.synchronize(st); });
  });
}

aclError aclrtSynchronizeDevice() {
  return guarded("aclrtSynchronizeDevice", [&] { device("aclrtSynchronizeDevice").call([](rt::Device& d) { d.synchronize(); }); });
}

aclError aclrtMalloc(void** devPtr, size_t size, aclrtMemMallocPolicy) {
  if (!devPtr) return fail(ACL_ERROR_INVALID_PARAM, "aclrtMalloc: devPtr is null");
  if (size == 0) return fail(ACL_ERROR_INVALID_PARAM, "aclrtMalloc: size is 0");
  return guarded("aclrtMalloc", [&] {
    rt::Device& d = device("aclrtMalloc");
    const std::uint64_t addr = d.malloc(size);
    state().allocations[addr] = size;
    *devPtr = d.chip().memory().base() + addr;
  });
}

aclError aclrtFree(void* devPtr) {
  return guarded("aclrtFree", [&] {
    rt::Device& d = device("aclrtFree");
    std::uint64_t addr = 0;
    if (!d.chip().memory().device_address(devPtr, 0, addr) || !state().allocations.count(addr)) {
      throw npusim::InputError("the pointer is not a block aclrtMalloc returned");
    }
    d.free(addr);
    state().allocations.erase(addr);
  });
}

aclError aclrtMallocHost(void** hostPtr, size_t size) {
  if (!hostPtr || size == 0) return fail(ACL_ERROR_INVALID_PARAM, "aclrtMallocHost: null pointer or size 0");
  void* p = std::aligned_alloc(64, (size + 63) / 64 * 64);
  if (!p) return fail(ACL_ERROR_RT_FAILURE, "aclrtMallocHost: out of host memory for " + std::to_string(size) + " B");
  state().host_allocations.insert(p);
  *hostPtr = p;
  return ACL_SUCCESS;
}

aclError aclrtFreeHost(void* hostPtr) {
  if (!state().host_allocations.erase(hostPtr)) return fail(ACL_ERROR_INVALID_PARAM, "aclrtFreeHost: not a block aclrtMallocHost returned");
  std::free(hostPtr);
  return ACL_SUCCESS;
}

namespace {
aclError memcpy_impl(const char* api, void* dst, size_t destMax, const void* src, size_t count, aclrtMemcpyKind kind,
                     aclrtStream stream, bool async) {
  if (count > destMax) {
    return fail(ACL_ERROR_INVALID_PARAM, std::string(api) + ": count " + std::to_string(count) + " B exceeds destMax " +
                                             std::to_string(destMax) + " B");
  }
  if ((!dst || !src) && count) return fail(ACL_ERROR_INVALID_PARAM, std::string(api) + ": null pointer");
  return guarded(api, [&] {
    if (kind == ACL_MEMCPY_HOST_TO_HOST) {
      std::memcpy(dst, src, count);
      return;
    }
    const rt::Stream st = stream_of(stream);
    rt::Device& d = device(api);
    if (kind == ACL_MEMCPY_HOST_TO_DEVICE) {
      const std::uint64_t to = device_address(dst, count, "the destination");
      d.call([&](rt::Device& dv) { async ? dv.memcpy_async(to, src, count, st) : dv.memcpy(to, src, count, st); });
    } else if (kind == ACL_MEMCPY_DEVICE_TO_HOST) {
      const std::uint64_t from = device_address(src, count, "the source");
      d.call([&](rt::Device& dv) { async ? dv.memcpy_async(dst, from, count, st) : dv.memcpy(dst, from, count, st); });
    } else if (kind == ACL_MEMCPY_DEVICE_TO_DEVICE) {
      const std::uint64_t to = device_address(dst, count, "the destination"), from = device_address(src, count, "the source");
      d.call([&](rt::Device& dv) { async ? dv.memcpy_d2d_async(to, from, count, st) : dv.memcpy_d2d(to, from, count, st); });
    } else {
      throw npusim::InputError("unknown aclrtMemcpyKind " + std::to_string(static_cast<int>(kind)));
    }
  });
}
}  // namespace

aclError aclrtMemcpy(void* dst, size_t destMax, const void* src, size_t count, aclrtMemcpyKind kind) {
  return memcpy_impl("aclrtMemcpy", dst, destMax, src, count, kind, nullptr, false);
}

aclError aclrtMemcpyAsync(void* dst, size_t destMax, const void* src, size_t count, aclrtMemcpyKind kind,
                          aclrtStream stream) {
  return memcpy_impl("aclrtMemcpyAsync", dst, destMax, src, count, kind, stream, true);
}

aclError aclrtCreateEvent(aclrtEvent* event) {
  if (!event) return fail(ACL_ERROR_INVALID_PARAM, "aclrtCreateEvent: event is null");
  return guarded("aclrtCreateEvent", [&] {
    auto* h = new EventHandle{device("aclrtCreateEvent").create_event()};
    state().events.insert(h);
    *event = h;
  });
}

aclError aclrtDestroyEvent(aclrtEvent event) {
  return guarded("aclrtDestroyEvent", [&] {
    event_of(event);
    state().events.erase(static_cast<EventHandle*>(event));
    delete static_cast<EventHandle*>(event);
  });
}

aclError aclrtRecordEvent(aclrtEvent event, aclrtStream stream) {
  return guarded("aclrtRecordEvent", [&] {
    const rt::Event e = event_of(event);
    const rt::Stream st = stream_of(stream);
    device("aclrtRecordEvent").call([&](rt::Device& d) { d.record(e, st); });
  });
}

aclError aclrtStreamWaitEvent(aclrtStream stream, aclrtEvent event) {
  return guarded("aclrtStreamWaitEvent", [&] {
    const rt::Event e = event_of(event);
    const rt::Stream st = stream_of(stream);
    device("aclrtStreamWaitEvent").call([&](rt::Device& d) { d.wait(e, st); });
  });
}

aclError aclrtSynchronizeEvent(aclrtEvent event) {
  return guarded("aclrtSynchronizeEvent", [&] {
    const rt::Event e = event_of(event);
    device("aclrtSynchronizeEvent").call([&](rt::Device& d) { d.synchronize(e); });
  });
}

aclError aclrtEventElapsedTime(float* ms, aclrtEvent startEvent, aclrtEvent endEvent) {
  if (!ms) return fail(ACL_ERROR_INVALID_PARAM, "aclrtEventElapsedTime: ms is null");
  return guarded("aclrtEventElapsedTime", [&] {
    const rt::Event a = event_of(startEvent), b = event_of(endEvent);
    double v = 0;
    device("aclrtEventElapsedTime").call([&](rt::Device& d) { v = d.elapsed_ms(a, b); });
    *ms = static_cast<float>(v);
  });
}

const char* aclGetRecentErrMsg() { return state().last_error.c_str(); }

aclError npusim_acl_launch(const npusim_sdk::EntryInfo* entry, uint32_t blockDim, aclrtStream stream,
                           const uint64_t* words, uint32_t count) {
  if (!entry || count != entry->argc) return fail(ACL_ERROR_INVALID_PARAM, "ACLRT_LAUNCH_KERNEL: bad entry");
  if (blockDim == 0 || blockDim > 65535) {
    return fail(ACL_ERROR_INVALID_PARAM, std::string("ACLRT_LAUNCH_KERNEL(") + entry->name + "): blockDim " +
                                             std::to_string(blockDim) + " is not 1..65535");
  }
  return guarded("ACLRT_LAUNCH_KERNEL", [&] {
    rt::KernelEntry k;
    k.name = entry->name;
    k.info = entry;
    for (std::uint32_t i = 0; i < entry->argc; ++i) {
      k.kinds.push_back(static_cast<rt::ArgKind>(entry->kinds[i]));
      k.sizes.push_back(entry->sizes[i]);
    }
    // Every aclrtMalloc block bounds the kernel's GM accesses (a pointer argument may point into any of them).
    std::vector<npusim::hw::core::CoreEngine::GmRange> bounds;
    for (const auto& [addr, bytes] : state().allocations) {
      std::ostringstream name;
      name << "aclrtMalloc block 0x" << std::hex << addr;
      bounds.push_back({addr, bytes, name.str()});
    }
    for (std::uint32_t i = 0; i < entry->argc; ++i) {
      if (k.kinds[i] != rt::ArgKind::kPointer || words[i] == 0) continue;
      std::uint64_t addr = 0;
      // The launch passes pointers as words: back to the host pointer each was (the cast is the point).
      const void* host = reinterpret_cast<const void*>(words[i]);  // NOLINT(performance-no-int-to-ptr)
      if (!device("ACLRT_LAUNCH_KERNEL").chip().memory().device_address(host, 0, addr)) {
        throw npusim::InputError(std::string(entry->name) + ": argument " + std::to_string(i) +
                                 " is not device memory (pass pointers from aclrtMalloc)");
      }
    }
    const rt::Stream st = stream_of(stream);
    rt::Device& d = device("ACLRT_LAUNCH_KERNEL");
    std::vector<std::uint64_t> w(words, words + count);
    d.call([&](rt::Device& dv) {
      dv.launch(entry->name, state().kernel_type, blockDim, rt::kernel_body(k, w, dv.chip().memory(), bounds), st);
    });
  });
}

}  // extern "C"

// libsystemc's main() calls sc_main(); a host program has its own main(), and this definition only satisfies the
// reference (it is never called).
int sc_main(int, char**) __attribute__((weak));
int sc_main(int, char**) {
  std::cerr << "npusim: error: a host program using acl/acl.h needs its own main()\n";
  return 1;
}
