// fused_head_kernels: see fused_head_kernels.hpp. One block per row; each thread walks the row
// in 16-byte vectors (8 bf16) where the row is aligned, element by element otherwise.
#include "learner/fused_head_kernels.hpp"

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cfloat>
#include <cmath>

namespace caf_agent::learner::kernels {
namespace {

constexpr int threads = 512;

/// Online softmax state: running max m, sum of exp(x - m), sum of exp(x - m) * x.
struct softmax_state {
  float m = -FLT_MAX;
  float s = 0.0f;
  float t = 0.0f;
};

__device__ __forceinline__ void add(softmax_state& a, float x) {
  if (x > a.m) {
    const float scale = __expf(a.m - x);
    a.s *= scale;
    a.t *= scale;
    a.m = x;
  }
  const float e = __expf(x - a.m);
  a.s += e;
  a.t += e * x;
}

__device__ __forceinline__ softmax_state merge(const softmax_state& a, const softmax_state& b) {
  if (a.s == 0.0f) return b;
  if (b.s == 0.0f) return a;
  softmax_state r;
  r.m = fmaxf(a.m, b.m);
  const float ea = __expf(a.m - r.m), eb = __expf(b.m - r.m);
  r.s = a.s * ea + b.s * eb;
  r.t = a.t * ea + b.t * eb;
  return r;
}

__device__ __forceinline__ softmax_state warp_merge(softmax_state a) {
  for (int offset = 16; offset > 0; offset >>= 1) {
    softmax_state b;
    b.m = __shfl_xor_sync(0xffffffffu, a.m, offset);
    b.s = __shfl_xor_sync(0xffffffffu, a.s, offset);
    b.t = __shfl_xor_sync(0xffffffffu, a.t, offset);
    a = merge(a, b);
  }
  return a;
}

__global__ void head_forward_kernel(const __nv_bfloat16* __restrict__ logits, const int64_t* __restrict__ targets,
                                    int64_t vocab, float inv_temperature, bool vectorized, float* __restrict__ logp,
                                    float* __restrict__ entropy, float* __restrict__ lse_out,
                                    float* __restrict__ mean_out) {
  const int64_t row = blockIdx.x;
  const __nv_bfloat16* x = logits + row * vocab;
  softmax_state st;
  if (vectorized) {
    const uint4* x8 = reinterpret_cast<const uint4*>(x);
    for (int64_t i = threadIdx.x; i < vocab / 8; i += threads) {
      uint4 packed = x8[i];
      const __nv_bfloat16* v = reinterpret_cast<const __nv_bfloat16*>(&packed);
#pragma unroll
      for (int j = 0; j < 8; ++j) add(st, __bfloat162float(v[j]) * inv_temperature);
    }
  } else {
    for (int64_t i = threadIdx.x; i < vocab; i += threads) add(st, __bfloat162float(x[i]) * inv_temperature);
  }
  st = warp_merge(st);
  __shared__ softmax_state partial[threads / 32];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  if (lane == 0) partial[warp] = st;
  __syncthreads();
  if (warp == 0) {
    st = lane < threads / 32 ? partial[lane] : softmax_state{};
    st = warp_merge(st);
    if (lane == 0) {
      const float lse = st.m + logf(st.s);
      const float mean = st.t / st.s;
      const float target_x = __bfloat162float(x[targets[row]]) * inv_temperature;
      logp[row] = target_x - lse;
      entropy[row] = lse - mean;
      lse_out[row] = lse;
      mean_out[row] = mean;
    }
  }
}

__device__ __forceinline__ float grad_of(float x, float lse, float mean, float g_logp, float g_entropy, bool is_target,
                                         float inv_temperature) {
  const float p = __expf(x - lse);
  const float g = g_logp * ((is_target ? 1.0f : 0.0f) - p) - g_entropy * p * (x - mean);
  return g * inv_temperature;
}

__global__ void head_backward_kernel(const __nv_bfloat16* __restrict__ logits, const int64_t* __restrict__ targets,
                                     int64_t vocab, float inv_temperature, bool vectorized,
                                     const float* __restrict__ lse_in, const float* __restrict__ mean_in,
                                     const float* __restrict__ g_logp_in, const float* __restrict__ g_entropy_in,
                                     __nv_bfloat16* __restrict__ grad) {
  const int64_t row = blockIdx.x;
  const __nv_bfloat16* x = logits + row * vocab;
  __nv_bfloat16* gx = grad + row * vocab;
  const float lse = lse_in[row], mean = mean_in[row];
  const float g_logp = g_logp_in ? g_logp_in[row] : 0.0f;
  const float g_entropy = g_entropy_in ? g_entropy_in[row] : 0.0f;
  const int64_t target = targets[row];
  if (vectorized) {
    const uint4* x8 = reinterpret_cast<const uint4*>(x);
    uint4* g8 = reinterpret_cast<uint4*>(gx);
    for (int64_t i = threadIdx.x; i < vocab / 8; i += threads) {
      uint4 packed = x8[i];
      const __nv_bfloat16* v = reinterpret_cast<const __nv_bfloat16*>(&packed);
      uint4 out;
      __nv_bfloat16* o = reinterpret_cast<__nv_bfloat16*>(&out);
#pragma unroll
      for (int j = 0; j < 8; ++j)
        o[j] = __float2bfloat16(grad_of(__bfloat162float(v[j]) * inv_temperature, lse, mean, g_logp, g_entropy,
                                        i * 8 + j == target, inv_temperature));
      g8[i] = out;
    }
  } else {
    for (int64_t i = threadIdx.x; i < vocab; i += threads)
      gx[i] = __float2bfloat16(grad_of(__bfloat162float(x[i]) * inv_temperature, lse, mean, g_logp, g_entropy,
                                       i == target, inv_temperature));
  }
}

bool aligned_rows(const void* base, int64_t vocab) {
  return vocab % 8 == 0 && reinterpret_cast<uintptr_t>(base) % 16 == 0;
}

}  // namespace

void head_forward(const void* logits_cv, const int64_t* targets_c, int64_t rows, int64_t vocab, float inv_temperature,
                  float* logp_c, float* entropy_c, float* lse_c, float* mean_c, void* stream) {
  if (rows == 0) return;
  head_forward_kernel<<<static_cast<unsigned>(rows), threads, 0, static_cast<cudaStream_t>(stream)>>>(
      static_cast<const __nv_bfloat16*>(logits_cv), targets_c, vocab, inv_temperature, aligned_rows(logits_cv, vocab),
      logp_c, entropy_c, lse_c, mean_c);
}

void head_backward(const void* logits_cv, const int64_t* targets_c, int64_t rows, int64_t vocab, float inv_temperature,
                   const float* lse_c, const float* mean_c, const float* g_logp_c, const float* g_entropy_c,
                   void* grad_logits_cv, void* stream) {
  if (rows == 0) return;
  const bool vectorized = aligned_rows(logits_cv, vocab) && aligned_rows(grad_logits_cv, vocab);
  head_backward_kernel<<<static_cast<unsigned>(rows), threads, 0, static_cast<cudaStream_t>(stream)>>>(
      static_cast<const __nv_bfloat16*>(logits_cv), targets_c, vocab, inv_temperature, vectorized, lse_c, mean_c,
      g_logp_c, g_entropy_c, static_cast<__nv_bfloat16*>(grad_logits_cv));
}

}  // namespace caf_agent::learner::kernels
