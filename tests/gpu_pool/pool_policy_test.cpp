// tests/gpu_pool/pool_policy_test.cpp: the pool manager's decisions without actors: the build
// stage (FIFO over free builders), parking while the queue is full, retries (ahead of parked
// jobs, at most max_infra_retries), quarantine, a lost slot.
#include <gtest/gtest.h>

#include "gpu_pool/judgement.hpp"
#include "gpu_pool/pool_policy.hpp"

using namespace caf_agent::gpu_pool;

namespace {

pool_job job(uint64_t id, job_kind k = job_kind::intermediate, bool build = false) {
  return {id, id, k, build};  // one job per episode
}

std::vector<uint64_t> run_ids(const pool_step& s) {
  std::vector<uint64_t> out;
  for (auto& a : s.runs) out.push_back(a.job.job_id);
  return out;
}

std::vector<uint64_t> ended_ids(const pool_step& s, job_end how) {
  std::vector<uint64_t> out;
  for (auto& e : s.ended)
    if (e.how == how) out.push_back(e.job_id);
  return out;
}

}  // namespace

TEST(pool_policy, free_slots_take_jobs_at_once_and_finals_go_first) {
  pool_policy p{1, 8, 3};
  EXPECT_EQ(run_ids(p.submit(job(1))), std::vector<uint64_t>{1});
  EXPECT_TRUE(run_ids(p.submit(job(2))).empty());
  EXPECT_TRUE(run_ids(p.submit(job(3, job_kind::final_eval))).empty());
  auto s = p.finished(0, false, false);
  EXPECT_EQ(ended_ids(s, job_end::done), std::vector<uint64_t>{1});
  EXPECT_EQ(run_ids(s), std::vector<uint64_t>{3});
  EXPECT_FALSE(p.known(1));
  EXPECT_EQ(p.running(0), std::optional<uint64_t>{3});
}

TEST(pool_policy, a_full_queue_parks_jobs_in_order_and_closes_admission) {
  pool_policy p{1, 1, 3};
  p.submit(job(1));  // running
  p.submit(job(2));  // queued: the queue is full
  EXPECT_TRUE(p.open() == false);
  auto s3 = p.submit(job(3));
  auto s4 = p.submit(job(4));
  EXPECT_TRUE(s3.ended.empty() && s3.runs.empty() && s4.ended.empty());
  EXPECT_EQ(p.parked(), 2u);
  EXPECT_TRUE(p.known(3) && p.known(4));
  std::vector<uint64_t> order;
  for (int i = 0; i < 4; ++i) {
    auto s = p.finished(0, false, false);
    for (auto id : ended_ids(s, job_end::done)) order.push_back(id);
  }
  EXPECT_EQ(order, (std::vector<uint64_t>{1, 2, 3, 4}));
  EXPECT_EQ(p.parked(), 0u);
  EXPECT_TRUE(p.open());
}

TEST(pool_policy, a_retry_runs_once_more_ahead_of_parked_jobs_then_ends) {
  pool_policy p{1, 1, 10};
  p.submit(job(1));
  p.submit(job(2));                    // queued
  p.submit(job(3));                    // parked
  auto s = p.finished(0, true, true);  // job 1: the worker died under it
  EXPECT_EQ(s.retried, std::vector<uint64_t>{1});
  EXPECT_TRUE(s.ended.empty());
  EXPECT_EQ(run_ids(s), std::vector<uint64_t>{2});
  EXPECT_EQ(p.attempts(1), 1);
  s = p.finished(0, false, false);  // job 2 done; job 1 (parked first) enters the queue before 3
  EXPECT_EQ(ended_ids(s, job_end::done), std::vector<uint64_t>{2});
  EXPECT_EQ(run_ids(s), std::vector<uint64_t>{1});
  s = p.finished(0, true, true);  // job 1 fails again: retried max_infra_retries times already
  ASSERT_EQ(max_infra_retries, 1);
  EXPECT_TRUE(s.retried.empty());
  EXPECT_EQ(ended_ids(s, job_end::done), std::vector<uint64_t>{1});
  EXPECT_EQ(run_ids(s), std::vector<uint64_t>{3});
}

TEST(pool_policy, a_retry_with_no_healthy_slot_left_is_answered_at_once) {
  pool_policy p{1, 4, 1};
  p.submit(job(1));
  auto s = p.finished(0, true, true);  // quarantines the only slot
  EXPECT_EQ(s.quarantined, std::vector<size_t>{0});
  EXPECT_EQ(s.retried, std::vector<uint64_t>{1});
  EXPECT_EQ(ended_ids(s, job_end::no_healthy_slot), std::vector<uint64_t>{1});
  EXPECT_EQ(p.parked(), 0u);
  EXPECT_FALSE(p.known(1));
  EXPECT_EQ(ended_ids(p.submit(job(2)), job_end::no_healthy_slot), std::vector<uint64_t>{2});
}

