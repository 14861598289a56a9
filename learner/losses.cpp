// The training objectives (see losses.hpp).
//
// Shape legend: t tokens of the packed batch, n1 = trajectories + 1 offsets.

#include "learner/losses.hpp"

#include <limits>
#include <string>
#include <vector>

#include <torch/torch.h>

#include "learner/gae.hpp"

namespace caf_agent::learner {

namespace {

// A per-token input must be a defined 1-d tensor of the batch's length.
status check_tokens(const char* what, const char* name, const torch::Tensor& x_t, int64_t tokens) {
  if (!x_t.defined()) return fail(std::string(what) + ": " + name + " is undefined");
  if (x_t.dim() != 1 || x_t.numel() != tokens)
    return fail(std::string(what) + ": " + name + " must be 1-d with " + std::to_string(tokens) +
                " tokens, got shape " + c10::str(x_t.sizes()));
  return {};
}

// The shared checks of a loss over (x_t, mask, offsets): shapes and layout.
status check_batch(const char* what, const torch::Tensor& x_t, const torch::Tensor& loss_mask_t,
                   const torch::Tensor& seq_offsets_n1) {
  if (!x_t.defined() || x_t.dim() != 1) return fail(std::string(what) + ": the per-token input must be 1-d [t]");
  if (auto ok = check_tokens(what, "loss_mask", loss_mask_t, x_t.numel()); !ok) return ok;
  return check_offsets(seq_offsets_n1, x_t.numel(), what);
}

torch::Tensor zero_where_masked(const torch::Tensor& x_t, const torch::Tensor& mask_b_t) {
  return torch::where(mask_b_t, x_t, torch::zeros({}, x_t.options()));
}

// Copies scalar statistics to the host in one transfer.
std::vector<double> to_host(const std::vector<torch::Tensor>& scalars) {
  const auto host_k = torch::stack(scalars).to(torch::kCPU, torch::kFloat64).contiguous();
  const auto* p = host_k.data_ptr<double>();
  return std::vector<double>(p, p + host_k.numel());
}

}  // namespace

result<ppo_result> ppo_policy_loss(const ppo_batch& batch, const ppo_options& options) {
  constexpr const char* what = "ppo_policy_loss";
  if (auto ok = check_batch(what, batch.logp_t, batch.loss_mask_t, batch.seq_offsets_n1); !ok) return ok.error();
  const int64_t t = batch.logp_t.numel();
  if (auto ok = check_tokens(what, "old_logp", batch.old_logp_t, t); !ok) return ok.error();
  if (auto ok = check_tokens(what, "advantages", batch.advantages_t, t); !ok) return ok.error();
  if (!(options.clip_low > 0 && options.clip_low < 1)) return fail("ppo_policy_loss: clip_low must be in (0, 1)");
  if (!(options.clip_high > 0)) return fail("ppo_policy_loss: clip_high must be > 0");
  const bool needs_sampler = options.truncated_is_cap || options.mask_ratio_band;
  if (needs_sampler) {
    if (!batch.sampler_logp_t.defined())
      return fail("ppo_policy_loss: truncated IS and ratio-band masking need sampler_logp");
    if (auto ok = check_tokens(what, "sampler_logp", batch.sampler_logp_t, t); !ok) return ok.error();
  }
  if (options.truncated_is_cap && !(*options.truncated_is_cap > 0))
    return fail("ppo_policy_loss: truncated_is_cap must be > 0");
  if (options.mask_ratio_band && !(options.mask_ratio_band->low < options.mask_ratio_band->high))
    return fail("ppo_policy_loss: mask_ratio_band needs low < high");

  const auto logp_t = batch.logp_t.to(torch::kFloat32);
  const auto device = logp_t.device();
  const auto old_t = batch.old_logp_t.detach().to(device, torch::kFloat32);
  const auto adv_t = batch.advantages_t.detach().to(device, torch::kFloat32);
  const auto sampled_b_t = batch.loss_mask_t.to(device) != 0;
  auto mask_b_t = sampled_b_t;

  ppo_result out;
  torch::Tensor is_weight_t;  // sampler -> trainer importance weight, truncated
  torch::Tensor band_masked = torch::zeros({}, torch::kInt64).to(device);
  torch::Tensor is_truncated = torch::zeros({}, torch::kInt64).to(device);
  if (needs_sampler) {
    const auto sampler_t = batch.sampler_logp_t.detach().to(device, torch::kFloat32);
    const auto w_t = torch::exp(zero_where_masked(old_t - sampler_t, sampled_b_t));
    if (options.mask_ratio_band) {
      const auto in_band_b_t = (w_t >= options.mask_ratio_band->low) & (w_t <= options.mask_ratio_band->high);
      band_masked = (sampled_b_t & ~in_band_b_t).sum();
      mask_b_t = sampled_b_t & in_band_b_t;
    }
    if (options.truncated_is_cap) {
      is_truncated = (mask_b_t & (w_t > *options.truncated_is_cap)).sum();
      is_weight_t = w_t.clamp_max(*options.truncated_is_cap);
    }
  }

  const auto log_ratio_t = zero_where_masked(logp_t - old_t, mask_b_t);
  const auto ratio_t = torch::exp(log_ratio_t);
  const auto clipped_t = ratio_t.clamp(1.0 - options.clip_low, 1.0 + options.clip_high);
  const auto surr_t = ratio_t * adv_t;
  const auto surr_clipped_t = clipped_t * adv_t;
  auto loss_t = -torch::min(surr_t, surr_clipped_t);
  if (is_weight_t.defined()) loss_t = loss_t * is_weight_t;
  auto loss = masked_aggregate(loss_t, mask_b_t, batch.seq_offsets_n1, options.agg);
  if (!loss) {
    if (options.mask_ratio_band && sampled_b_t.any().item<bool>())
      return fail("ppo_policy_loss: every sampled token left the ratio band (nothing to train on)");
    return fail(std::string(what) + ": " + loss.error().message);
  }
  out.loss = std::move(*loss);

  // Statistics, detached, over the tokens in the loss.
  const auto r_t = ratio_t.detach();
  const auto m_t = mask_b_t.to(torch::kFloat32);
  const auto tokens = m_t.sum();
  const auto mean = [&](const torch::Tensor& x_t) { return (zero_where_masked(x_t, mask_b_t)).sum() / tokens; };
  const auto lr_t = log_ratio_t.detach();
  const auto clipped_b_t = mask_b_t & (surr_clipped_t.detach() < surr_t.detach());
  const auto low_b_t = mask_b_t & (r_t < 1.0 - options.clip_low) & (adv_t < 0);
  const auto high_b_t = mask_b_t & (r_t > 1.0 + options.clip_high) & (adv_t > 0);
  const auto big = torch::full({}, std::numeric_limits<float>::infinity(), r_t.options());
  const auto host =
      to_host({tokens, clipped_b_t.sum() / tokens, low_b_t.sum() / tokens, high_b_t.sum() / tokens, mean(r_t),
               torch::where(mask_b_t, r_t, -big).max(), torch::where(mask_b_t, r_t, big).min(), mean(-lr_t),
               mean(r_t - 1.0 - lr_t), is_weight_t.defined() ? mean(is_weight_t) : torch::ones({}, r_t.options()),
               band_masked.to(torch::kFloat32), is_truncated.to(torch::kFloat32)});
  out.tokens = static_cast<int64_t>(host[0]);
  out.clip_fraction = host[1];
  out.clip_fraction_low = host[2];
  out.clip_fraction_high = host[3];
  out.ratio_mean = host[4];
  out.ratio_max = host[5];
  out.ratio_min = host[6];
  out.approx_kl_k1 = host[7];
  out.approx_kl_k3 = host[8];
  out.is_weight_mean = host[9];
  out.band_masked = static_cast<int64_t>(host[10]);
  out.is_truncated = static_cast<int64_t>(host[11]);
  const int64_t n = batch.seq_offsets_n1.numel() - 1;
  out.empty_sequences = n - static_cast<int64_t>(aggregation_count(mask_b_t, batch.seq_offsets_n1,
                                                                   aggregation_mode::seq_mean_token_mean));
  return out;
}

result<value_loss_result> value_loss(const torch::Tensor& values_t, const torch::Tensor& old_values_t,
                                     const torch::Tensor& returns_t, const torch::Tensor& loss_mask_t,
                                     const torch::Tensor& seq_offsets_n1, const value_loss_options& options) {
  constexpr const char* what = "value_loss";
  if (auto ok = check_batch(what, values_t, loss_mask_t, seq_offsets_n1); !ok) return ok.error();
  const int64_t t = values_t.numel();
  if (auto ok = check_tokens(what, "returns", returns_t, t); !ok) return ok.error();
  if (options.clip) {
    if (!(*options.clip > 0)) return fail("value_loss: clip must be > 0");
    if (auto ok = check_tokens(what, "old_values (needed by clip)", old_values_t, t); !ok) return ok.error();
  }
  const auto v_t = values_t.to(torch::kFloat32);
  const auto device = v_t.device();
  const auto r_t = returns_t.detach().to(device, torch::kFloat32);
  const auto mask_b_t = loss_mask_t.to(device) != 0;
  const auto err_t = zero_where_masked(v_t - r_t, mask_b_t);
  auto loss_t = 0.5 * err_t.square();
  torch::Tensor clipped_b_t = torch::zeros_like(mask_b_t);
  if (options.clip) {
    const auto old_t = old_values_t.detach().to(device, torch::kFloat32);
    const auto v_clipped_t = old_t + (v_t - old_t).clamp(-*options.clip, *options.clip);
    const auto loss_clipped_t = 0.5 * zero_where_masked(v_clipped_t - r_t, mask_b_t).square();
    clipped_b_t = mask_b_t & (loss_clipped_t.detach() > loss_t.detach());
    loss_t = torch::max(loss_t, loss_clipped_t);
  }
  auto loss = masked_aggregate(loss_t, mask_b_t, seq_offsets_n1, options.agg);
  if (!loss) return fail(std::string(what) + ": " + loss.error().message);
  value_loss_result out;
  out.loss = std::move(*loss);
  const auto tokens = mask_b_t.sum().to(torch::kFloat32);
  const auto host =
      to_host({tokens, clipped_b_t.sum() / tokens, zero_where_masked(v_t.detach(), mask_b_t).sum() / tokens,
               zero_where_masked(r_t, mask_b_t).sum() / tokens, err_t.detach().square().sum() / tokens});
  out.tokens = static_cast<int64_t>(host[0]);
  out.clip_fraction = host[1];
  out.value_mean = host[2];
  out.return_mean = host[3];
  out.mse = host[4];
  return out;
}

result<value_loss_result> value_pretrain_loss(const torch::Tensor& values_t, const torch::Tensor& rewards_n,
                                              const torch::Tensor& loss_mask_t, const torch::Tensor& seq_offsets_n1,
                                              const value_pretrain_options& options) {
  if (auto ok = check_batch("value_pretrain_loss", values_t, loss_mask_t, seq_offsets_n1); !ok) return ok.error();
  auto targets =
      gae_packed(values_t.detach(), rewards_n, loss_mask_t, seq_offsets_n1, gae_options{options.gamma, options.lambda});
  if (!targets) return fail("value_pretrain_loss: " + targets.error().message);
  return value_loss(values_t, torch::Tensor{}, targets->returns_t, loss_mask_t, seq_offsets_n1,
                    value_loss_options{std::nullopt, options.agg});
}

result<nll_result> rft_nll(const torch::Tensor& logp_t, const torch::Tensor& loss_mask_t,
                           const torch::Tensor& seq_offsets_n1, const aggregation& agg) {
  if (auto ok = check_batch("rft_nll", logp_t, loss_mask_t, seq_offsets_n1); !ok) return ok.error();
  const auto nll_t = -logp_t.to(torch::kFloat32);
  auto loss = masked_aggregate(nll_t, loss_mask_t, seq_offsets_n1, agg);
  if (!loss) return fail("rft_nll: " + loss.error().message);
  const auto mask_b_t = loss_mask_t.to(nll_t.device()) != 0;
  const auto host = to_host({mask_b_t.sum().to(torch::kFloat32), zero_where_masked(nll_t.detach(), mask_b_t).sum()});
  nll_result out;
  out.loss = std::move(*loss);
  out.tokens = static_cast<int64_t>(host[0]);
  out.nll_token_mean = host[1] / host[0];
  return out;
}

result<torch::Tensor> kl_to_reference(const torch::Tensor& logp_t, const torch::Tensor& ref_logp_t,
                                      const torch::Tensor& loss_mask_t, const torch::Tensor& seq_offsets_n1,
                                      kl_estimator estimator, const aggregation& agg) {
  constexpr const char* what = "kl_to_reference";
  if (auto ok = check_batch(what, logp_t, loss_mask_t, seq_offsets_n1); !ok) return ok.error();
  if (auto ok = check_tokens(what, "ref_logp", ref_logp_t, logp_t.numel()); !ok) return ok.error();
  const auto lp_t = logp_t.to(torch::kFloat32);
  const auto mask_b_t = loss_mask_t.to(lp_t.device()) != 0;
  // d = log pi_ref - log pi_theta on the sampled tokens (0 elsewhere, so exp stays finite).
  const auto d_t = zero_where_masked(ref_logp_t.detach().to(lp_t.device(), torch::kFloat32) - lp_t, mask_b_t);
  const auto kl_t = estimator == kl_estimator::k1 ? -d_t : torch::exp(d_t) - 1.0 - d_t;
  auto loss = masked_aggregate(kl_t, mask_b_t, seq_offsets_n1, agg);
  if (!loss) return fail(std::string(what) + ": " + loss.error().message);
  return std::move(*loss);
}

result<torch::Tensor> entropy_mean(const torch::Tensor& entropy_t, const torch::Tensor& loss_mask_t,
                                   const torch::Tensor& seq_offsets_n1, const aggregation& agg) {
  if (auto ok = check_batch("entropy_mean", entropy_t, loss_mask_t, seq_offsets_n1); !ok) return ok.error();
  auto loss = masked_aggregate(entropy_t, loss_mask_t, seq_offsets_n1, agg);
  if (!loss) return fail(std::string("entropy_mean: ") + loss.error().message);
  return std::move(*loss);
}

}  // namespace caf_agent::learner
