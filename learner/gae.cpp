// GAE over multi-turn trajectories (see gae.hpp).
//
// Shape legend: t tokens, n trajectories, n1 = n + 1 offsets.

#include "learner/gae.hpp"

#include <cmath>
#include <string>

#include <torch/torch.h>

#include "learner/aggregation.hpp"

namespace caf_agent::learner {

namespace {

// The backward recursion over the sampled tokens in [begin, end) of the host copies; writes A and
// R at the sampled positions. `who` names the trajectory in errors.
status gae_chain(const double* values, const bool* mask, double reward, int64_t begin, int64_t end,
                 const gae_options& options, double* adv, double* ret, const std::string& who) {
  if (!std::isfinite(reward)) return fail(who + ": the reward is not finite");
  double next_value = 0;      // V of the successor state: V_K = 0 after the last action
  double next_advantage = 0;  // A_{k+1}
  bool last = true;           // the first sampled token met going backwards carries the reward
  for (int64_t i = end - 1; i >= begin; --i) {
    if (!mask[i]) continue;  // prompt and tool-output tokens are not steps of the chain
    const double v = values[i];
    if (!std::isfinite(v)) return fail(who + ": the value at token " + std::to_string(i - begin) + " is not finite");
    const double r = last ? reward : 0.0;
    const double delta = r + options.gamma * next_value - v;
    const double a = delta + options.gamma * options.lambda * next_advantage;
    adv[i] = a;
    ret[i] = a + v;
    next_value = v;
    next_advantage = a;
    last = false;
  }
  if (last) return fail(who + ": no sampled token (its reward has no action to sit on)");
  return {};
}

status check_inputs(const char* what, const torch::Tensor& values_t, const torch::Tensor& loss_mask_t,
                    const gae_options& options) {
  if (!values_t.defined() || values_t.dim() != 1) return fail(std::string(what) + ": values must be 1-d [t]");
  if (!loss_mask_t.defined() || loss_mask_t.sizes() != values_t.sizes())
    return fail(std::string(what) + ": loss_mask must have the values' shape");
  if (!(options.gamma >= 0 && options.gamma <= 1)) return fail(std::string(what) + ": gamma must be in [0, 1]");
  if (!(options.lambda >= 0 && options.lambda <= 1)) return fail(std::string(what) + ": lambda must be in [0, 1]");
  return {};
}

}  // namespace

result<gae_result> gae(const torch::Tensor& values_t, double reward, const torch::Tensor& loss_mask_t,
                       const gae_options& options) {
  if (!values_t.defined()) return fail("gae: values must be 1-d [t]");
  return gae_packed(values_t, torch::tensor({reward}, torch::kFloat64), loss_mask_t,
                    single_sequence_offsets(values_t.numel()), options);
}

result<gae_result> gae_packed(const torch::Tensor& values_t, const torch::Tensor& rewards_n,
                              const torch::Tensor& loss_mask_t, const torch::Tensor& seq_offsets_n1,
                              const gae_options& options) {
  constexpr const char* what = "gae";
  if (auto ok = check_inputs(what, values_t, loss_mask_t, options); !ok) return ok.error();
  if (auto ok = check_offsets(seq_offsets_n1, values_t.numel(), what); !ok) return ok.error();
  const int64_t n = seq_offsets_n1.numel() - 1;
  if (!rewards_n.defined() || rewards_n.dim() != 1 || rewards_n.numel() != n)
    return fail("gae: rewards must be 1-d with one entry per trajectory (" + std::to_string(n) + ")");

  const auto v_t = values_t.detach().to(torch::kCPU, torch::kFloat64).contiguous();
  const auto m_t = (loss_mask_t.to(torch::kCPU) != 0).contiguous();
  const auto r_n = rewards_n.to(torch::kCPU, torch::kFloat64).contiguous();
  const auto o_n1 = seq_offsets_n1.to(torch::kCPU).contiguous();
  auto adv_t = torch::zeros_like(v_t);
  auto ret_t = torch::zeros_like(v_t);
  const auto* o = o_n1.data_ptr<int64_t>();
  for (int64_t s = 0; s < n; ++s) {
    const std::string who = n == 1 ? std::string("gae") : "gae: trajectory " + std::to_string(s);
    auto ok = gae_chain(v_t.data_ptr<double>(), m_t.data_ptr<bool>(), r_n.data_ptr<double>()[s], o[s], o[s + 1],
                        options, adv_t.data_ptr<double>(), ret_t.data_ptr<double>(), who);
    if (!ok) return ok.error();
  }
  const auto out_options = torch::TensorOptions().dtype(torch::kFloat32).device(values_t.device());
  return gae_result{adv_t.to(out_options), ret_t.to(out_options)};
}

}  // namespace caf_agent::learner
