// gpu_pool/pool_policy.cpp: see pool_policy.hpp.
#include "gpu_pool/pool_policy.hpp"

#include <algorithm>

#include "gpu_pool/judgement.hpp"

namespace caf_agent::gpu_pool {

pool_policy::pool_policy(size_t slots, size_t queue_capacity, int quarantine_after, size_t builders)
    : sched_(slots, queue_capacity, quarantine_after), builder_busy_(builders, false), running_(slots) {}

void pool_policy::set_builders(size_t builders) {
  builder_busy_.resize(builders, false);
}

size_t pool_policy::building() const {
  return to_build_.size() + static_cast<size_t>(std::count(builder_busy_.begin(), builder_busy_.end(), true));
}

int pool_policy::attempts(uint64_t job_id) const {
  auto it = jobs_.find(job_id);
  return it == jobs_.end() ? 0 : it->second.attempts;
}

std::optional<uint64_t> pool_policy::running(size_t slot) const {
  return slot < running_.size() ? running_[slot] : std::nullopt;
}

pool_step pool_policy::submit(const pool_job& job) {
  pool_step step;
  jobs_[job.job_id] = {job, 0};
  if (job.build_first && !builder_busy_.empty())
    to_build_.push_back(job.job_id);
  else
    admit(job.job_id, step);
  dispatch(step);
  return step;
}

pool_step pool_policy::built(size_t builder, uint64_t job_id, bool ok, bool infra) {
  pool_step step;
  if (builder < builder_busy_.size()) builder_busy_[builder] = false;
  if (jobs_.contains(job_id)) {
    if (ok || infra)
      admit(job_id, step);  // a builder that failed itself: the job's slot builds it
    else
      end(job_id, job_end::build_failed, step);
  }
  dispatch(step);
  return step;
}

pool_step pool_policy::finished(size_t slot, bool infra, bool retry) {
  pool_step step;
  auto job = running(slot);
  if (sched_.finish(slot, infra)) step.quarantined.push_back(slot);
  if (slot < running_.size()) running_[slot].reset();
  if (job) retry_or_end(*job, job_end::done, retry, step);
  dispatch(step);
  return step;
}

pool_step pool_policy::slot_lost(size_t slot, bool retry) {
  pool_step step;
  auto job = running(slot);
  if (sched_.remove(slot)) step.quarantined.push_back(slot);
  if (slot < running_.size()) running_[slot].reset();
  if (job) retry_or_end(*job, job_end::slot_lost, retry, step);
  dispatch(step);
  return step;
}

void pool_policy::retry_or_end(uint64_t job_id, job_end otherwise, bool retry, pool_step& step) {
  auto& st = jobs_.at(job_id);
  // gpu_pool/judgement says whether a job runs again (retry) and how often (max_infra_retries).
  if (retry && st.attempts < max_infra_retries) {
    st.attempts += 1;
    step.retried.push_back(job_id);
    parked_.push_front(job_id);  // ahead of every parked job: it was admitted before them
    return;
  }
  end(job_id, otherwise, step);
}

void pool_policy::admit(uint64_t job_id, pool_step& step) {
  auto& j = jobs_.at(job_id).job;
  switch (sched_.submit({job_id, j.episode_id, j.kind})) {
    case admit_result::queued:
      break;
    case admit_result::queue_full:
      parked_.push_back(job_id);
      break;  // back-pressure: nobody polls
    case admit_result::no_slots:
      end(job_id, job_end::no_healthy_slot, step);
      break;
    case admit_result::episode_busy:
      end(job_id, job_end::episode_busy, step);
      break;
  }
}

void pool_policy::end(uint64_t job_id, job_end how, pool_step& step) {
  jobs_.erase(job_id);
  step.ended.push_back({job_id, how});
}

void pool_policy::drain_parked(pool_step& step) {
  while (!parked_.empty() && sched_.credits() > 0) {
    auto id = parked_.front();
    auto& j = jobs_.at(id).job;
    auto admitted = sched_.submit({id, j.episode_id, j.kind});
    if (admitted == admit_result::queue_full) break;
    parked_.pop_front();
    // E.g. a retried job whose last healthy slot was just quarantined: answered now, not
    // parked for good (which also kept the pool closed to every rollout manager).
    if (admitted == admit_result::no_slots) end(id, job_end::no_healthy_slot, step);
    if (admitted == admit_result::episode_busy) end(id, job_end::episode_busy, step);
  }
}

void pool_policy::dispatch(pool_step& step) {
  drain_parked(step);
  while (auto a = sched_.next()) {
    running_.at(a->slot) = a->job.job_id;
    step.runs.push_back(*a);
    drain_parked(step);  // the credit the assignment freed goes to a parked job now
  }
  for (size_t i = 0; i < builder_busy_.size() && !to_build_.empty(); ++i) {
    if (builder_busy_[i]) continue;
    builder_busy_[i] = true;
    step.builds.push_back({i, to_build_.front()});
    to_build_.pop_front();
  }
}

}  // namespace caf_agent::gpu_pool
