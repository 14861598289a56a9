// fused_head: see fused_head.hpp.
#include "learner/fused_head.hpp"

#include <ATen/ATen.h>
#include <torch/csrc/autograd/custom_function.h>

#if defined(CAF_AGENT_FUSED_HEAD)
#include <c10/cuda/CUDAStream.h>

#include "learner/fused_head_kernels.hpp"
#endif

namespace caf_agent::learner {

#if defined(CAF_AGENT_FUSED_HEAD)
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

void* stream_of(const torch::Tensor& t) {
  return c10::cuda::getCurrentCUDAStream(t.device().index()).stream();
}

/// Autograd node: forward = matmul + head_forward; backward = head_backward + two matmuls.
struct fused_head_function : torch::autograd::Function<fused_head_function> {
  static variable_list forward(AutogradContext* ctx, const torch::Tensor& h_cd, const torch::Tensor& w_vd,
                               const torch::Tensor& targets_c, double temperature, bool keep_logits) {
    auto logits_cv = at::mm(h_cd, w_vd.t()).contiguous();
    auto targets = targets_c.contiguous();
    const auto f32 = h_cd.options().dtype(torch::kFloat32);
    const int64_t c = logits_cv.size(0), v = logits_cv.size(1);
    auto logp_c = torch::empty({c}, f32), entropy_c = torch::empty({c}, f32);
    auto lse_c = torch::empty({c}, f32), mean_c = torch::empty({c}, f32);
    const float inv_t = static_cast<float>(1.0 / temperature);
    kernels::head_forward(logits_cv.data_ptr(), targets.data_ptr<int64_t>(), c, v, inv_t, logp_c.data_ptr<float>(),
                          entropy_c.data_ptr<float>(), lse_c.data_ptr<float>(), mean_c.data_ptr<float>(),
                          stream_of(logits_cv));
    ctx->save_for_backward({h_cd, w_vd, targets, lse_c, mean_c, keep_logits ? logits_cv : torch::Tensor()});
    ctx->saved_data["inv_t"] = static_cast<double>(inv_t);
    return {logp_c, entropy_c};
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    auto saved = ctx->get_saved_variables();
    const auto& h_cd = saved[0];
    const auto& w_vd = saved[1];
    const auto& targets = saved[2];
    auto logits_cv = saved[5].defined() ? saved[5] : at::mm(h_cd, w_vd.t()).contiguous();
    const int64_t c = logits_cv.size(0), v = logits_cv.size(1);
    auto g_logp = grads[0].defined() ? grads[0].to(torch::kFloat32).contiguous() : torch::Tensor();
    auto g_entropy = grads[1].defined() ? grads[1].to(torch::kFloat32).contiguous() : torch::Tensor();
    auto grad_cv = torch::empty_like(logits_cv);
    kernels::head_backward(logits_cv.data_ptr(), targets.data_ptr<int64_t>(), c, v,
                           static_cast<float>(ctx->saved_data["inv_t"].toDouble()), saved[3].data_ptr<float>(),
                           saved[4].data_ptr<float>(), g_logp.defined() ? g_logp.data_ptr<float>() : nullptr,
                           g_entropy.defined() ? g_entropy.data_ptr<float>() : nullptr, grad_cv.data_ptr(),
                           stream_of(grad_cv));
    return {at::mm(grad_cv, w_vd), at::mm(grad_cv.t(), h_cd), torch::Tensor(), torch::Tensor(), torch::Tensor()};
  }
};

}  // namespace
#endif

bool fused_head_built() {
#if defined(CAF_AGENT_FUSED_HEAD)
  return true;
#else
  return false;
#endif
}

bool fused_head_applies(const torch::Tensor& h_cd, const torch::Tensor& w_vd) {
#if defined(CAF_AGENT_FUSED_HEAD)
  return h_cd.is_cuda() && w_vd.is_cuda() && h_cd.scalar_type() == torch::kBFloat16 &&
         w_vd.scalar_type() == torch::kBFloat16 && h_cd.dim() == 2 && w_vd.dim() == 2 && h_cd.size(1) == w_vd.size(1);
#else
  (void)h_cd;
  (void)w_vd;
  return false;
#endif
}

std::vector<torch::Tensor> fused_head(const torch::Tensor& h_cd, const torch::Tensor& w_vd,
                                      const torch::Tensor& targets_c, double temperature, bool keep_logits) {
#if defined(CAF_AGENT_FUSED_HEAD)
  auto out = fused_head_function::apply(h_cd, w_vd, targets_c, temperature, keep_logits);
  return {out[0], out[1]};
#else
  (void)h_cd;
  (void)w_vd;
  (void)targets_c;
  (void)temperature;
  (void)keep_logits;
  TORCH_CHECK(false, "fused_head: this build has no CUDA kernels (check fused_head_applies first)");
#endif
}

}  // namespace caf_agent::learner
