// rollout/pool_choice.cpp: see pool_choice.hpp.
#include "rollout/pool_choice.hpp"

#include <tuple>

namespace caf_agent::rollout {

int32_t pool_view::idle_estimate() const {
  if (!reported) return 1 - sent_since_report;
  return healthy - busy - queued - sent_since_report;
}

bool pool_view::admitting() const {
  if (!reported) return true;
  return healthy > 0 && free_credits - sent_since_report > 0;
}

std::optional<size_t> choose_pool(const std::vector<pool_view>& pools, int affinity) {
  std::optional<size_t> best;
  // Ordering key, smaller is better: (no idle slot, not admitting, -idle or wait per
  // slot, not the affine pool, in flight, sent so far). Wait per slot in thousandths,
  // to compare pools of different sizes without floating point.
  using key = std::tuple<bool, bool, int64_t, bool, int32_t, int64_t>;
  key best_key{};
  for (size_t i = 0; i < pools.size(); ++i) {
    auto& p = pools[i];
    if (p.reported && p.healthy <= 0) continue;  // every slot quarantined
    auto idle = p.idle_estimate();
    int64_t slots = p.reported ? p.healthy : 1;
    int64_t measure = idle > 0 ? -int64_t{idle} : (int64_t{-idle} * 1000 + slots - 1) / slots;
    key k{idle <= 0, !p.admitting(), measure, static_cast<int>(i) != affinity, p.in_flight, p.assigned};
    if (!best || k < best_key) {
      best = i;
      best_key = k;
    }
  }
  return best;
}

bool any_pool_admitting(const std::vector<pool_view>& pools) {
  for (auto& p : pools)
    if (p.admitting()) return true;
  return false;
}

}  // namespace caf_agent::rollout
