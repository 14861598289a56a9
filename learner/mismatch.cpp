// Sampler/trainer mismatch statistics (see mismatch.hpp).
//
// Shape legend: t tokens of a packed batch, k masked tokens.

#include "learner/mismatch.hpp"

#include <string>

#include <torch/torch.h>

namespace caf_agent::learner {

result<mismatch_result> mismatch_stats(const torch::Tensor& sampler_logp_t, const torch::Tensor& trainer_logp_t,
                                       const torch::Tensor& mask_t, std::optional<ratio_band> band) {
  if (!sampler_logp_t.defined() || !trainer_logp_t.defined() || !mask_t.defined() || sampler_logp_t.dim() != 1 ||
      sampler_logp_t.sizes() != trainer_logp_t.sizes() || sampler_logp_t.sizes() != mask_t.sizes())
    return fail("mismatch_stats: sampler_logp, trainer_logp and mask must be defined, 1-d and of one length");
  if (band && !(band->low < band->high)) return fail("mismatch_stats: the band needs low < high");
  // Rationale: statistics, not gradients; fp64 on the host keeps max and mean exact for
  // 131k-token batches, and the copy is t floats, small next to the step.
  const auto mask_b_t = mask_t.to(torch::kCPU) != 0;
  const auto sampler_k = sampler_logp_t.detach().to(torch::kCPU, torch::kFloat64).masked_select(mask_b_t);
  const auto trainer_k = trainer_logp_t.detach().to(torch::kCPU, torch::kFloat64).masked_select(mask_b_t);
  mismatch_result out;
  out.tokens = sampler_k.numel();
  if (out.tokens == 0) return fail("mismatch_stats: no masked token to compare");
  const auto finite_k = torch::isfinite(sampler_k) & torch::isfinite(trainer_k);
  if (!finite_k.all().item<bool>()) {
    const int64_t k = (~finite_k).nonzero().index({0, 0}).item<int64_t>();
    const int64_t t = mask_b_t.nonzero().index({k, 0}).item<int64_t>();
    return fail("mismatch_stats: a non-finite log-probability at token " + std::to_string(t) + " (sampler " +
                std::to_string(sampler_k[k].item<double>()) + ", trainer " +
                std::to_string(trainer_k[k].item<double>()) + ")");
  }
  const auto delta_k = trainer_k - sampler_k;  // log rho
  const auto abs_k = delta_k.abs();
  const auto rho_k = torch::exp(delta_k);
  out.abs_delta_mean = abs_k.mean().item<double>();
  out.abs_delta_max = abs_k.max().item<double>();
  out.kl_k1 = (-delta_k).mean().item<double>();
  out.kl_k3 = (rho_k - 1.0 - delta_k).mean().item<double>();
  out.ratio_mean = rho_k.mean().item<double>();
  out.ratio_max = rho_k.max().item<double>();
  out.ratio_min = rho_k.min().item<double>();
  if (band) out.outside_band = ((rho_k < band->low) | (rho_k > band->high)).sum().item<int64_t>();
  return out;
}

}  // namespace caf_agent::learner
