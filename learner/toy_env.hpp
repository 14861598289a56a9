#pragma once
// toy_env: a tiny multi-turn environment in pure C++ for the learner's learning tests.
//
// An episode is [bos] then `turns` turns of [observation, action]: the environment shows an
// observation token (context, loss mask 0, like a tool output) and the policy samples one action
// token (loss mask 1). The action is correct when it is the observation's target token; the
// reward, on the last sampled token, is the fraction of correct turns (0 .. 1). A uniform policy
// over the vocabulary scores 1 / vocab on average.
//
// Token ids: 0 = bos, 1 .. observations = observations, then the observations' target tokens
// (a fixed permutation), so vocab_size() = 2 * observations + 1.

#include <cstdint>
#include <vector>

#include <torch/types.h>

#include "learner/trainer.hpp"
#include "policy/model/decoder.hpp"

namespace caf_agent::learner {

/// The environment's size.
struct toy_env_options {
  int64_t turns = 3;         ///< Turns per episode.
  int64_t observations = 4;  ///< Distinct observation tokens.
};

/// Episodes of the toy environment as packed batches.
class toy_env {
 public:
  /// An environment of `options`.
  explicit toy_env(toy_env_options options) : options_(options) {}
  /// Tokens the policy's vocabulary must have.
  int64_t vocab_size() const { return 2 * options_.observations + 1; }
  /// Tokens of one episode.
  int64_t episode_tokens() const { return 1 + 2 * options_.turns; }
  /// The correct action for observation token `obs`.
  int64_t target(int64_t obs) const;

  /// `episodes` episodes sampled from `policy` at `temperature` (observations and actions drawn
  /// with `gen`), with the sampler's log-probabilities and rewards.
  rollout_batch sample(const policy::decoder& policy, int64_t episodes, at::Generator& gen,
                       double temperature = 1.0) const;
  /// `episodes` episodes of a scripted policy that answers correctly exactly on the
  /// observations `known` (1-based ids) and with a wrong action otherwise: outcomes that a
  /// critic can predict from the context.
  rollout_batch scripted(int64_t episodes, const std::vector<int64_t>& known, at::Generator& gen) const;

 private:
  rollout_batch pack(const torch::Tensor& tokens_be, const torch::Tensor& logp_be) const;
  toy_env_options options_;
};

}  // namespace caf_agent::learner
