#pragma once
/// rollout/kv_admission.hpp: how many episodes a rollout node runs at once so that their
/// conversations fit its policy engine's KV cache.
///
/// An agent episode keeps its conversation's keys in the engine between turns (the prefix
/// cache), so the episodes in flight need about (episodes x context) tokens of KV storage. Past
/// the engine's capacity their kept prefixes evict each other and every turn prefills its whole
/// conversation again. The limit is the capacity divided by the expected context (prime-rl's
/// adaptive concurrency starts from the same ratio): the mean final context of the last
/// `window` episodes that ended, or, before any has, the initial estimate (the engine's context
/// limit: the cautious start). Never below 1, never above the configured maximum.

#include <cstddef>
#include <cstdint>
#include <deque>

namespace caf_agent::rollout {

class kv_admission {
 public:
  /// `capacity_tokens` 0: unknown (a remote policy); the limit is then the configured maximum.
  kv_admission(int64_t capacity_tokens = 0, int64_t initial_context_tokens = 0, size_t window = 32);

  /// An episode ended with a conversation of `context_tokens` (ignored when <= 0: records of
  /// text-level policies carry no tokens).
  void observe(int64_t context_tokens);
  /// The context an episode is expected to reach (tokens; 0 when nothing is known).
  int64_t expected_context() const;
  /// Episodes to run at once: capacity / expected context, within [1, max_concurrent].
  int limit(int max_concurrent) const;
  /// False when the capacity is unknown.
  bool active() const { return capacity_ > 0; }
  int64_t capacity_tokens() const { return capacity_; }

 private:
  int64_t capacity_ = 0;
  int64_t initial_ = 0;
  size_t window_ = 32;
  std::deque<int64_t> recent_;
  int64_t recent_sum_ = 0;
};

}  // namespace caf_agent::rollout
