// tests/rollout/pool_choice_test.cpp: one logical pool over every live GPU pool.
#include "rollout/pool_choice.hpp"

#include <gtest/gtest.h>

using namespace caf_agent::rollout;

namespace {

pool_view pool(int32_t healthy, int32_t busy, int32_t queued, int32_t credits) {
  pool_view p;
  p.healthy = healthy;
  p.busy = busy;
  p.queued = queued;
  p.free_credits = credits;
  p.reported = true;
  return p;
}

}  // namespace

TEST(PoolChoice, PrefersTheMostIdleSlots) {
  std::vector<pool_view> pools{pool(8, 8, 2, 10), pool(8, 3, 0, 12), pool(8, 6, 0, 12)};
  EXPECT_EQ(choose_pool(pools), 1u);
}

TEST(PoolChoice, CountsJobsSentSinceTheLastReport) {
  std::vector<pool_view> pools{pool(2, 0, 0, 4), pool(2, 1, 0, 4)};
  EXPECT_EQ(choose_pool(pools), 0u);
  pools[0].sent_since_report = 2;  // both idle slots already taken by us
  EXPECT_EQ(choose_pool(pools), 1u);
}

TEST(PoolChoice, ANewPoolGetsWorkAtOnce) {
  std::vector<pool_view> pools{pool(8, 8, 30, 2), pool(8, 8, 20, 12)};
  pool_view fresh;  // joined, no report yet
  pools.push_back(fresh);
  EXPECT_EQ(choose_pool(pools), 2u);
}

TEST(PoolChoice, WhenAllAreBusyTheShortestWaitPerSlotWins) {
  // 16 waiting on 8 slots (2 per slot) against 3 waiting on 1 slot (3 per slot).
  std::vector<pool_view> pools{pool(1, 1, 2, 2), pool(8, 8, 8, 8)};
  EXPECT_EQ(choose_pool(pools), 1u);
}

TEST(PoolChoice, AffinityOnlyBreaksTies) {
  std::vector<pool_view> pools{pool(4, 1, 0, 8), pool(4, 1, 0, 8), pool(4, 0, 0, 8)};
  EXPECT_EQ(choose_pool(pools, 1), 2u);  // pool 2 has more idle slots: affinity loses
  pools[2].busy = 1;
  EXPECT_EQ(choose_pool(pools, 1), 1u);  // a tie: the task's last pool
  EXPECT_EQ(choose_pool(pools), 0u);
}

TEST(PoolChoice, QuarantinedPoolsAreSkippedAndNoneLeftIsNothing) {
  std::vector<pool_view> pools{pool(0, 0, 0, 8), pool(2, 2, 5, 0)};
  EXPECT_EQ(choose_pool(pools), 1u);  // full, but it parks the job
  pools.pop_back();
  EXPECT_FALSE(choose_pool(pools).has_value());
  EXPECT_FALSE(choose_pool({}).has_value());
}

TEST(PoolChoice, AdmissionClosesOnlyWhenEveryPoolIsSaturated) {
  std::vector<pool_view> pools{pool(8, 8, 64, 0), pool(8, 8, 63, 1)};
  EXPECT_TRUE(any_pool_admitting(pools));
  pools[1].sent_since_report = 1;
  EXPECT_FALSE(any_pool_admitting(pools));
  pools.push_back(pool_view{});  // a pool joins
  EXPECT_TRUE(any_pool_admitting(pools));
  EXPECT_FALSE(any_pool_admitting({}));
}

TEST(PoolChoice, SpreadsASteadyStreamOverEqualPools) {
  std::vector<pool_view> pools(3, pool(4, 0, 0, 16));
  std::vector<int> sent(3, 0);
  for (int i = 0; i < 12; ++i) {
    auto c = choose_pool(pools);
    ASSERT_TRUE(c);
    ++sent[*c];
    ++pools[*c].sent_since_report;
    ++pools[*c].in_flight;
  }
  EXPECT_EQ(sent, (std::vector<int>{4, 4, 4}));
}

TEST(PoolChoice, EqualIdlePoolsTakeTurns) {
  // Short jobs that finish before the next: every pool is idle each time.
  std::vector<pool_view> pools(3, pool(1, 0, 0, 8));
  std::vector<int> sent(3, 0);
  for (int i = 0; i < 9; ++i) {
    auto c = choose_pool(pools);
    ASSERT_TRUE(c);
    ++sent[*c];
    ++pools[*c].assigned;
  }
  EXPECT_EQ(sent, (std::vector<int>{3, 3, 3}));
}
