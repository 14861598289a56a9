// cuBLASLt's candidates for a decode step's projection (cublaslt_algos.hpp): host code only.
#include "policy/model/cublaslt_algos.hpp"

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <vector>

namespace caf_agent::policy::kernels {

namespace {

std::string lt_failure(const char* what, cublasStatus_t status) {
  return std::string(what) + " failed: cuBLAS status " + std::to_string(static_cast<int>(status));
}

// One attribute of a candidate's configuration, -1 where cuBLASLt does not give it at that width.
template <typename T>
int64_t config_of(const cublasLtMatmulAlgo_t& algo, cublasLtMatmulAlgoConfigAttributes_t attr) {
  T value{};
  size_t written = 0;
  if (cublasLtMatmulAlgoConfigGetAttribute(&algo, attr, &value, sizeof value, &written) != CUBLAS_STATUS_SUCCESS ||
      written != sizeof value)
    return -1;
  return static_cast<int64_t>(value);
}

}  // namespace

struct lt_linear::impl {
  std::string error;
  bool bias = false;
  cublasLtHandle_t handle = nullptr;
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t w_layout = nullptr, x_layout = nullptr, y_layout = nullptr;
  cublasLtMatmulPreference_t preference = nullptr;
  std::vector<cublasLtMatmulAlgo_t> algos;
  std::vector<lt_candidate> candidates;

  ~impl() {
    if (preference) cublasLtMatmulPreferenceDestroy(preference);
    if (y_layout) cublasLtMatrixLayoutDestroy(y_layout);
    if (x_layout) cublasLtMatrixLayoutDestroy(x_layout);
    if (w_layout) cublasLtMatrixLayoutDestroy(w_layout);
    if (op) cublasLtMatmulDescDestroy(op);
    if (handle) cublasLtDestroy(handle);
  }

  // Every descriptor and the heuristic's answer; "" or the first failure.
  std::string find(bool half, int64_t b, int64_t d, int64_t n, size_t max_workspace, int wanted) {
    const cudaDataType_t type = half ? CUDA_R_16F : CUDA_R_16BF;
    if (auto s = cublasLtCreate(&handle); s != CUBLAS_STATUS_SUCCESS) return lt_failure("cublasLtCreate", s);
    if (auto s = cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F); s != CUBLAS_STATUS_SUCCESS)
      return lt_failure("cublasLtMatmulDescCreate", s);
    const cublasOperation_t transpose = CUBLAS_OP_T, keep = CUBLAS_OP_N;
    cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &transpose, sizeof transpose);
    cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSB, &keep, sizeof keep);
    if (bias) {
      const cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_BIAS;
      cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue, sizeof epilogue);
      cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &type, sizeof type);
    }
    // Column-major: w [n, d] row-major is d x n (ld d), taken transposed; x [b, d] is d x b (ld d);
    // y [b, n] is n x b (ld n).
    if (auto s = cublasLtMatrixLayoutCreate(&w_layout, type, d, n, d); s != CUBLAS_STATUS_SUCCESS)
      return lt_failure("cublasLtMatrixLayoutCreate (w)", s);
    if (auto s = cublasLtMatrixLayoutCreate(&x_layout, type, d, b, d); s != CUBLAS_STATUS_SUCCESS)
      return lt_failure("cublasLtMatrixLayoutCreate (x)", s);
    if (auto s = cublasLtMatrixLayoutCreate(&y_layout, type, n, b, n); s != CUBLAS_STATUS_SUCCESS)
      return lt_failure("cublasLtMatrixLayoutCreate (y)", s);
    if (auto s = cublasLtMatmulPreferenceCreate(&preference); s != CUBLAS_STATUS_SUCCESS)
      return lt_failure("cublasLtMatmulPreferenceCreate", s);
    const uint64_t workspace = max_workspace;
    cublasLtMatmulPreferenceSetAttribute(preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace,
                                         sizeof workspace);
    std::vector<cublasLtMatmulHeuristicResult_t> found(static_cast<size_t>(wanted));
    int returned = 0;
    if (auto s = cublasLtMatmulAlgoGetHeuristic(handle, op, w_layout, x_layout, y_layout, y_layout, preference, wanted,
                                                found.data(), &returned);
        s != CUBLAS_STATUS_SUCCESS)
      return lt_failure("cublasLtMatmulAlgoGetHeuristic", s);
    for (int i = 0; i < returned; ++i) {
      if (found[i].state != CUBLAS_STATUS_SUCCESS) continue;
      const auto& algo = found[i].algo;
      lt_candidate c;
      c.algo_id = config_of<int32_t>(algo, CUBLASLT_ALGO_CONFIG_ID);
      c.tile = config_of<uint32_t>(algo, CUBLASLT_ALGO_CONFIG_TILE_ID);
      c.stages = config_of<uint32_t>(algo, CUBLASLT_ALGO_CONFIG_STAGES_ID);
      c.split_k = config_of<int32_t>(algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM);
      c.reduction = config_of<uint32_t>(algo, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME);
      c.swizzle = config_of<uint32_t>(algo, CUBLASLT_ALGO_CONFIG_CTA_SWIZZLING);
      c.custom = config_of<uint32_t>(algo, CUBLASLT_ALGO_CONFIG_CUSTOM_OPTION);
      c.cluster = config_of<uint16_t>(algo, CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID);
      c.workspace = found[i].workspaceSize;
      c.waves = found[i].wavesCount;
      algos.push_back(algo);
      candidates.push_back(c);
    }
    if (candidates.empty()) return "cuBLASLt offered no candidate for this problem";
    return "";
  }
};

lt_linear::lt_linear(bool half, int64_t b, int64_t d, int64_t n, bool bias, size_t max_workspace, int wanted)
    : impl_(std::make_unique<impl>()) {
  impl_->bias = bias;
  if (b < 1 || d < 1 || n < 1 || wanted < 1) {
    impl_->error = "rows, in, out features and the candidates wanted must be at least 1";
    return;
  }
  impl_->error = impl_->find(half, b, d, n, max_workspace, wanted);
  if (!impl_->error.empty()) {
    impl_->algos.clear();
    impl_->candidates.clear();
  }
}

lt_linear::~lt_linear() = default;

const std::string& lt_linear::error() const {
  return impl_->error;
}

size_t lt_linear::size() const {
  return impl_->candidates.size();
}

const lt_candidate& lt_linear::candidate(size_t i) const {
  return impl_->candidates.at(i);
}

std::string lt_linear::run(size_t i, const void* x, const void* w, const void* bias, void* y, void* workspace,
                           size_t workspace_bytes, void* stream) const {
  if (i >= impl_->algos.size()) return "no candidate " + std::to_string(i);
  if (workspace_bytes < impl_->candidates[i].workspace)
    return "candidate " + std::to_string(i) + " needs " + std::to_string(impl_->candidates[i].workspace) +
           " bytes of workspace, given " + std::to_string(workspace_bytes);
  if (impl_->bias) cublasLtMatmulDescSetAttribute(impl_->op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias);
  const float one = 1.0f, zero = 0.0f;
  const auto s = cublasLtMatmul(impl_->handle, impl_->op, &one, w, impl_->w_layout, x, impl_->x_layout, &zero, y,
                                impl_->y_layout, y, impl_->y_layout, &impl_->algos[i], workspace, workspace_bytes,
                                static_cast<cudaStream_t>(stream));
  return s == CUBLAS_STATUS_SUCCESS ? "" : lt_failure("cublasLtMatmul", s);
}

}  // namespace caf_agent::policy::kernels