TEST(pool_policy, a_second_job_of_an_episode_is_refused) {
  pool_policy p{2, 4, 3};
  p.submit({1, 9, job_kind::intermediate, false});
  auto s = p.submit({2, 9, job_kind::intermediate, false});
  EXPECT_EQ(ended_ids(s, job_end::episode_busy), std::vector<uint64_t>{2});
  EXPECT_TRUE(p.known(1));
}

TEST(pool_policy, builders_take_jobs_fifo_and_a_failed_build_ends_the_job) {
  pool_policy p{2, 8, 3, 1};
  auto s1 = p.submit(job(1, job_kind::intermediate, true));
  ASSERT_EQ(s1.builds.size(), 1u);
  EXPECT_EQ(s1.builds[0].job_id, 1u);
  EXPECT_TRUE(s1.runs.empty());
  auto s2 = p.submit(job(2, job_kind::intermediate, true));
  EXPECT_TRUE(s2.builds.empty());  // the one builder is busy
  auto s3 = p.submit(job(3));      // no sources: straight to a slot
  EXPECT_EQ(run_ids(s3), std::vector<uint64_t>{3});
  EXPECT_EQ(p.building(), 2u);
  auto b1 = p.built(0, 1, true, false);
  EXPECT_EQ(run_ids(b1), std::vector<uint64_t>{1});
  ASSERT_EQ(b1.builds.size(), 1u);
  EXPECT_EQ(b1.builds[0].job_id, 2u);
  auto b2 = p.built(0, 2, false, false);  // compile error: a verdict on the sources
  EXPECT_EQ(ended_ids(b2, job_end::build_failed), std::vector<uint64_t>{2});
  EXPECT_EQ(p.building(), 0u);
  EXPECT_FALSE(p.known(2));
}

TEST(pool_policy, a_builder_that_fails_itself_passes_the_job_to_its_slot) {
  pool_policy p{1, 8, 3, 1};
  p.submit(job(1, job_kind::intermediate, true));
  auto s = p.built(0, 1, false, true);
  EXPECT_TRUE(s.ended.empty());
  EXPECT_EQ(run_ids(s), std::vector<uint64_t>{1});
}

TEST(pool_policy, without_builders_a_job_with_sources_goes_to_a_slot) {
  pool_policy p{1, 8, 3, 0};
  auto s = p.submit(job(1, job_kind::intermediate, true));
  EXPECT_TRUE(s.builds.empty());
  EXPECT_EQ(run_ids(s), std::vector<uint64_t>{1});
}

TEST(pool_policy, a_lost_slot_is_quarantined_and_its_job_retried_elsewhere_once) {
  pool_policy p{2, 8, 3};
  p.submit(job(1));
  p.submit(job(2));
  auto s = p.slot_lost(0, true);  // job 1 was on slot 0
  EXPECT_EQ(s.quarantined, std::vector<size_t>{0});
  EXPECT_EQ(s.retried, std::vector<uint64_t>{1});
  EXPECT_TRUE(s.runs.empty());  // slot 1 is busy with job 2
  s = p.finished(1, false, false);
  EXPECT_EQ(ended_ids(s, job_end::done), std::vector<uint64_t>{2});
  EXPECT_EQ(run_ids(s), std::vector<uint64_t>{1});
  ASSERT_EQ(s.runs[0].slot, 1u);
  s = p.slot_lost(1, true);  // job 1's second loss: ended, and no slot is left
  EXPECT_EQ(ended_ids(s, job_end::slot_lost), std::vector<uint64_t>{1});
  EXPECT_EQ(p.scheduler().healthy(), 0u);
  EXPECT_EQ(ended_ids(p.submit(job(3)), job_end::no_healthy_slot), std::vector<uint64_t>{3});
}

TEST(pool_policy, an_idle_lost_slot_only_leaves_the_pool) {
  pool_policy p{2, 8, 3};
  auto s = p.slot_lost(1, true);
  EXPECT_EQ(s.quarantined, std::vector<size_t>{1});
  EXPECT_TRUE(s.ended.empty() && s.retried.empty());
  EXPECT_TRUE(p.slot_lost(1, true).quarantined.empty());  // reported once
  EXPECT_EQ(run_ids(p.submit(job(1))), std::vector<uint64_t>{1});
  EXPECT_EQ(p.running(0), std::optional<uint64_t>{1});
}
