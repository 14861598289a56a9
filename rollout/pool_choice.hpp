#pragma once
/// rollout/pool_choice.hpp: which GPU pool an evaluation goes to, without actors.
///
/// A rollout manager sees every live pool as one logical pool. Each pool reports its
/// credits (free queue places), queued jobs, busy and healthy slots; between reports
/// the manager counts what it sent there itself. The choice: a pool with an idle slot
/// (most idle slots first), else the shortest wait per healthy slot; a pool with free
/// credits before one without; the task's last pool (cached baselines) only breaks
/// ties; then fewer of this manager's jobs in flight; then fewer jobs sent there so far
/// (equal pools take turns, so every pool stays warm); then the lower index.

#include <cstdint>
#include <optional>
#include <vector>

namespace caf_agent::rollout {

/// One pool as a rollout manager sees it.
struct pool_view {
  int32_t healthy = 0;            ///< reported healthy slots
  int32_t busy = 0;               ///< reported busy slots
  int32_t queued = 0;             ///< reported queued jobs
  int32_t free_credits = 0;       ///< reported free queue places
  int32_t sent_since_report = 0;  ///< this manager's jobs sent after the last report
  int32_t in_flight = 0;          ///< this manager's jobs there now
  int64_t assigned = 0;           ///< this manager's jobs sent there so far
  bool reported = false;          ///< false until the first report: treated as one idle slot

  /// Idle slots left after the jobs on their way (negative: a wait).
  int32_t idle_estimate() const;
  /// True while the pool takes jobs into its queue (credits left after ours).
  bool admitting() const;
};

/// The index of the pool to use, or nothing when there is none with a healthy slot.
/// `affinity`: the pool that last served the same task (-1: none).
std::optional<size_t> choose_pool(const std::vector<pool_view>& pools, int affinity = -1);

/// True while at least one pool admits work (rollout admission stays open).
bool any_pool_admitting(const std::vector<pool_view>& pools);

}  // namespace caf_agent::rollout
