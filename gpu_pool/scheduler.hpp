#pragma once
/// gpu_pool/scheduler.hpp: which job runs on which slot, with bounded admission.
///
/// Pure policy, no actors: the pool manager actor feeds it submissions and slot
/// completions and asks it for the next assignment.
///   - one job per slot at a time (stable timings);
///   - final evaluations before intermediate ones, FIFO within each (an
///     episode has at most one outstanding job, so FIFO is fair across episodes);
///   - a bounded queue: a full queue is back-pressure, reported as a value;
///   - a slot with `quarantine_after` consecutive infrastructure failures is
///     quarantined and gets no more work.

#include <cstddef>
#include <cstdint>
#include <deque>
#include <optional>
#include <set>
#include <vector>

namespace caf_agent::gpu_pool {

/// Final evaluations decide rewards and end episodes, so they go first.
enum class job_kind : uint8_t { final_eval, intermediate };

/// A job waiting for a slot.
struct pending_job {
  uint64_t job_id = 0;
  uint64_t episode_id = 0;
  job_kind kind = job_kind::intermediate;
};

/// What `submit` did with a job.
enum class admit_result {
  queued,        ///< will run when a slot frees up
  queue_full,    ///< back-pressure: retry when credits return (not an error)
  episode_busy,  ///< the episode already has a job outstanding (a caller bug)
  no_slots,      ///< every slot is quarantined: infrastructure failure
};

/// A job assigned to a slot.
struct assignment {
  pending_job job;
  size_t slot = 0;
};

/// Slot and queue bookkeeping for one pool.
class slot_scheduler {
 public:
  /// `slots` slots, a queue of at most `queue_capacity` jobs.
  slot_scheduler(size_t slots, size_t queue_capacity, int quarantine_after);

  /// Queues a job if there is room and its episode has none outstanding.
  admit_result submit(const pending_job& job);

  /// Pops the next job for a free healthy slot, marking the slot busy.
  std::optional<assignment> next();

  /// A slot finished its job; `infra_failure` counts towards quarantine.
  /// Returns true when this call quarantined the slot.
  bool finish(size_t slot, bool infra_failure);

  /// Takes slot `slot` out for good (its executor is gone): quarantined, no longer busy, its
  /// episode free to submit again. Returns true when it was not quarantined before.
  bool remove(size_t slot);

  /// Removes a queued job of `episode_id` (the episode ended); true if one was queued.
  bool cancel(uint64_t episode_id);

  /// Free queue places: what rollout managers may still send.
  size_t credits() const { return capacity_ - queued(); }
  size_t queued() const { return finals_.size() + intermediates_.size(); }
  size_t busy() const;
  size_t healthy() const;
  size_t slots() const { return slots_.size(); }
  bool quarantined(size_t slot) const { return slots_.at(slot).quarantined; }

 private:
  struct slot_state {
    bool busy = false;
    bool quarantined = false;
    uint64_t episode_id = 0;
    int consecutive_failures = 0;
  };
  std::optional<size_t> free_slot() const;

  std::vector<slot_state> slots_;
  size_t capacity_;
  int quarantine_after_;
  std::deque<pending_job> finals_;
  std::deque<pending_job> intermediates_;
  std::set<uint64_t> outstanding_;  // episodes with a queued or running job
};

}  // namespace caf_agent::gpu_pool
