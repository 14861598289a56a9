// out[i] = value: the kernel of the constant-answer attack (bench_kernelbench.py --constant),
// which writes one value without reading its input, the answer that passes KernelBench's own
// elementwise test on a task whose output barely depends on its input. Device side;
// fill_op.cpp is the torch side.
#include "caf_cuda.h"

namespace {

__global__ void fill_k(float* o, int64_t n, float value) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
    o[i] = value;
}

}  // namespace

void fill_launch(float* o, int64_t n, float value, cudaStream_t s) {
  if (n <= 0) return;
  int64_t blocks = caf::blocks_for(n, 256);
  if (blocks > 65536) blocks = 65536;
  fill_k<<<static_cast<unsigned>(blocks), 256, 0, s>>>(o, n, value);
}
