// Shape legend: b episodes, e tokens per episode, v vocabulary.
#include "learner/toy_env.hpp"

#include <ATen/ATen.h>

#include <algorithm>

namespace caf_agent::learner {

int64_t toy_env::target(int64_t obs) const {
  return options_.observations + 1 + (obs % options_.observations);
}

rollout_batch toy_env::pack(const torch::Tensor& tokens_be, const torch::Tensor& logp_be) const {
  const int64_t b = tokens_be.size(0), e = tokens_be.size(1);
  auto action_e = torch::zeros({e}, torch::kFloat32);
  for (int64_t t = 0; t < options_.turns; ++t) action_e[2 + 2 * t] = 1.0f;
  auto tokens = tokens_be.to(torch::kCPU).contiguous();
  const int64_t* p = tokens.data_ptr<int64_t>();
  std::vector<float> rewards(static_cast<size_t>(b));
  for (int64_t i = 0; i < b; ++i) {
    int64_t correct = 0;
    for (int64_t t = 0; t < options_.turns; ++t) correct += p[i * e + 2 + 2 * t] == target(p[i * e + 1 + 2 * t]);
    rewards[static_cast<size_t>(i)] = static_cast<float>(correct) / static_cast<float>(options_.turns);
  }
  rollout_batch out;
  out.tokens_t = tokens.reshape({-1});
  out.seq_offsets_n1 = torch::arange(0, b * e + 1, e, torch::kInt64);
  out.loss_mask_t = action_e.repeat({b});
  if (logp_be.defined()) out.sampler_logp_t = (logp_be.to(torch::kCPU) * action_e).reshape({-1});
  out.rewards_n = torch::tensor(rewards);
  return out;
}

rollout_batch toy_env::sample(const policy::decoder& policy, int64_t episodes, at::Generator& gen,
                              double temperature) const {
  torch::NoGradGuard no_grad;
  const int64_t e = episode_tokens();
  auto tokens_be = torch::zeros({episodes, e}, torch::kInt64);
  auto logp_be = torch::zeros({episodes, e}, torch::kFloat32);
  for (int64_t t = 0; t < options_.turns; ++t) {
    tokens_be.select(1, 1 + 2 * t).copy_(at::randint(1, options_.observations + 1, {episodes}, gen, torch::kInt64));
    auto prefix_bl = tokens_be.narrow(1, 0, 2 + 2 * t).to(policy.device());
    auto logits_bv = policy.forward(prefix_bl).select(1, 1 + 2 * t) / temperature;
    auto logp_bv = torch::log_softmax(logits_bv, -1).to(torch::kCPU);
    auto action_b1 = at::multinomial(logp_bv.exp(), 1, false, gen);
    tokens_be.select(1, 2 + 2 * t).copy_(action_b1.squeeze(1));
    logp_be.select(1, 2 + 2 * t).copy_(logp_bv.gather(1, action_b1).squeeze(1));
  }
  return pack(tokens_be, logp_be);
}

rollout_batch toy_env::scripted(int64_t episodes, const std::vector<int64_t>& known, at::Generator& gen) const {
  const int64_t e = episode_tokens();
  auto tokens_be = torch::zeros({episodes, e}, torch::kInt64);
  auto obs_bt = at::randint(1, options_.observations + 1, {episodes, options_.turns}, gen, torch::kInt64);
  auto obs = obs_bt.contiguous();
  for (int64_t i = 0; i < episodes; ++i) {
    for (int64_t t = 0; t < options_.turns; ++t) {
      const int64_t o = obs.data_ptr<int64_t>()[i * options_.turns + t];
      const bool right = std::find(known.begin(), known.end(), o) != known.end();
      // A wrong answer: the next observation's target (targets are a permutation, so it differs).
      tokens_be[i][1 + 2 * t] = o;
      tokens_be[i][2 + 2 * t] = right ? target(o) : target(o % options_.observations + 1);
    }
  }
  return pack(tokens_be, {});
}

}  // namespace caf_agent::learner
