// The per-shard plan of an iteration's optimizer steps (see batch_plan.hpp).

#include "learner/batch_plan.hpp"

#include <algorithm>
#include <map>
#include <numeric>

namespace caf_agent::learner {

result<packing_plan> plan_microbatches(const std::vector<int64_t>& lengths, int64_t max_tokens_per_microbatch,
                                       int64_t shards) {
  if (max_tokens_per_microbatch < 0) return fail("plan_microbatches: max_tokens_per_microbatch must be >= 0");
  if (shards < 1) return fail("plan_microbatches: shards must be >= 1");
  int64_t longest = 0, total = 0;
  for (const int64_t len : lengths) {
    longest = std::max(longest, len);
    total += len;
  }
  if (max_tokens_per_microbatch == 0 && shards == 1) {
    packing_plan plan;
    plan.shards.assign(1, {});
    plan.microbatches_per_shard = lengths.empty() ? 0 : 1;
    if (!lengths.empty()) {
      micro_batch all;
      all.sequences.resize(lengths.size());
      std::iota(all.sequences.begin(), all.sequences.end(), int64_t{0});
      all.tokens = total;
      plan.shards[0].push_back(std::move(all));
    }
    return plan;
  }
  // Rationale: without a budget, a shard's share of the batch is one micro-batch: about
  // 1 / shards of the tokens, never less than the longest trajectory.
  const int64_t budget = max_tokens_per_microbatch > 0 ? max_tokens_per_microbatch
                                                       : std::max<int64_t>({longest, (total + shards - 1) / shards, 1});
  return pack_microbatches(lengths, {budget, shards});
}

result<std::vector<shard_slice>> plan_batch(const std::vector<int64_t>& lengths,
                                            const std::vector<int64_t>& sampled_tokens,
                                            const std::vector<double>& rewards, const batch_plan_options& options) {
  if (sampled_tokens.size() != lengths.size() || rewards.size() != lengths.size())
    return fail("plan_batch: " + std::to_string(lengths.size()) + " lengths, " + std::to_string(sampled_tokens.size()) +
                " sampled-token counts and " + std::to_string(rewards.size()) + " rewards (one each per trajectory)");
  if (options.steps < 1) return fail("plan_batch: steps must be >= 1");
  if (options.shards < 1) return fail("plan_batch: shards must be >= 1");
  if (options.max_tokens_per_microbatch < 0) return fail("plan_batch: max_tokens_per_microbatch must be >= 0");
  if (options.sequences_per_step < 0 || options.sequence_cursor < 0)
    return fail("plan_batch: sequences_per_step and sequence_cursor must be >= 0");
  const auto n = static_cast<int64_t>(lengths.size());
  const int64_t per_step = options.sequences_per_step > 0 ? std::min(options.sequences_per_step, n) : n;
  const auto shards = static_cast<size_t>(options.shards);
  // Micro-batches in the batch's (global) indices first; mapped to each shard's own below.
  std::vector<std::vector<step_plan>> global(shards, std::vector<step_plan>(static_cast<size_t>(options.steps)));
  for (int64_t i = 0; i < options.steps; ++i) {
    std::vector<int64_t> pick;
    if (per_step >= n) {
      pick.resize(static_cast<size_t>(n));
      std::iota(pick.begin(), pick.end(), int64_t{0});
    } else {
      for (int64_t k = 0; k < per_step; ++k) pick.push_back((options.sequence_cursor + i * per_step + k) % n);
    }
    step_plan totals;
    std::vector<int64_t> picked_lengths;
    for (const int64_t g : pick) {
      picked_lengths.push_back(lengths[g]);
      ++totals.sequences;
      totals.tokens += lengths[g];
      totals.sampled_tokens += sampled_tokens[g];
      totals.reward_sum += rewards[g];
    }
    auto plan = plan_microbatches(picked_lengths, options.max_tokens_per_microbatch, options.shards);
    if (!plan) totals.skip_reason = plan.error().message;
    for (size_t s = 0; s < shards; ++s) {
      auto& mine = global[s][static_cast<size_t>(i)];
      mine = totals;
      if (!plan) continue;
      for (const auto& mb : plan.value().shards[s]) {
        if (mb.sequences.empty()) continue;  // an empty micro-batch runs no forward
        std::vector<int64_t> seqs;
        for (const int64_t j : mb.sequences) seqs.push_back(pick[static_cast<size_t>(j)]);
        mine.microbatches.push_back(std::move(seqs));
      }
    }
  }
  std::vector<shard_slice> out(shards);
  for (size_t s = 0; s < shards; ++s) {
    std::map<int64_t, int64_t> local;  // global index -> the shard's index
    for (const auto& step : global[s])
      for (const auto& mb : step.microbatches)
        for (const int64_t g : mb) local.emplace(g, 0);
    for (auto& [g, l] : local) {
      l = static_cast<int64_t>(out[s].sequences.size());
      out[s].sequences.push_back(g);
    }
    for (auto& step : global[s]) {
      for (auto& mb : step.microbatches)
        for (int64_t& g : mb) g = local.at(g);
      out[s].steps.push_back(std::move(step));
    }
  }
  return out;
}

}  // namespace caf_agent::learner
