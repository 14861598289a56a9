// boundary_kernels: see boundary_kernels.hpp.
#include "policy/model/async_copy.cuh"
#include "policy/model/boundary_kernels.hpp"
#include "policy/model/fused_kernels.hpp"
#include "policy/model/programmatic_launch.cuh"

#include <cuda_runtime.h>

namespace caf_agent::policy::kernels {
namespace {

constexpr int chain_threads = 256;
constexpr int chain_unroll = 4;  // 16-byte loads a thread has in flight, as gemv_unroll
constexpr int warp = 32;

// A word's share of a block's sum: any cheap use of every loaded byte, finite whatever the bytes.
__device__ __forceinline__ float fold(uint4 v) {
  return __uint_as_float((v.x & 0x3fffffffu)) + __uint_as_float((v.y & 0x3fffffffu)) +
         __uint_as_float((v.z & 0x3fffffffu)) + __uint_as_float((v.w & 0x3fffffffu));
}

// The block's sum of acc, in thread 0.
__device__ __forceinline__ float block_sum(float acc) {
  __shared__ float warps_s[chain_threads / warp];
  for (int offset = warp / 2; offset > 0; offset >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, offset);
  if (threadIdx.x % warp == 0) warps_s[threadIdx.x / warp] = acc;
  __syncthreads();
  float total = 0.0f;
  if (threadIdx.x == 0)
    for (int w = 0; w < chain_threads / warp; ++w) total += warps_s[w];
  __syncthreads();  // warps_s free for the next phase
  return total;
}

// Flags: waits until counter reaches target (thread 0 spins, then every thread may read what the
// arriving blocks wrote before they counted themselves).
__device__ __forceinline__ void wait_for(const unsigned* counter, unsigned target) {
  if (threadIdx.x == 0) {
    while (*reinterpret_cast<const volatile unsigned*>(counter) < target) {
    }
    __threadfence();
  }
  __syncthreads();
}

// Block `block` of phase p (slice: the phase's vecs 16-byte vectors). Flags: waits on counters[p - 1]
// for `target` arrivals and counts itself in counters[p]; else waits for the kernel before.
template <bool Flags>
__device__ __forceinline__ void run_phase(const uint4* __restrict__ slice, int64_t vecs, int p, int blocks, int block,
                                          float* sums_pb, unsigned* counters, unsigned target) {
  const int64_t per_block = (vecs + blocks - 1) / blocks;
  const int64_t first = block * per_block, last = first + per_block < vecs ? first + per_block : vecs;
  constexpr int64_t stride = static_cast<int64_t>(chain_threads) * chain_unroll;
  uint4 v[chain_unroll];
  const auto load = [&](int64_t base) {
#pragma unroll
    for (int u = 0; u < chain_unroll; ++u) {
      const int64_t at = base + u * chain_threads + threadIdx.x;
      v[u] = at < last ? __ldg(slice + at) : make_uint4(0, 0, 0, 0);
    }
  };
  // The slice is written by no phase: its first loads go out before the wait, as the GEMVs' weights,
  // as async copies into shared memory (each thread its own slots): plain loads were issued after
  // griddepcontrol.wait by ptxas (cuobjdump -sass, sm_90).
  __shared__ uint4 first_s[chain_unroll][chain_threads];
#pragma unroll
  for (int u = 0; u < chain_unroll; ++u) {
    const int64_t at = first + u * chain_threads + threadIdx.x;
    copy_16_or_zero(&first_s[u][threadIdx.x], at < last ? slice + at : slice, at < last);
  }
  copy_commit();
  if constexpr (Flags) {
    if (p > 0) wait_for(counters + p - 1, target);
  } else {
    dependency_wait();
  }
  copy_wait<0>();
#pragma unroll
  for (int u = 0; u < chain_unroll; ++u) v[u] = first_s[u][threadIdx.x];
  float acc = 0.0f;
  if (p > 0) {  // the mean of every block's sum of the phase before (L2: written by other multiprocessors);
                // the mean, not the sum, so the sums grow by a phase's bytes a phase and stay finite
    for (int i = static_cast<int>(threadIdx.x); i < blocks; i += chain_threads)
      acc += __ldcg(sums_pb + static_cast<int64_t>(p - 1) * blocks + i);
    acc /= static_cast<float>(blocks);
  }
  for (int64_t base = first;;) {
#pragma unroll
    for (int u = 0; u < chain_unroll; ++u) acc += fold(v[u]);
    base += stride;
    if (base >= last) break;
    load(base);
  }
  const float total = block_sum(acc);
  if (threadIdx.x == 0) {
    sums_pb[static_cast<int64_t>(p) * blocks + block] = total;
    if constexpr (Flags) {
      __threadfence();  // the sum visible before the count
      atomicAdd(counters + p, 1u);
    }
  }
}

__global__ void __launch_bounds__(chain_threads)
    chain_phase_kernel(const uint4* data, int64_t vecs, int p, float* sums_pb) {
  allow_dependents();
  run_phase<false>(data + p * vecs, vecs, p, static_cast<int>(gridDim.x), static_cast<int>(blockIdx.x), sums_pb,
                   nullptr, 0);
}

// target: the arrivals a phase's counter holds once every block of this run has counted itself
// (the run's number, from 1, times the blocks: counters only grow, so no run has to zero them).
__global__ void __launch_bounds__(chain_threads)
    chain_flags_kernel(const uint4* data, int64_t vecs, int phases, float* sums_pb, unsigned* counters,
                       unsigned target) {
  for (int p = 0; p < phases; ++p)
    run_phase<true>(data + p * vecs, vecs, p, static_cast<int>(gridDim.x), static_cast<int>(blockIdx.x), sums_pb,
                    counters, target);
}

}  // namespace

int64_t boundary_resident_blocks(boundary_mode mode) {
  int per_sm = 0;
  const cudaError_t err =
      mode == boundary_mode::flags
          ? cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, chain_flags_kernel, chain_threads, 0)
          : cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, chain_phase_kernel, chain_threads, 0);
  if (err != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return static_cast<int64_t>(per_sm) * multiprocessor_count();
}

