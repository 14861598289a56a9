#pragma once
// cuBLASLt's own candidates for a decode step's projection, y[b, n] = x[b, d] w[n, d]^T (+ bias[n]),
// 16-bit in and out with fp32 accumulation: the problem torch::linear hands cuBLAS (column-major
// y^T = op_T(w) x^T, "TN"). policy_model_tool's `linear-rows --cublaslt K` times each candidate
// beside torch::linear's own choice, to say whether cuBLAS has a faster algorithm than the one it
// picks at the cached workload's 64-row shapes (docs/POLICY_MODEL.md, "What the open targets need").
// Plain C++ (no torch or CUDA headers here); built only with the CUDA kernels
// (cmake/cuda_kernels.cmake), linked against the cuBLASLt beside the torch wheel's libcudart.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace caf_agent::policy::kernels {

/// One candidate's configuration as cuBLASLt reports it (cublasLtMatmulAlgoConfigAttributes_t and
/// cublasLtMatmulHeuristicResult_t); -1 where cuBLASLt does not say.
struct lt_candidate {
  int64_t algo_id = -1, tile = -1, stages = -1, split_k = -1, reduction = -1, swizzle = -1, custom = -1;
  int64_t cluster = -1;
  size_t workspace = 0;  // bytes the candidate needs
  float waves = 0;       // cuBLASLt's estimate of the device's waves
};

/// The heuristic's candidates for one problem, in cuBLASLt's order (its first is its pick).
class lt_linear {
 public:
  /// `half`: fp16 (else bf16). At most `wanted` candidates, each within `max_workspace` bytes.
  /// On a refusal (no device, a shape cuBLASLt does not take) error() says why and size() is 0.
  lt_linear(bool half, int64_t b, int64_t d, int64_t n, bool bias, size_t max_workspace, int wanted);
  ~lt_linear();
  lt_linear(const lt_linear&) = delete;
  lt_linear& operator=(const lt_linear&) = delete;

  /// Empty when the candidates were found.
  const std::string& error() const;
  size_t size() const;
  const lt_candidate& candidate(size_t i) const;
  /// Runs candidate i on `stream` (a cudaStream_t); "" or the failure's words. `bias` is read
  /// only where the problem has one; `workspace` holds at least candidate(i).workspace bytes.
  std::string run(size_t i, const void* x, const void* w, const void* bias, void* y, void* workspace,
                  size_t workspace_bytes, void* stream) const;

 private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

}  // namespace caf_agent::policy::kernels
