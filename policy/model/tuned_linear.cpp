// Shape legend: see tuned_linear.hpp.
#include "policy/model/tuned_linear.hpp"

#include <algorithm>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <sstream>
#include <tuple>

#include <ATen/ATen.h>

#if defined(CAF_AGENT_POLICY_FUSED_KERNELS)
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime_api.h>

#include "policy/model/fused_kernels.hpp"
#endif

namespace caf_agent::policy {

#if defined(CAF_AGENT_POLICY_FUSED_KERNELS)
namespace {

// Rationale: candidates may use up to this much workspace; one buffer a device, allocated once
// and never freed, because captured graphs keep its address.
constexpr size_t workspace_bytes = size_t{32} << 20;
constexpr int max_candidates = 16;
constexpr int timed_runs = 9;                        // median of these, each after an L2 flush
constexpr int64_t flush_bytes = int64_t{256} << 20;  // well past the H200's 60 MB L2
constexpr double required_gain = 0.97;               // a candidate must beat torch::linear by 3%

struct plan_entry {
  std::mutex run_lock;  // a plan's descriptor holds the bias pointer between set and launch
  std::unique_ptr<kernels::gemm_plan, void (*)(kernels::gemm_plan*)> plan{nullptr, kernels::gemm_plan_destroy};
  int chosen = -1;  // -1: torch::linear
  int candidates = 0;
  double torch_us = 0, chosen_us = 0;
};

// (device, dtype, m, n, k, bias)
using plan_key = std::tuple<int, int, int64_t, int64_t, int64_t, bool>;

struct tuner {
  std::mutex lock;
  std::map<plan_key, std::unique_ptr<plan_entry>> plans;
  std::map<int, torch::Tensor*> workspaces;  // leaked: alive as long as any graph
};

tuner& the_tuner() {
  static auto* t = new tuner;  // never destroyed: no teardown order against CUDA's
  return *t;
}

bool aligned(const torch::Tensor& t) {
  return !t.defined() || reinterpret_cast<uintptr_t>(t.data_ptr()) % 256 == 0;
}

kernels::element element_of(torch::ScalarType type) {
  return type == torch::kBFloat16 ? kernels::element::bf16 : kernels::element::fp16;
}

cudaStream_t stream_of(const torch::Tensor& t) {
  return c10::cuda::getCurrentCUDAStream(t.device().index()).stream();
}

bool capturing(cudaStream_t stream) {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  return cudaStreamIsCapturing(stream, &status) != cudaSuccess || status != cudaStreamCaptureStatusNone;
}

void check(int status, const char* what) {
  TORCH_CHECK(status == 0, "tuned_linear: ", what, " failed (status ", status,
              "; >= 100000: a cublasStatus_t + 100000, else a cudaError_t)");
}

// Median device time of `run` in microseconds, each run after the L2 is flushed.
template <class F>
double median_us(cudaStream_t stream, torch::Tensor& flush, F&& run) {
  cudaEvent_t start = nullptr, stop = nullptr;
  TORCH_CHECK(cudaEventCreate(&start) == cudaSuccess && cudaEventCreate(&stop) == cudaSuccess,
              "tuned_linear: cudaEventCreate failed");
  std::vector<float> ms;
  for (int i = 0; i < timed_runs; ++i) {
    flush.zero_();
    cudaEventRecord(start, stream);
    run();
    cudaEventRecord(stop, stream);
    cudaEventSynchronize(stop);
    float elapsed = 0;
    cudaEventElapsedTime(&elapsed, start, stop);
    ms.push_back(elapsed);
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  std::nth_element(ms.begin(), ms.begin() + timed_runs / 2, ms.end());
  return 1000.0 * ms[timed_runs / 2];
}

// The candidates of x w^T (+ b) timed against torch::linear; the fastest kept when it wins by 3%.
void tune(plan_entry& e, const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& b, int64_t m, int64_t n,
          int64_t k, void* lt, torch::Tensor& workspace) {
  const cudaStream_t stream = stream_of(x);
  kernels::gemm_plan* raw = nullptr;
  check(kernels::gemm_plan_create(element_of(x.scalar_type()), m, n, k, b.defined(), &raw), "creating a plan");
  e.plan.reset(raw);
  check(kernels::gemm_plan_find(lt, raw, workspace_bytes, max_candidates, &e.candidates), "the heuristic");
  auto flush = torch::empty({flush_bytes / 4}, x.options().dtype(torch::kInt32));
  const auto reference = torch::linear(x, w, b).to(torch::kFloat32);
  const double scale = reference.abs().max().item<double>() + 1e-3;
  e.torch_us = median_us(stream, flush, [&] { (void)torch::linear(x, w, b); });
  e.chosen_us = e.torch_us;
  auto y = torch::empty({m, n}, x.options());
  for (int c = 0; c < e.candidates; ++c) {
    if (kernels::gemm_plan_workspace(raw, c) > workspace_bytes) continue;
    auto run = [&] {
      return kernels::gemm_plan_run(lt, raw, c, x.data_ptr(), w.data_ptr(), b.defined() ? b.data_ptr() : nullptr,
                                    y.data_ptr(), workspace.data_ptr(), workspace_bytes, stream);
    };
    if (run() != 0) continue;  // a candidate the library cannot launch here is skipped
    // Sums in another order round differently, by a few units of the last place at most.
    const double off = (y.to(torch::kFloat32) - reference).abs().max().item<double>();
    if (!(off <= 0.02 * scale)) continue;
    const double us = median_us(stream, flush, [&] { (void)run(); });
    if (us < required_gain * e.torch_us && us < e.chosen_us) {
      e.chosen = c;
      e.chosen_us = us;
    }
  }
}

}  // namespace
#endif

bool tuned_linear_applies(const torch::Tensor& x, const torch::Tensor& weight_nk, const torch::Tensor& bias_n) {
#if defined(CAF_AGENT_POLICY_FUSED_KERNELS)
  if (!x.defined() || !weight_nk.defined() || !x.is_cuda() || x.dim() < 1 || weight_nk.dim() != 2) return false;
  const auto dtype = x.scalar_type();
  if (dtype != torch::kBFloat16 && dtype != torch::kHalf) return false;
  const int64_t k = x.size(-1), n = weight_nk.size(0);
  if (k < 1 || weight_nk.size(1) != k || x.numel() % k != 0) return false;
  const int64_t m = x.numel() / k;
  if (m < 1 || m > tuned_linear_max_rows) return false;
  for (const auto* t : {&x, &weight_nk, &bias_n}) {
    if (!t->defined()) continue;
    if (t->device() != x.device() || t->scalar_type() != dtype || !t->is_contiguous() || t->requires_grad() ||
        !aligned(*t))
      return false;
  }
  return !bias_n.defined() || (bias_n.dim() == 1 && bias_n.size(0) == n);
#else
  (void)x;
  (void)weight_nk;
  (void)bias_n;
  return false;
#endif
}

torch::Tensor tuned_linear(const torch::Tensor& x, const torch::Tensor& weight_nk, const torch::Tensor& bias_n) {
  if (!tuned_linear_applies(x, weight_nk, bias_n)) return torch::linear(x, weight_nk, bias_n);
#if defined(CAF_AGENT_POLICY_FUSED_KERNELS)
  const c10::cuda::CUDAGuard guard(x.device());
  const int64_t k = x.size(-1), n = weight_nk.size(0), m = x.numel() / k;
  const plan_key key{x.device().index(), static_cast<int>(x.scalar_type()), m, n, k, bias_n.defined()};
  const cudaStream_t stream = stream_of(x);
  auto& t = the_tuner();
  plan_entry* e = nullptr;
  torch::Tensor* workspace = nullptr;
  void* lt = at::cuda::getCurrentCUDABlasLtHandle();
  {
    std::lock_guard<std::mutex> hold(t.lock);
    auto it = t.plans.find(key);
    if (it == t.plans.end()) {
      // Tuning synchronizes; under capture this shape runs as torch::linear (the capture's
      // warm-up tunes it first, so a captured step meets a tuned plan).
      if (capturing(stream)) return torch::linear(x, weight_nk, bias_n);
      auto& ws = t.workspaces[x.device().index()];
      if (ws == nullptr)
        ws = new torch::Tensor(torch::empty({static_cast<int64_t>(workspace_bytes)}, x.options().dtype(torch::kUInt8)));
      auto entry = std::make_unique<plan_entry>();
      tune(*entry, x, weight_nk, bias_n, m, n, k, lt, *ws);
      it = t.plans.emplace(key, std::move(entry)).first;
    }
    e = it->second.get();
    workspace = t.workspaces.at(x.device().index());
  }
  if (e->chosen < 0) return torch::linear(x, weight_nk, bias_n);
  auto sizes = x.sizes().vec();
  sizes.back() = n;
  auto y = torch::empty(sizes, x.options());
  std::lock_guard<std::mutex> hold(e->run_lock);
  check(kernels::gemm_plan_run(lt, e->plan.get(), e->chosen, x.data_ptr(), weight_nk.data_ptr(),
                               bias_n.defined() ? bias_n.data_ptr() : nullptr, y.data_ptr(), workspace->data_ptr(),
                               workspace_bytes, stream),
        "cublasLtMatmul");
  return y;
#else
  TORCH_CHECK(false, "tuned_linear: unreachable without kernels");
#endif
}

std::vector<std::string> tuned_linear_report() {
  std::vector<std::string> lines;
#if defined(CAF_AGENT_POLICY_FUSED_KERNELS)
  auto& t = the_tuner();
  std::lock_guard<std::mutex> hold(t.lock);
  for (const auto& [key, e] : t.plans) {
    const auto& [device, dtype, m, n, k, bias] = key;
    std::ostringstream line;
    line << "cuda:" << device << " m=" << m << " n=" << n << " k=" << k << (bias ? " +bias" : "") << ": "
         << (e->chosen < 0 ? std::string("torch::linear") : "candidate " + std::to_string(e->chosen)) << " of "
         << e->candidates << ", " << e->chosen_us << " us (torch::linear " << e->torch_us << " us)";
    lines.push_back(line.str());
  }
#endif
  return lines;
}

}  // namespace caf_agent::policy
