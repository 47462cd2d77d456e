// acl/acl.h: the host side of the npusim kernel SDK, a subset of Ascend's ACL runtime API on the simulated device.
// A host program written for Ascend (aclInit, aclrtSetDevice, aclrtMalloc, aclrtMemcpy, ACLRT_LAUNCH_KERNEL,
// aclrtSynchronizeStream, ...) links npusim::runtime and runs its kernels on the simulated chip; its includes
// change (this header instead of Ascend's, kernel_operator.h for the kernel's declaration), its code does not.
//
// The simulated device is chosen by the environment: NPUSIM_CONFIG (a built-in name or a YAML file; default 910b),
// NPUSIM_SET ("key=value;key=value" overrides), NPUSIM_MODE (functional, the default, or timing), NPUSIM_SANITIZE=1,
// NPUSIM_KERNEL_TYPE (vector, cube or mix; default vector). aclrtResetDevice writes the run's report, as
// `npusim kernel --json` prints it, to NPUSIM_JSON, a trace to NPUSIM_TRACE and the op summary to NPUSIM_SUMMARY,
// and a one-line summary on stderr. Simulated time passes inside the calls; the host's own work between them takes
// none. docs/kernel-sdk.md describes the whole SDK.
#pragma once

#include <cstddef>
#include <cstdint>

#include "npusim_kernel_entry.h"

typedef int aclError;
typedef void* aclrtStream;
typedef void* aclrtEvent;

#define ACL_SUCCESS 0
#define ACL_ERROR_INVALID_PARAM 100000
#define ACL_ERROR_UNINITIALIZE 100001
#define ACL_ERROR_REPEAT_INITIALIZE 100002
#define ACL_ERROR_INVALID_DEVICE 200002
#define ACL_ERROR_RT_FAILURE 500003

typedef enum aclrtMemcpyKind {
  ACL_MEMCPY_HOST_TO_HOST,
  ACL_MEMCPY_HOST_TO_DEVICE,
  ACL_MEMCPY_DEVICE_TO_HOST,
  ACL_MEMCPY_DEVICE_TO_DEVICE,
} aclrtMemcpyKind;

typedef enum aclrtMemMallocPolicy {
  ACL_MEM_MALLOC_HUGE_FIRST,
  ACL_MEM_MALLOC_HUGE_ONLY,
  ACL_MEM_MALLOC_NORMAL_ONLY,
} aclrtMemMallocPolicy;

extern "C" {
aclError aclInit(const char* configPath);
aclError aclFinalize();
aclError aclrtSetDevice(int32_t deviceId);
aclError aclrtResetDevice(int32_t deviceId);
aclError aclrtGetDeviceCount(uint32_t* count);
aclError aclrtCreateStream(aclrtStream* stream);
aclError aclrtDestroyStream(aclrtStream stream);
aclError aclrtSynchronizeStream(aclrtStream stream);
aclError aclrtSynchronizeDevice();
aclError aclrtMalloc(void** devPtr, size_t size, aclrtMemMallocPolicy policy);
aclError aclrtFree(void* devPtr);
aclError aclrtMallocHost(void** hostPtr, size_t size);
aclError aclrtFreeHost(void* hostPtr);
aclError aclrtMemcpy(void* dst, size_t destMax, const void* src, size_t count, aclrtMemcpyKind kind);
aclError aclrtMemcpyAsync(void* dst, size_t destMax, const void* src, size_t count, aclrtMemcpyKind kind,
                          aclrtStream stream);
aclError aclrtCreateEvent(aclrtEvent* event);
aclError aclrtDestroyEvent(aclrtEvent event);
aclError aclrtRecordEvent(aclrtEvent event, aclrtStream stream);
aclError aclrtStreamWaitEvent(aclrtStream stream, aclrtEvent event);
aclError aclrtSynchronizeEvent(aclrtEvent event);
aclError aclrtEventElapsedTime(float* ms, aclrtEvent startEvent, aclrtEvent endEvent);
const char* aclGetRecentErrMsg();
// npusim's: launches `entry` (its table entry, npusim_kernel_entry.h) with argument words; ACLRT_LAUNCH_KERNEL
// calls it.
aclError npusim_acl_launch(const npusim_sdk::EntryInfo* entry, uint32_t blockDim, aclrtStream stream,
                           const uint64_t* words, uint32_t count);
}

namespace npusim_sdk {
template <class A>
uint64_t to_word(A a) {
  if constexpr (std::is_pointer_v<A>) {
    return static_cast<uint64_t>(reinterpret_cast<uintptr_t>(a));
  } else if constexpr (std::is_floating_point_v<A>) {
    const double d = static_cast<double>(a);
    uint64_t w;
    std::memcpy(&w, &d, sizeof w);
    return w;
  } else {
    return static_cast<uint64_t>(a);
  }
}

// A launch argument: void* for a GM_ADDR parameter (as Ascend's generated aclrtlaunch_NAME takes), the type itself
// for a scalar one.
template <class P>
using launch_arg_t = std::conditional_t<std::is_pointer_v<P>, void*, P>;

template <auto F>
struct Launcher;
template <class... P, void (*F)(P...)>
struct Launcher<F> {
  const char* name;
  // A wrong count or type of argument is a compile error, as with Ascend's generated launch header.
  aclError operator()(uint32_t blockDim, aclrtStream stream, launch_arg_t<P>... args) const {
    static const EntryInfo info = Entry<F>::info(name);
    const uint64_t words[sizeof...(P) + 1] = {to_word<launch_arg_t<P>>(args)..., 0};
    return npusim_acl_launch(&info, blockDim, stream, words, static_cast<uint32_t>(sizeof...(P)));
  }
};
}  // namespace npusim_sdk

// ACLRT_LAUNCH_KERNEL(add_custom)(blockDim, stream, x, y, z): the kernel must be declared (or defined) before.
#define ACLRT_LAUNCH_KERNEL(kernel) (::npusim_sdk::Launcher<&kernel>{#kernel})
