#pragma once
/// gpu_pool/pool_policy.hpp: what the pool manager does with each job, as a value.
///
/// Pure policy, no actors, over `slot_scheduler`: the manager feeds it events (a request, a
/// build done, a job done, a slot lost) and carries out the `pool_step` each returns: build
/// orders, slot assignments, jobs to answer now. The manager keeps only what a reply needs
/// (the request and its response promise).
///   - build stage: a job with kernel sources waits for a free builder, FIFO;
///   - parking: a job that finds the queue full waits here (bounded by the episodes, each of
///     which has at most one evaluation outstanding) and enters the queue as credits return;
///   - retry: a job whose outcome says retry runs again at most `max_infra_retries` times,
///     ahead of every parked job;
///   - slot loss: a slot whose executor is gone is quarantined for good and its job retried
///     (as for a worker that died under it).

#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <vector>

#include "gpu_pool/scheduler.hpp"

namespace caf_agent::gpu_pool {

/// A job as the policy sees it.
struct pool_job {
  uint64_t job_id = 0;
  uint64_t episode_id = 0;
  job_kind kind = job_kind::intermediate;
  bool build_first = false;  ///< it has kernel sources and the pool has builders
};

/// Why a job ends now (the manager answers it, then forgets it).
enum class job_end {
  done,             ///< its slot's result stands
  build_failed,     ///< the sources did not build (the builder's log is the verdict)
  no_healthy_slot,  ///< every slot is quarantined
  episode_busy,     ///< its episode already has an evaluation outstanding
  slot_lost,        ///< its slot's executor died under it, and it was retried already
};

/// A job to answer.
struct ended_job {
  uint64_t job_id = 0;
  job_end how = job_end::done;
};

/// A job for builder `builder`.
struct build_order {
  size_t builder = 0;
  uint64_t job_id = 0;
};

/// What the manager does after an event, in this order: answer `ended`, send `runs`, then
/// `builds`. `retried` and `quarantined` are for its log.
struct pool_step {
  std::vector<ended_job> ended;
  std::vector<assignment> runs;
  std::vector<build_order> builds;
  std::vector<uint64_t> retried;
  std::vector<size_t> quarantined;
};

/// The pool's job bookkeeping and decisions.
class pool_policy {
 public:
  /// `slots` slots, a queue of `queue_capacity`, quarantine after `quarantine_after`
  /// consecutive infrastructure failures, `builders` build-stage workers (0: slots build).
  pool_policy(size_t slots, size_t queue_capacity, int quarantine_after, size_t builders = 0);

  /// Sets the number of builders (the manager learns its builders after it starts).
  void set_builders(size_t builders);

  /// True while `job_id` is in the pool (waiting to build, building, parked, queued, running).
  bool known(uint64_t job_id) const { return jobs_.contains(job_id); }

  /// A new job (not known()): to a builder first when it asks for one and there are builders,
  /// else into the queue, parked while it is full, or answered at once.
  pool_step submit(const pool_job& job);

  /// Builder `builder` is done with `job_id`: `ok` built, `infra` the builder failed (the slot
  /// then builds it), otherwise the sources did not build (the job ends).
  pool_step built(size_t builder, uint64_t job_id, bool ok, bool infra);

  /// Slot `slot` finished its job; `infra` counts towards quarantine, `retry` asks for
  /// another run (granted at most max_infra_retries times).
  pool_step finished(size_t slot, bool infra, bool retry);

  /// Slot `slot`'s executor is gone: quarantined for good; its job (if any) runs again when
  /// `retry` allows (at most max_infra_retries times), else ends `slot_lost`.
  pool_step slot_lost(size_t slot, bool retry);

  /// The job running on `slot`, if any.
  std::optional<uint64_t> running(size_t slot) const;

  const slot_scheduler& scheduler() const { return sched_; }
  /// Jobs waiting for a credit.
  size_t parked() const { return parked_.size(); }
  /// Jobs waiting for a builder or building.
  size_t building() const;
  size_t builders() const { return builder_busy_.size(); }
  /// Admission is open: credits left and nobody parked ahead of a newcomer.
  bool open() const { return sched_.credits() > 0 && parked_.empty(); }
  /// Times `job_id` was retried.
  int attempts(uint64_t job_id) const;

 private:
  struct job_state {
    pool_job job;
    int attempts = 0;
  };
  void admit(uint64_t job_id, pool_step& step);
  void retry_or_end(uint64_t job_id, job_end otherwise, bool retry, pool_step& step);
  void end(uint64_t job_id, job_end how, pool_step& step);
  void drain_parked(pool_step& step);
  void dispatch(pool_step& step);

  slot_scheduler sched_;
  std::map<uint64_t, job_state> jobs_;
  std::deque<uint64_t> parked_;    // queue full: waiting for a credit (bounded by episodes)
  std::deque<uint64_t> to_build_;  // waiting for a builder
  std::vector<bool> builder_busy_;
  std::vector<std::optional<uint64_t>> running_;  // per slot
};

}  // namespace caf_agent::gpu_pool
