// Token-budget micro-batches balanced across shards (see packing.hpp).

#include "learner/packing.hpp"

#include <algorithm>
#include <numeric>
#include <string>

namespace caf_agent::learner {

namespace {

// First-fit decreasing of `items` (indices into lengths) into bins of `capacity` tokens.
std::vector<micro_batch> first_fit_decreasing(std::vector<int64_t> items, const std::vector<int64_t>& lengths,
                                              int64_t capacity) {
  std::stable_sort(items.begin(), items.end(), [&](int64_t a, int64_t b) { return lengths[a] > lengths[b]; });
  std::vector<micro_batch> bins;
  for (const int64_t i : items) {
    auto fits =
        std::find_if(bins.begin(), bins.end(), [&](const micro_batch& b) { return b.tokens + lengths[i] <= capacity; });
    if (fits == bins.end()) fits = bins.insert(bins.end(), micro_batch{});
    fits->sequences.push_back(i);
    fits->tokens += lengths[i];
  }
  return bins;
}

// Splits the largest micro-batch holding two or more trajectories into two; false when none can.
bool split_one(std::vector<micro_batch>& bins, const std::vector<int64_t>& lengths) {
  auto best = bins.end();
  for (auto it = bins.begin(); it != bins.end(); ++it) {
    if (it->sequences.size() >= 2 && (best == bins.end() || it->tokens > best->tokens)) best = it;
  }
  if (best == bins.end()) return false;
  // Rationale: half the tokens (rounded up) as the capacity makes FFD give two or more parts; a
  // third part (possible with very uneven lengths) is folded into the smaller of the first two,
  // which stays within the original budget because all parts together fit in it.
  auto parts = first_fit_decreasing(best->sequences, lengths, (best->tokens + 1) / 2);
  if (parts.size() == 1) return false;
  while (parts.size() > 2) {
    auto& into = parts[0].tokens <= parts[1].tokens ? parts[0] : parts[1];
    into.sequences.insert(into.sequences.end(), parts.back().sequences.begin(), parts.back().sequences.end());
    into.tokens += parts.back().tokens;
    parts.pop_back();
  }
  *best = std::move(parts[0]);
  bins.push_back(std::move(parts[1]));
  return true;
}

}  // namespace

result<packing_plan> pack_microbatches(const std::vector<int64_t>& lengths, const packing_options& options) {
  if (options.max_tokens_per_microbatch <= 0) return fail("pack_microbatches: max_tokens_per_microbatch must be > 0");
  if (options.shards < 1) return fail("pack_microbatches: shards must be >= 1");
  for (size_t i = 0; i < lengths.size(); ++i) {
    if (lengths[i] <= 0)
      return fail("pack_microbatches: trajectory " + std::to_string(i) + " has length " + std::to_string(lengths[i]) +
                  " (must be > 0)");
    if (lengths[i] > options.max_tokens_per_microbatch)
      return fail("pack_microbatches: trajectory " + std::to_string(i) + " has " + std::to_string(lengths[i]) +
                  " tokens, more than max_tokens_per_microbatch = " +
                  std::to_string(options.max_tokens_per_microbatch) + "; drop or truncate it, or raise the budget");
  }
  std::vector<int64_t> items(lengths.size());
  std::iota(items.begin(), items.end(), int64_t{0});
  auto bins = first_fit_decreasing(std::move(items), lengths, options.max_tokens_per_microbatch);

  packing_plan plan;
  const auto shards = static_cast<size_t>(options.shards);
  while (bins.size() % shards != 0 && split_one(bins, lengths)) ++plan.split_microbatches;
  while (bins.size() % shards != 0) {
    bins.push_back(micro_batch{});
    ++plan.empty_microbatches;
  }
  plan.microbatches_per_shard = static_cast<int64_t>(bins.size() / shards);

  // Deal the largest first to the lightest shard that still has room in its count.
  std::stable_sort(bins.begin(), bins.end(),
                   [](const micro_batch& a, const micro_batch& b) { return a.tokens > b.tokens; });
  plan.shards.assign(shards, {});
  std::vector<int64_t> shard_tokens(shards, 0);
  for (auto& bin : bins) {
    size_t pick = shards;
    for (size_t s = 0; s < shards; ++s) {
      if (static_cast<int64_t>(plan.shards[s].size()) >= plan.microbatches_per_shard) continue;
      if (pick == shards || shard_tokens[s] < shard_tokens[pick]) pick = s;
    }
    shard_tokens[pick] += bin.tokens;
    plan.shards[pick].push_back(std::move(bin));
  }
  return plan;
}

}  // namespace caf_agent::learner
