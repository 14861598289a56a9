// gpu_pool/scheduler.cpp: see scheduler.hpp.
#include "gpu_pool/scheduler.hpp"

#include <algorithm>

namespace caf_agent::gpu_pool {

slot_scheduler::slot_scheduler(size_t slots, size_t queue_capacity, int quarantine_after)
    : slots_(slots), capacity_(queue_capacity), quarantine_after_(quarantine_after) {}

admit_result slot_scheduler::submit(const pending_job& job) {
  if (healthy() == 0) return admit_result::no_slots;
  if (outstanding_.contains(job.episode_id)) return admit_result::episode_busy;
  if (queued() >= capacity_) return admit_result::queue_full;
  (job.kind == job_kind::final_eval ? finals_ : intermediates_).push_back(job);
  outstanding_.insert(job.episode_id);
  return admit_result::queued;
}

std::optional<size_t> slot_scheduler::free_slot() const {
  for (size_t i = 0; i < slots_.size(); ++i)
    if (!slots_[i].busy && !slots_[i].quarantined) return i;
  return std::nullopt;
}

std::optional<assignment> slot_scheduler::next() {
  auto slot = free_slot();
  if (!slot) return std::nullopt;
  auto& queue = !finals_.empty() ? finals_ : intermediates_;
  if (queue.empty()) return std::nullopt;
  assignment a{queue.front(), *slot};
  queue.pop_front();
  slots_[*slot].busy = true;
  slots_[*slot].episode_id = a.job.episode_id;
  return a;
}

bool slot_scheduler::finish(size_t slot, bool infra_failure) {
  auto& s = slots_.at(slot);
  if (!s.busy) return false;
  s.busy = false;
  outstanding_.erase(s.episode_id);
  s.consecutive_failures = infra_failure ? s.consecutive_failures + 1 : 0;
  if (!s.quarantined && s.consecutive_failures >= quarantine_after_) {
    s.quarantined = true;
    return true;
  }
  return false;
}

bool slot_scheduler::remove(size_t slot) {
  auto& s = slots_.at(slot);
  if (s.busy) outstanding_.erase(s.episode_id);
  s.busy = false;
  bool was = s.quarantined;
  s.quarantined = true;
  return !was;
}

bool slot_scheduler::cancel(uint64_t episode_id) {
  for (auto* q : {&finals_, &intermediates_}) {
    auto it = std::find_if(q->begin(), q->end(), [&](const pending_job& j) { return j.episode_id == episode_id; });
    if (it != q->end()) {
      q->erase(it);
      outstanding_.erase(episode_id);
      return true;
    }
  }
  return false;
}

size_t slot_scheduler::busy() const {
  return std::count_if(slots_.begin(), slots_.end(), [](auto& s) { return s.busy; });
}

size_t slot_scheduler::healthy() const {
  return std::count_if(slots_.begin(), slots_.end(), [](auto& s) { return !s.quarantined; });
}

}  // namespace caf_agent::gpu_pool
