// rollout/kv_admission.cpp: see kv_admission.hpp.
#include "rollout/kv_admission.hpp"

#include <algorithm>

namespace caf_agent::rollout {

kv_admission::kv_admission(int64_t capacity_tokens, int64_t initial_context_tokens, size_t window)
    : capacity_(std::max<int64_t>(0, capacity_tokens)),
      initial_(std::max<int64_t>(0, initial_context_tokens)),
      window_(std::max<size_t>(1, window)) {}

void kv_admission::observe(int64_t context_tokens) {
  if (context_tokens <= 0) return;
  recent_.push_back(context_tokens);
  recent_sum_ += context_tokens;
  if (recent_.size() > window_) {
    recent_sum_ -= recent_.front();
    recent_.pop_front();
  }
}

int64_t kv_admission::expected_context() const {
  if (recent_.empty()) return initial_;
  return (recent_sum_ + static_cast<int64_t>(recent_.size()) - 1) / static_cast<int64_t>(recent_.size());
}

int kv_admission::limit(int max_concurrent) const {
  const int most = std::max(1, max_concurrent);
  const int64_t expected = expected_context();
  if (capacity_ <= 0 || expected <= 0) return most;
  return static_cast<int>(std::clamp<int64_t>(capacity_ / expected, 1, most));
}

}  // namespace caf_agent::rollout
