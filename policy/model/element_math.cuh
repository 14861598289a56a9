#pragma once
// element_math: the element types' conversions shared by policy/model's kernels (nvcc only):
// to_f reads an element as fp32, from_f rounds an fp32 to the element type (to nearest even),
// round_to the value a composite holds in a tensor of that type, silu_times silu_mul's rounding.

#include <cuda_bf16.h>
#include <cuda_fp16.h>

namespace caf_agent::policy::kernels {

__device__ __forceinline__ float to_f(__nv_bfloat16 v) {
  return __bfloat162float(v);
}
__device__ __forceinline__ float to_f(__half v) {
  return __half2float(v);
}
__device__ __forceinline__ float to_f(float v) {
  return v;
}

template <typename T>
__device__ __forceinline__ T from_f(float v);
template <>
__device__ __forceinline__ __nv_bfloat16 from_f<__nv_bfloat16>(float v) {
  return __float2bfloat16_rn(v);
}
template <>
__device__ __forceinline__ __half from_f<__half>(float v) {
  return __float2half_rn(v);
}
template <>
__device__ __forceinline__ float from_f<float>(float v) {
  return v;
}

/// v rounded to T and back: the value a composite holds in a tensor of dtype T.
template <typename T>
__device__ __forceinline__ float round_to(float v) {
  return to_f(from_f<T>(v));
}

/// silu of a gate rounded (the composite's silu output), times up, rounded: silu_mul's bits from
/// the rounded gate g and up u.
template <typename T>
__device__ __forceinline__ T silu_times(float g, float u) {
  return from_f<T>(round_to<T>(g / (1.0f + expf(-g))) * u);
}

}  // namespace caf_agent::policy::kernels
