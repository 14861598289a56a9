// tests/gpu_pool/scheduler_test.cpp: slot assignment, priorities, back-pressure, quarantine.
#include <gtest/gtest.h>

#include "gpu_pool/scheduler.hpp"

using namespace caf_agent::gpu_pool;

namespace {
pending_job job(uint64_t id, uint64_t ep, job_kind k = job_kind::intermediate) {
  return {id, ep, k};
}
}  // namespace

TEST(scheduler, one_job_per_slot_and_fifo) {
  slot_scheduler s{2, 10, 3};
  ASSERT_EQ(s.submit(job(1, 1)), admit_result::queued);
  ASSERT_EQ(s.submit(job(2, 2)), admit_result::queued);
  ASSERT_EQ(s.submit(job(3, 3)), admit_result::queued);
  auto a = s.next();
  auto b = s.next();
  ASSERT_TRUE(a && b);
  EXPECT_EQ(a->job.job_id, 1u);
  EXPECT_EQ(b->job.job_id, 2u);
  EXPECT_NE(a->slot, b->slot);
  EXPECT_FALSE(s.next());  // both slots busy
  EXPECT_EQ(s.busy(), 2u);
  s.finish(a->slot, false);
  auto c = s.next();
  ASSERT_TRUE(c);
  EXPECT_EQ(c->job.job_id, 3u);
  EXPECT_EQ(c->slot, a->slot);
}

TEST(scheduler, finals_go_before_intermediates) {
  slot_scheduler s{1, 10, 3};
  s.submit(job(1, 1));
  s.submit(job(2, 2));
  s.submit(job(3, 3, job_kind::final_eval));
  EXPECT_EQ(s.next()->job.job_id, 3u);
}

TEST(scheduler, bounded_queue_is_back_pressure) {
  slot_scheduler s{1, 2, 3};
  EXPECT_EQ(s.credits(), 2u);
  EXPECT_EQ(s.submit(job(1, 1)), admit_result::queued);
  EXPECT_EQ(s.submit(job(2, 2)), admit_result::queued);
  EXPECT_EQ(s.credits(), 0u);
  EXPECT_EQ(s.submit(job(3, 3)), admit_result::queue_full);
  auto a = s.next();  // moves one job onto the slot: a credit returns
  EXPECT_EQ(s.credits(), 1u);
  EXPECT_EQ(s.submit(job(3, 3)), admit_result::queued);
  (void)a;
}

TEST(scheduler, one_outstanding_job_per_episode) {
  slot_scheduler s{2, 10, 3};
  EXPECT_EQ(s.submit(job(1, 7)), admit_result::queued);
  EXPECT_EQ(s.submit(job(2, 7)), admit_result::episode_busy);
  auto a = s.next();
  EXPECT_EQ(s.submit(job(2, 7)), admit_result::episode_busy);  // still running
  s.finish(a->slot, false);
  EXPECT_EQ(s.submit(job(2, 7)), admit_result::queued);
}

TEST(scheduler, consecutive_infra_failures_quarantine_a_slot) {
  slot_scheduler s{2, 10, 2};
  for (uint64_t i = 1; i <= 2; ++i) {
    s.submit(job(i, i));
    auto a = s.next();
    ASSERT_EQ(a->slot, 0u);
    EXPECT_EQ(s.finish(a->slot, true), i == 2);
  }
  EXPECT_TRUE(s.quarantined(0));
  EXPECT_EQ(s.healthy(), 1u);
  s.submit(job(9, 9));
  EXPECT_EQ(s.next()->slot, 1u);  // work goes around the quarantined slot
}

TEST(scheduler, success_resets_failure_count) {
  slot_scheduler s{1, 10, 2};
  uint64_t id = 0;
  for (bool fail : {true, false, true, false}) {
    s.submit(job(++id, id));
    auto a = s.next();
    EXPECT_FALSE(s.finish(a->slot, fail));
  }
  EXPECT_FALSE(s.quarantined(0));
}

TEST(scheduler, all_quarantined_means_no_slots) {
  slot_scheduler s{1, 10, 1};
  s.submit(job(1, 1));
  s.finish(s.next()->slot, true);
  EXPECT_EQ(s.submit(job(2, 2)), admit_result::no_slots);
}

TEST(scheduler, cancel_removes_queued_job) {
  slot_scheduler s{1, 10, 3};
  s.submit(job(1, 1));
  s.submit(job(2, 2));
  EXPECT_TRUE(s.cancel(2));
  EXPECT_FALSE(s.cancel(2));
  EXPECT_EQ(s.queued(), 1u);
  EXPECT_EQ(s.submit(job(3, 2)), admit_result::queued);
}

TEST(scheduler, a_removed_slot_is_out_for_good_and_frees_its_episode) {
  slot_scheduler s{2, 10, 3};
  ASSERT_EQ(s.submit(job(1, 7)), admit_result::queued);
  auto a = s.next();
  ASSERT_TRUE(a);
  EXPECT_TRUE(s.remove(a->slot));
  EXPECT_FALSE(s.remove(a->slot));  // already out
  EXPECT_EQ(s.healthy(), 1u);
  EXPECT_EQ(s.busy(), 0u);
  EXPECT_EQ(s.submit(job(2, 7)), admit_result::queued);  // episode 7 may submit again
  auto b = s.next();
  ASSERT_TRUE(b);
  EXPECT_NE(b->slot, a->slot);
  s.finish(b->slot, false);
  EXPECT_TRUE(s.quarantined(a->slot));  // a success elsewhere does not bring it back
}
