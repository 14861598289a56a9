#pragma once
// async_copy: cp.async (sm_80+) for policy/model's kernels (nvcc only): 16-byte copies from global
// to shared memory that complete in groups, so a warp keeps several tiles in flight.

#include <cuda_runtime.h>

#include <cstdint>

namespace caf_agent::policy::kernels {

/// 16 bytes from global `src` to shared `dst` (both 16-byte aligned), cached in L2 only.
__device__ __forceinline__ void copy_16(void* dst, const void* src) {
  const auto d = static_cast<uint32_t>(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(d), "l"(src) : "memory");
}
/// copy_16 where `valid`, else the 16 bytes of `dst` zeroed (`src` not read).
__device__ __forceinline__ void copy_16_or_zero(void* dst, const void* src, bool valid) {
  const auto d = static_cast<uint32_t>(__cvta_generic_to_shared(dst));
  const int bytes = valid ? 16 : 0;
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(d), "l"(src), "r"(bytes) : "memory");
}
/// Closes this thread's group of copies issued since the last commit.
__device__ __forceinline__ void copy_commit() {
  asm volatile("cp.async.commit_group;\n" ::: "memory");
}
/// Waits until at most `Pending` of this thread's groups are in flight (their bytes visible to this
/// thread; a barrier makes them visible to others).
template <int Pending>
__device__ __forceinline__ void copy_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(Pending) : "memory");
}

}  // namespace caf_agent::policy::kernels
