// rollout/shard_batches.cpp: see shard_batches.hpp.
#include "rollout/shard_batches.hpp"

#include <string>

namespace caf_agent::rollout {

using learner::fail;

learner::result<std::vector<messages::train_batch>> shard_batches(const messages::train_batch& whole,
                                                                  const slice_options& options) {
  const size_t n = whole.seq_offsets.empty() ? 0 : whole.seq_offsets.size() - 1;
  if (whole.loss_mask.size() != whole.tokens.size() || whole.sampler_logp.size() != whole.tokens.size())
    return fail("train batch: " + std::to_string(whole.tokens.size()) + " tokens, " +
                std::to_string(whole.loss_mask.size()) + " loss-mask entries and " +
                std::to_string(whole.sampler_logp.size()) + " sampler log-probabilities (one each per token)");
  if (whole.rewards.size() != n || whole.episode_ids.size() != n)
    return fail("train batch: " + std::to_string(n) + " trajectories, " + std::to_string(whole.rewards.size()) +
                " rewards and " + std::to_string(whole.episode_ids.size()) + " episode ids");
  std::vector<int64_t> lengths, sampled;
  std::vector<double> rewards(whole.rewards.begin(), whole.rewards.end());
  for (size_t i = 0; i < n; ++i) {
    const int64_t from = whole.seq_offsets[i], to = whole.seq_offsets[i + 1];
    if (from < 0 || to < from || to > static_cast<int64_t>(whole.tokens.size()))
      return fail("train batch: offsets " + std::to_string(from) + ".." + std::to_string(to) + " of trajectory " +
                  std::to_string(i) + " are outside its " + std::to_string(whole.tokens.size()) + " tokens");
    lengths.push_back(to - from);
    int64_t s = 0;
    for (int64_t t = from; t < to; ++t) s += whole.loss_mask[static_cast<size_t>(t)] != 0 ? 1 : 0;
    sampled.push_back(s);
  }
  learner::batch_plan_options plan;
  plan.steps = whole.actor_lrs.empty() ? 1 : static_cast<int64_t>(whole.actor_lrs.size());
  plan.sequences_per_step = options.sequences_per_step;
  plan.sequence_cursor = options.sequence_cursor;
  plan.max_tokens_per_microbatch = options.max_tokens_per_microbatch;
  plan.shards = options.shards;
  auto slices = learner::plan_batch(lengths, sampled, rewards, plan);
  if (!slices) return slices.error();
  std::vector<messages::train_batch> out;
  for (size_t rank = 0; rank < slices.value().size(); ++rank) {
    const auto& slice = slices.value()[rank];
    messages::train_batch b;
    b.batch_id = whole.batch_id;
    b.attempt = whole.attempt;
    b.stage = whole.stage;
    b.base_version = whole.base_version;
    b.base_checkpoint = whole.base_checkpoint;
    b.new_version = whole.new_version;
    b.generation = whole.generation;
    b.stage_in_process = whole.stage_in_process;
    b.actor_lrs = whole.actor_lrs;
    b.temperature = whole.temperature;
    b.rank = static_cast<int32_t>(rank);
    b.shards = options.shards;
    b.max_tokens_per_microbatch = options.max_tokens_per_microbatch;
    b.seq_offsets.push_back(0);
    for (const int64_t g : slice.sequences) {
      const auto from = whole.seq_offsets[static_cast<size_t>(g)], to = whole.seq_offsets[static_cast<size_t>(g) + 1];
      b.episode_ids.push_back(whole.episode_ids[static_cast<size_t>(g)]);
      b.tokens.insert(b.tokens.end(), whole.tokens.begin() + from, whole.tokens.begin() + to);
      b.loss_mask.insert(b.loss_mask.end(), whole.loss_mask.begin() + from, whole.loss_mask.begin() + to);
      b.sampler_logp.insert(b.sampler_logp.end(), whole.sampler_logp.begin() + from, whole.sampler_logp.begin() + to);
      b.rewards.push_back(whole.rewards[static_cast<size_t>(g)]);
      b.seq_offsets.push_back(static_cast<int64_t>(b.tokens.size()));
    }
    for (const auto& step : slice.steps) {
      b.step_microbatches.push_back(static_cast<int32_t>(step.microbatches.size()));
      for (const auto& mb : step.microbatches) {
        b.microbatch_sizes.push_back(static_cast<int32_t>(mb.size()));
        for (const int64_t l : mb) b.plan_sequences.push_back(static_cast<int32_t>(l));
      }
      b.step_sequences.push_back(step.sequences);
      b.step_tokens.push_back(step.tokens);
      b.step_sampled_tokens.push_back(step.sampled_tokens);
      b.step_reward_sums.push_back(step.reward_sum);
      b.step_skip_reasons.push_back(step.skip_reason);
    }
    out.push_back(std::move(b));
  }
  return out;
}

learner::result<std::vector<learner::step_plan>> plan_of(const messages::train_batch& b) {
  const size_t steps = b.step_microbatches.size();
  if (b.step_sequences.size() != steps || b.step_tokens.size() != steps || b.step_sampled_tokens.size() != steps ||
      b.step_reward_sums.size() != steps || b.step_skip_reasons.size() != steps)
    return fail("train batch plan: " + std::to_string(steps) + " steps of micro-batches but totals for " +
                std::to_string(b.step_sequences.size()) + ", " + std::to_string(b.step_tokens.size()) + ", " +
                std::to_string(b.step_sampled_tokens.size()) + ", " + std::to_string(b.step_reward_sums.size()) +
                " and " + std::to_string(b.step_skip_reasons.size()));
  const int64_t n = b.seq_offsets.empty() ? 0 : static_cast<int64_t>(b.seq_offsets.size()) - 1;
  std::vector<learner::step_plan> out(steps);
  size_t mb = 0, next = 0;
  for (size_t i = 0; i < steps; ++i) {
    auto& p = out[i];
    p.sequences = b.step_sequences[i];
    p.tokens = b.step_tokens[i];
    p.sampled_tokens = b.step_sampled_tokens[i];
    p.reward_sum = b.step_reward_sums[i];
    p.skip_reason = b.step_skip_reasons[i];
    if (b.step_microbatches[i] < 0)
      return fail("train batch plan: step " + std::to_string(i) + " has a negative count");
    for (int32_t k = 0; k < b.step_microbatches[i]; ++k, ++mb) {
      if (mb >= b.microbatch_sizes.size())
        return fail("train batch plan: the steps count more micro-batches than the " +
                    std::to_string(b.microbatch_sizes.size()) + " sized");
      const auto size = b.microbatch_sizes[mb];
      if (size < 1 || next + static_cast<size_t>(size) > b.plan_sequences.size())
        return fail("train batch plan: micro-batch " + std::to_string(mb) + " of " + std::to_string(size) +
                    " trajectories runs past the " + std::to_string(b.plan_sequences.size()) + " planned");
      std::vector<int64_t> seqs;
      for (int32_t j = 0; j < size; ++j, ++next) {
        const int64_t l = b.plan_sequences[next];
        if (l < 0 || l >= n)
          return fail("train batch plan: micro-batch " + std::to_string(mb) + " names trajectory " + std::to_string(l) +
                      " of the message's " + std::to_string(n));
        seqs.push_back(l);
      }
      p.microbatches.push_back(std::move(seqs));
    }
  }
  if (mb != b.microbatch_sizes.size() || next != b.plan_sequences.size())
    return fail("train batch plan: " + std::to_string(b.microbatch_sizes.size() - mb) + " micro-batches and " +
                std::to_string(b.plan_sequences.size() - next) + " indices left over");
  return out;
}

}  // namespace caf_agent::rollout
