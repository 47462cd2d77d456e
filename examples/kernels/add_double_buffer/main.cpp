// A host program written as Ascend's kernel-launch samples write theirs (aclInit, aclrtMalloc, aclrtMemcpy,
// ACLRT_LAUNCH_KERNEL, aclrtSynchronizeStream...), with only its includes changed, launching the add_custom example
// kernel on the simulated device. It checks z = x + y itself and exits 0 only when every element matches.
#include <cstdio>
#include <cstring>
#include <vector>

#include "acl/acl.h"
#include "kernel_operator.h"

extern "C" __global__ __aicore__ void add_custom(GM_ADDR x, GM_ADDR y, GM_ADDR z, GM_ADDR tiling);

#define CHECK_ACL(x)                                                                      \
  do {                                                                                    \
    aclError __ret = x;                                                                   \
    if (__ret != ACL_SUCCESS) {                                                           \
      std::fprintf(stderr, "%s:%d aclError:%d (%s)\n", __FILE__, __LINE__, __ret, aclGetRecentErrMsg()); \
      return 2;                                                                           \
    }                                                                                     \
  } while (0)

struct AddTiling {
  uint32_t totalLength;
  uint32_t tileNum;
};

int main() {
  const uint32_t blockDim = 8;
  const uint32_t totalLength = 8 * 2048;
  const size_t bytes = totalLength * sizeof(uint16_t);

  CHECK_ACL(aclInit(nullptr));
  CHECK_ACL(aclrtSetDevice(0));
  aclrtStream stream = nullptr;
  CHECK_ACL(aclrtCreateStream(&stream));

  uint8_t *xHost, *yHost, *zHost, *xDevice, *yDevice, *zDevice, *tilingDevice;
  CHECK_ACL(aclrtMallocHost((void**)(&xHost), bytes));
  CHECK_ACL(aclrtMallocHost((void**)(&yHost), bytes));
  CHECK_ACL(aclrtMallocHost((void**)(&zHost), bytes));
  CHECK_ACL(aclrtMalloc((void**)&xDevice, bytes, ACL_MEM_MALLOC_HUGE_FIRST));
  CHECK_ACL(aclrtMalloc((void**)&yDevice, bytes, ACL_MEM_MALLOC_HUGE_FIRST));
  CHECK_ACL(aclrtMalloc((void**)&zDevice, bytes, ACL_MEM_MALLOC_HUGE_FIRST));
  CHECK_ACL(aclrtMalloc((void**)&tilingDevice, sizeof(AddTiling), ACL_MEM_MALLOC_HUGE_FIRST));

  half* x = reinterpret_cast<half*>(xHost);
  half* y = reinterpret_cast<half*>(yHost);
  for (uint32_t i = 0; i < totalLength; i++) {
    x[i] = static_cast<half>(static_cast<float>(i % 251) / 16.0f - 7.0f);
    y[i] = static_cast<half>(static_cast<float>((i * 7) % 113) / 8.0f);
  }
  const AddTiling tiling{totalLength, 2};
  CHECK_ACL(aclrtMemcpy(xDevice, bytes, xHost, bytes, ACL_MEMCPY_HOST_TO_DEVICE));
  CHECK_ACL(aclrtMemcpy(yDevice, bytes, yHost, bytes, ACL_MEMCPY_HOST_TO_DEVICE));
  CHECK_ACL(aclrtMemcpy(tilingDevice, sizeof tiling, &tiling, sizeof tiling, ACL_MEMCPY_HOST_TO_DEVICE));

  aclrtEvent start, end;
  CHECK_ACL(aclrtCreateEvent(&start));
  CHECK_ACL(aclrtCreateEvent(&end));
  CHECK_ACL(aclrtRecordEvent(start, stream));
  CHECK_ACL(ACLRT_LAUNCH_KERNEL(add_custom)(blockDim, stream, xDevice, yDevice, zDevice, tilingDevice));
  CHECK_ACL(aclrtRecordEvent(end, stream));
  CHECK_ACL(aclrtSynchronizeStream(stream));
  float ms = 0;
  CHECK_ACL(aclrtEventElapsedTime(&ms, start, end));

  CHECK_ACL(aclrtMemcpy(zHost, bytes, zDevice, bytes, ACL_MEMCPY_DEVICE_TO_HOST));
  const half* z = reinterpret_cast<const half*>(zHost);
  uint32_t wrong = 0;
  for (uint32_t i = 0; i < totalLength; i++) {
    const half want = static_cast<half>(x[i] + y[i]);
    if (std::memcmp(&want, &z[i], sizeof(half)) != 0) ++wrong;
  }
  std::printf("add_custom: %u of %u elements wrong, kernel %.3f us between the events\n", wrong, totalLength, ms * 1000);

  CHECK_ACL(aclrtFree(xDevice));
  CHECK_ACL(aclrtFree(yDevice));
  CHECK_ACL(aclrtFree(zDevice));
  CHECK_ACL(aclrtFree(tilingDevice));
  CHECK_ACL(aclrtFreeHost(xHost));
  CHECK_ACL(aclrtFreeHost(yHost));
  CHECK_ACL(aclrtFreeHost(zHost));
  CHECK_ACL(aclrtDestroyEvent(start));
  CHECK_ACL(aclrtDestroyEvent(end));
  CHECK_ACL(aclrtDestroyStream(stream));
  CHECK_ACL(aclrtResetDevice(0));
  CHECK_ACL(aclFinalize());
  return wrong == 0 ? 0 : 1;
}
