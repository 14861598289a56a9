// tuned_gemm: see fused_kernels.hpp. torch::linear asks cublasLt's heuristic for one algorithm
// and runs it; for a decode step's skinny products (at most 64 rows against a weight read once)
// that first choice is often not the fastest of the candidates the heuristic ranks
// (bench/results/2026-12-04-policy-h200-tuned-gemm.md). A plan holds one product's descriptors
// and the heuristic's candidates; fused_ops.cpp times them on the device and keeps the fastest.
// Host code only: it compiles here for the toolkit's cublasLt.h, without torch's flags.
#include "policy/model/fused_kernels.hpp"

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <cstring>
#include <vector>

namespace caf_agent::policy::kernels {

struct gemm_plan {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t w_layout = nullptr, x_layout = nullptr, y_layout = nullptr;
  std::vector<cublasLtMatmulHeuristicResult_t> candidates;
  bool bias = false;
};

namespace {

// cublasStatus_t values are small non-negative numbers; they are returned offset so a caller
// tells them from cudaError_t values (check_launch prints the number).
constexpr int blas_offset = 100000;

int blas(cublasStatus_t status) {
  return status == CUBLAS_STATUS_SUCCESS ? 0 : blas_offset + static_cast<int>(status);
}

cudaDataType_t data_type(element dtype) {
  return dtype == element::bf16 ? CUDA_R_16BF : dtype == element::fp16 ? CUDA_R_16F : CUDA_R_32F;
}

}  // namespace

int gemm_plan_create(element dtype, int64_t m, int64_t n, int64_t k, bool bias, gemm_plan** out) {
  *out = nullptr;
  if (m < 1 || n < 1 || k < 1 || dtype == element::fp32) return static_cast<int>(cudaErrorInvalidValue);
  auto plan = new gemm_plan;
  plan->bias = bias;
  const cudaDataType_t type = data_type(dtype);
  // y [m, n] row-major is y^T [n, m] column-major = op(w) x^T with w [n, k] row-major read as a
  // column-major [k, n] and transposed, x [m, k] row-major a column-major [k, m].
  const cublasOperation_t transa = CUBLAS_OP_T, transb = CUBLAS_OP_N;
  const cublasLtEpilogue_t epilogue = bias ? CUBLASLT_EPILOGUE_BIAS : CUBLASLT_EPILOGUE_DEFAULT;
  int status = blas(cublasLtMatmulDescCreate(&plan->desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  if (status == 0)
    status = blas(cublasLtMatmulDescSetAttribute(plan->desc, CUBLASLT_MATMUL_DESC_TRANSA, &transa, sizeof(transa)));
  if (status == 0)
    status = blas(cublasLtMatmulDescSetAttribute(plan->desc, CUBLASLT_MATMUL_DESC_TRANSB, &transb, sizeof(transb)));
  if (status == 0)
    status =
        blas(cublasLtMatmulDescSetAttribute(plan->desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue, sizeof(epilogue)));
  if (status == 0) status = blas(cublasLtMatrixLayoutCreate(&plan->w_layout, type, k, n, k));
  if (status == 0) status = blas(cublasLtMatrixLayoutCreate(&plan->x_layout, type, k, m, k));
  if (status == 0) status = blas(cublasLtMatrixLayoutCreate(&plan->y_layout, type, n, m, n));
  if (status != 0) {
    gemm_plan_destroy(plan);
    return status;
  }
  *out = plan;
  return 0;
}

void gemm_plan_destroy(gemm_plan* plan) {
  if (plan == nullptr) return;
  if (plan->y_layout != nullptr) cublasLtMatrixLayoutDestroy(plan->y_layout);
  if (plan->x_layout != nullptr) cublasLtMatrixLayoutDestroy(plan->x_layout);
  if (plan->w_layout != nullptr) cublasLtMatrixLayoutDestroy(plan->w_layout);
  if (plan->desc != nullptr) cublasLtMatmulDescDestroy(plan->desc);
  delete plan;
}

int gemm_plan_find(void* lt_handle, gemm_plan* plan, size_t workspace_limit, int capacity, int* found) {
  *found = 0;
  if (capacity < 1) return static_cast<int>(cudaErrorInvalidValue);
  cublasLtMatmulPreference_t pref = nullptr;
  int status = blas(cublasLtMatmulPreferenceCreate(&pref));
  const uint64_t limit = workspace_limit;
  if (status == 0)
    status = blas(
        cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &limit, sizeof(limit)));
  plan->candidates.assign(static_cast<size_t>(capacity), cublasLtMatmulHeuristicResult_t{});
  int returned = 0;
  if (status == 0)
    status = blas(cublasLtMatmulAlgoGetHeuristic(static_cast<cublasLtHandle_t>(lt_handle), plan->desc, plan->w_layout,
                                                 plan->x_layout, plan->y_layout, plan->y_layout, pref, capacity,
                                                 plan->candidates.data(), &returned));
  if (pref != nullptr) cublasLtMatmulPreferenceDestroy(pref);
  plan->candidates.resize(status == 0 ? static_cast<size_t>(returned) : 0);
  *found = static_cast<int>(plan->candidates.size());
  return status;
}

size_t gemm_plan_workspace(const gemm_plan* plan, int candidate) {
  return plan->candidates.at(static_cast<size_t>(candidate)).workspaceSize;
}

int gemm_plan_run(void* lt_handle, gemm_plan* plan, int candidate, const void* x, const void* w, const void* bias,
                  void* y, void* workspace, size_t workspace_bytes, void* stream) {
  if (candidate < 0 || static_cast<size_t>(candidate) >= plan->candidates.size() || (bias != nullptr) != plan->bias)
    return static_cast<int>(cudaErrorInvalidValue);
  const auto& chosen = plan->candidates[static_cast<size_t>(candidate)];
  if (chosen.workspaceSize > workspace_bytes) return static_cast<int>(cudaErrorInvalidValue);
  if (plan->bias) {
    // Rationale: the bias pointer lives in the shared descriptor; fused_ops.cpp runs a plan
    // under its lock, so two threads never interleave this and the launch below.
    const int status =
        blas(cublasLtMatmulDescSetAttribute(plan->desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof(bias)));
    if (status != 0) return status;
  }
  const float alpha = 1.0f, beta = 0.0f;
  return blas(cublasLtMatmul(static_cast<cublasLtHandle_t>(lt_handle), plan->desc, &alpha, w, plan->w_layout, x,
                             plan->x_layout, &beta, y, plan->y_layout, y, plan->y_layout, &chosen.algo, workspace,
                             workspace_bytes, static_cast<cudaStream_t>(stream)));
}

}  // namespace caf_agent::policy::kernels
