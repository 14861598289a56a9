// skills/eval_worker/caf_agent_eval/judge_kernels/hold.cu: the judge's hold, a kernel that
// fills every SM's thread slots and spins for a given time. Queued before a timed call's
// start event, it keeps the GPU busy while the host launches the call (so the event time
// holds no host launch latency), and because it leaves no room on any SM, work the
// submission puts on a side stream cannot run until it ends: that work starts no earlier
// than the start event. Plain C ABI, loaded with ctypes (not through the dispatcher, which a
// submission's library could register into). Built by caf_agent_eval/hold.py with nvcc.
#include <cuda_runtime.h>

namespace {

__device__ __forceinline__ unsigned long long global_ns() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// The hold's end, common to all its blocks: the first block to start sets it (caf_hold
// zeroes it before each launch). With an end per block (its own start + ns), the blocks that
// started first ended first and a side stream's blocks took their SMs before the start
// event, which waits for the last block: a head start the side-stream accounting missed.
__device__ unsigned long long g_until;

// Rationale: 1024 threads per block; at most 32 registers per thread, so two blocks fill a
// 2048-thread SM's registers (64 Ki) as well as its thread slots.
__global__ void __launch_bounds__(1024, 2) hold_kernel(unsigned long long ns) {
  __shared__ unsigned long long until;
  if (threadIdx.x == 0) {
    unsigned long long mine = global_ns() + ns;
    unsigned long long first = atomicCAS(&g_until, 0ULL, mine);
    until = first == 0ULL ? mine : first;
  }
  __syncthreads();
  while (global_ns() < until) {
  }
}

}  // namespace

extern "C" {

// The launch geometry for `dev`: threads per block and blocks, such that the blocks are
// resident at once and use every thread slot of every SM. Returns 0 or a CUDA error code
// (or -1 when the SMs cannot be filled exactly).
int caf_hold_geometry(int dev, int* threads, int* blocks) {
  int sms = 0, per_sm = 0;
  // This library has its own CUDA runtime (static cudart): its current device is its own.
  cudaError_t e = cudaSetDevice(dev);
  if (e == cudaSuccess) e = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
  if (e == cudaSuccess) e = cudaDeviceGetAttribute(&per_sm, cudaDevAttrMaxThreadsPerMultiProcessor, dev);
  if (e != cudaSuccess) return static_cast<int>(e);
  int k = (per_sm + 1023) / 1024;  // blocks per SM
  while (per_sm % k != 0) ++k;
  int t = per_sm / k, resident = 0;
  e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&resident, hold_kernel, t, 0);
  if (e != cudaSuccess) return static_cast<int>(e);
  if (resident < k) return -1;
  *threads = t;
  *blocks = sms * k;
  return 0;
}

// Queues the hold on `stream` (a cudaStream_t of device `dev`, as an integer). Returns 0 or
// a CUDA error code.
int caf_hold(int dev, unsigned long long ns, int threads, int blocks, unsigned long long stream) {
  cudaError_t e = cudaSetDevice(dev);
  if (e != cudaSuccess) return static_cast<int>(e);
  void* until = nullptr;
  e = cudaGetSymbolAddress(&until, g_until);
  if (e != cudaSuccess) return static_cast<int>(e);
  auto s = reinterpret_cast<cudaStream_t>(stream);
  e = cudaMemsetAsync(until, 0, sizeof(unsigned long long), s);
  if (e != cudaSuccess) return static_cast<int>(e);
  hold_kernel<<<blocks, threads, 0, s>>>(ns);
  return static_cast<int>(cudaGetLastError());
}

}  // extern "C"