int time_boundary_chain(boundary_mode mode, const void* data, int64_t bytes_per_phase, int phases, int blocks,
                        float* sums_pb, unsigned* counters_p, int calls, double* us_per_chain) {
  if (data == nullptr || sums_pb == nullptr || us_per_chain == nullptr || phases < 1 || blocks < 1 || calls < 1 ||
      bytes_per_phase < 16 * static_cast<int64_t>(blocks) || bytes_per_phase % 16 != 0 ||
      reinterpret_cast<uintptr_t>(data) % 16 != 0 || (mode == boundary_mode::flags && counters_p == nullptr))
    return static_cast<int>(cudaErrorInvalidValue);
  if (mode == boundary_mode::flags) {
    const int64_t resident = boundary_resident_blocks(mode);
    if (resident > 0 && blocks > resident) return static_cast<int>(cudaErrorCooperativeLaunchTooLarge);
  }
  const auto* vectors = static_cast<const uint4*>(data);
  const int64_t vecs = bytes_per_phase / 16;
  constexpr int warmup = 2;
  cudaStream_t stream = nullptr;
  cudaEvent_t start = nullptr, stop = nullptr;
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  cudaError_t err = cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
  if (err == cudaSuccess) err = cudaEventCreate(&start);
  if (err == cudaSuccess) err = cudaEventCreate(&stop);
  if (err == cudaSuccess && mode == boundary_mode::kernels) {
    err = cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal);
    if (err == cudaSuccess) {
      for (int p = 0; p < phases; ++p)
        launch(chain_phase_kernel, static_cast<unsigned>(blocks), chain_threads, 0, stream, vectors, vecs, p, sums_pb);
      err = cudaStreamEndCapture(stream, &graph);
    }
    if (err == cudaSuccess) err = cudaGraphInstantiate(&exec, graph, 0);
  }
  // Run r (from 1) of the flags kernel waits for r * blocks arrivals a phase.
  unsigned run = 0;
  const auto one_chain = [&]() -> cudaError_t {
    if (mode == boundary_mode::kernels) return cudaGraphLaunch(exec, stream);
    ++run;
    cudaLaunchConfig_t config = {};
    config.gridDim = dim3(static_cast<unsigned>(blocks));
    config.blockDim = dim3(chain_threads);
    config.stream = stream;
    cudaLaunchAttribute attribute[1];
    attribute[0].id = cudaLaunchAttributeCooperative;
    attribute[0].val.cooperative = 1;
    config.attrs = attribute;
    config.numAttrs = 1;
    return cudaLaunchKernelEx(&config, chain_flags_kernel, vectors, vecs, phases, sums_pb, counters_p,
                              run * static_cast<unsigned>(blocks));
  };
  for (int i = 0; i < warmup && err == cudaSuccess; ++i) err = one_chain();
  if (err == cudaSuccess) err = cudaEventRecord(start, stream);
  for (int i = 0; i < calls && err == cudaSuccess; ++i) err = one_chain();
  if (err == cudaSuccess) err = cudaEventRecord(stop, stream);
  if (err == cudaSuccess) err = cudaEventSynchronize(stop);
  float ms = 0.0f;
  if (err == cudaSuccess) err = cudaEventElapsedTime(&ms, start, stop);
  if (err == cudaSuccess) *us_per_chain = 1000.0 * ms / calls;
  // One more chain over zeroed sums, for the caller to read: a phase that read its predecessor's
  // sums before they were written would leave other sums than the kernels' chain does.
  if (err == cudaSuccess) err = cudaMemsetAsync(sums_pb, 0, sizeof(float) * phases * blocks, stream);
  if (err == cudaSuccess) err = one_chain();
  if (err == cudaSuccess) err = cudaStreamSynchronize(stream);
  if (exec != nullptr) cudaGraphExecDestroy(exec);
  if (graph != nullptr) cudaGraphDestroy(graph);
  if (start != nullptr) cudaEventDestroy(start);
  if (stop != nullptr) cudaEventDestroy(stop);
  if (stream != nullptr) cudaStreamDestroy(stream);
  if (err != cudaSuccess) cudaGetLastError();
  return static_cast<int>(err);
}

}  // namespace caf_agent::policy::kernels
