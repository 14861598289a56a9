// out = max(x, 0): an honest kernel for KernelBench's level1/19_ReLU (4096 x 393216 fp32,
// 6 GiB in and out), so the KernelBench bench judges a full verify at that size, not only
// the reference copy's early torch_fallback (written for this project). Device side;
// relu_op.cpp is the torch side.
#include "caf_cuda.h"

namespace {

__global__ void relu_k(const float4* x, float4* o, int64_t n4) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n4; i += (int64_t)gridDim.x * blockDim.x) {
    float4 v = x[i];
    o[i] = make_float4(fmaxf(v.x, 0.f), fmaxf(v.y, 0.f), fmaxf(v.z, 0.f), fmaxf(v.w, 0.f));
  }
}

__global__ void relu_tail_k(const float* x, float* o, int64_t from, int64_t n) {
  int64_t i = from + blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  if (i < n) o[i] = fmaxf(x[i], 0.f);
}

}  // namespace

void relu_launch(const float* x, float* o, int64_t n, cudaStream_t s) {
  int64_t n4 = n / 4;  // torch's allocations are 16-byte aligned
  if (n4 > 0) {
    int64_t blocks = caf::blocks_for(n4, 256);
    if (blocks > 65536) blocks = 65536;
    relu_k<<<static_cast<unsigned>(blocks), 256, 0, s>>>(reinterpret_cast<const float4*>(x),
                                                         reinterpret_cast<float4*>(o), n4);
  }
  if (n - 4 * n4 > 0) relu_tail_k<<<1, 256, 0, s>>>(x, o, 4 * n4, n);
}
