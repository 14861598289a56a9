// caf_kernel.h: the header of the torch-facing side of your kernels (fixed infrastructure;
// the judge uses its own pristine copy, so edits here have no effect on verification).
//
// Split every op in two files:
//
//   kernels/add_relu.cu   -- #include "caf_cuda.h" only: __global__ kernels and a plain launcher
//                            taking raw pointers, sizes and a cudaStream_t (fast to compile);
//   kernels/add_relu.cpp  -- #include "caf_kernel.h": checks shapes, allocates the output,
//                            calls the launcher on caf::stream(), registers the op:
//
//   void add_relu_launch(const float* a, const float* b, float* out, int64_t n, cudaStream_t s);
//   torch::Tensor add_relu(torch::Tensor a, torch::Tensor b) {
//     auto out = torch::empty_like(a);
//     add_relu_launch(a.data_ptr<float>(), b.data_ptr<float>(), out.data_ptr<float>(),
//                     a.numel(), caf::stream());
//     return out;
//   }
//   CAF_REGISTER(m) { m.def("add_relu", &add_relu); }
//
// and call it from model_new.py as `import caf_ext; caf_ext.add_relu(a, b)`. The build
// precompiles this header once, so .cpp files cost ~1-2 s; a .cu that includes it pays for
// the torch headers three times over (~15 s). The CPU flavour has only .cpp files.
// Allowed torch API: tensor types, allocation (torch::empty/empty_like/zeros), accessors
// (data_ptr, sizes, strides, packed_accessor), device/stream plumbing; cuBLAS for GEMM and
// cuDNN for convolution (at::mm/addmm/bmm/baddbmm/convolution, declared below). Every other
// torch/at:: call is a fallback and fails verification: after the build the judge reads the
// library's undefined symbols and refuses any torch function outside that list by name.
#ifndef CAF_KERNEL_H
#define CAF_KERNEL_H

#include <ATen/core/Tensor.h>
// The sanctioned library calls (cuBLAS GEMM, cuDNN convolution; SKILL.md): at::mm,
// at::addmm, at::bmm, at::baddbmm and at::convolution work with this header alone.
#include <ATen/ops/addmm.h>
#include <ATen/ops/baddbmm.h>
#include <ATen/ops/bmm.h>
#include <ATen/ops/convolution.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_like.h>
#include <ATen/ops/mm.h>
#include <ATen/ops/zeros.h>
#include <ATen/ops/zeros_like.h>
#include <torch/library.h>

#include <cstdint>

#ifdef __CUDACC__
#include <cuda_runtime.h>
#endif
#if defined(CAF_KERNEL_CUDA)
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>
#endif

// The light headers above do not declare the torch:: aliases of the full C++ API; these
// are the ones a kernel needs (allocation and the tensor type), nothing that computes.
namespace torch {
using at::empty;
using at::empty_like;
using at::Tensor;
using at::zeros;
using at::zeros_like;
}  // namespace torch

// Rationale: a fragment per translation unit lets every file in kernels/ add its own ops to
// the single `caf_ext` namespace without a central list the agent would have to edit.
#define CAF_REGISTER(m) TORCH_LIBRARY_FRAGMENT(caf_ext, m)

#ifndef CAF_CHECK
#define CAF_CHECK(cond, ...) TORCH_CHECK(cond, __VA_ARGS__)
#endif

#if defined(CAF_KERNEL_CUDA)
namespace caf {
// The stream torch is using now: launch every kernel on it.
inline cudaStream_t stream() {
  return at::cuda::getCurrentCUDAStream();
}
}  // namespace caf
#endif

#endif  // CAF_KERNEL_H
