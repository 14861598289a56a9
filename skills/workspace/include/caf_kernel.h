// caf_kernel.h: the one header a kernel in kernels/ includes (fixed infrastructure; the
// judge uses its own pristine copy, so edits here have no effect on verification).
//
// Register each op once, anywhere in kernels/:
//
//   torch::Tensor add_relu(torch::Tensor a, torch::Tensor b) { ... }
//   CAF_REGISTER(m) { m.def("add_relu", &add_relu); }
//
// and call it from model_new.py as `import caf_ext; caf_ext.add_relu(a, b)`.
// Allowed torch API: tensor types, allocation (torch::empty/empty_like/zeros), accessors
// (data_ptr, sizes, strides, packed_accessor), device/stream plumbing; cuBLAS for GEMM and
// cuDNN for convolution. Every other torch/at:: call is a fallback and fails verification.
#pragma once

#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_like.h>
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
using at::Tensor;
using at::empty;
using at::empty_like;
using at::zeros;
using at::zeros_like;
}  // namespace torch

// Rationale: a fragment per translation unit lets every file in kernels/ add its own ops to
// the single `caf_ext` namespace without a central list the agent would have to edit.
#define CAF_REGISTER(m) TORCH_LIBRARY_FRAGMENT(caf_ext, m)

#ifndef CAF_CHECK
#define CAF_CHECK(cond, ...) TORCH_CHECK(cond, __VA_ARGS__)
#endif
