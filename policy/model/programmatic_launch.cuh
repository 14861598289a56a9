#pragma once
// programmatic_launch: Hopper's programmatic dependent launch for policy/model's kernels (nvcc
// only). A kernel launched with it may start while the kernel before it on the stream is still
// running: it lets its own dependent start (allow_dependents), loads what no earlier kernel of
// the step writes (the weights), then waits (dependency_wait) until the kernel before it has
// finished and its writes are visible, and only then reads their outputs or writes anything.
// Results are the same bits as without it; what changes is the gap between kernels (each
// launch's ramp-up and the last wave's tail) and, for the matrix-vector kernels, the latency of
// their first weight loads. Rationale: a decode step of the 0.5B shape is ~250 kernels; on the
// H200 the 1-row 131k step ran 1,649 us busy of 2,175 us wall, the rest gaps between kernels
// (bench/results/2026-12-04-policy-h200-paged-in-place.md, call 3).
//
// Without the launch attribute (fused_kernels.hpp set_programmatic_launch(false), the default)
// the two device calls return at once and every kernel runs after the one before it, as a plain
// launch does.

#include <cuda_runtime.h>

namespace caf_agent::policy::kernels {

/// Whether launches carry the attribute (set_programmatic_launch).
bool programmatic_launch();

/// Whether `stream` is capturing a graph (or its state cannot be read): no occupancy or attribute
/// query is made then.
bool stream_capturing(cudaStream_t stream);

/// In a kernel: the next kernel on the stream may be scheduled now.
__device__ __forceinline__ void allow_dependents() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

/// In a kernel: waits until the kernel before it on the stream has finished, its writes visible.
/// Nothing the kernel before it writes may be read, and nothing may be written, before this.
__device__ __forceinline__ void dependency_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

/// Sets `kernel`'s preferred shared-memory carveout to the most shared memory, once a device and kernel.
/// Rationale: a multiprocessor changes its split of L1 and shared memory only when idle, and the
/// e4m3 split kernel asks for the most (its ring) where the small kernels around it took the
/// driver's default. With every kernel asking for one split, on an H100 the cached agent workload
/// took 0.998x its time and the 131k decode ran at 1.008x its rate
/// (bench/results/2026-12-07-policy-h100-rope-split-counter-join.md, calls 2 and 3).
void prefer_max_shared(const void* kernel);

/// kernel<<<grid, block, smem, stream>>>(args...), programmatic when programmatic_launch().
template <typename... Params, typename... Args>
void launch(void (*kernel)(Params...), dim3 grid, dim3 block, size_t smem, cudaStream_t stream, Args... args) {
  prefer_max_shared(reinterpret_cast<const void*>(kernel));
  cudaLaunchConfig_t config = {};
  config.gridDim = grid;
  config.blockDim = block;
  config.dynamicSmemBytes = smem;
  config.stream = stream;
  cudaLaunchAttribute attribute[1];
  attribute[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attribute[0].val.programmaticStreamSerializationAllowed = 1;
  config.attrs = attribute;
  config.numAttrs = programmatic_launch() ? 1 : 0;
  cudaLaunchKernelEx(&config, kernel, static_cast<Params>(args)...);
}

}  // namespace caf_agent::policy::kernels
