// tests/rollout/kv_admission_test.cpp: the episode limit from the KV capacity and the contexts
// episodes reached.
#include <gtest/gtest.h>

#include "rollout/kv_admission.hpp"

using caf_agent::rollout::kv_admission;

TEST(kv_admission, unknown_capacity_leaves_the_configured_maximum) {
  kv_admission a;
  EXPECT_FALSE(a.active());
  a.observe(100000);
  EXPECT_EQ(a.limit(512), 512);
  EXPECT_EQ(a.limit(0), 1);  // never below one episode
}

TEST(kv_admission, starts_from_capacity_over_the_initial_context_then_follows_what_episodes_reached) {
  kv_admission a(64 * 4096, 4096, 4);  // a slot engine: 64 sequences of 4,096 tokens
  EXPECT_TRUE(a.active());
  EXPECT_EQ(a.expected_context(), 4096);
  EXPECT_EQ(a.limit(512), 64);
  for (int i = 0; i < 4; ++i) a.observe(1024);
  EXPECT_EQ(a.expected_context(), 1024);
  EXPECT_EQ(a.limit(512), 256);
  EXPECT_EQ(a.limit(100), 100);  // the configured maximum still bounds it
  // The window: only the last 4 count.
  for (int i = 0; i < 4; ++i) a.observe(65536);
  EXPECT_EQ(a.expected_context(), 65536);
  EXPECT_EQ(a.limit(512), 4);
  a.observe(0);  // a record without tokens says nothing
  EXPECT_EQ(a.expected_context(), 65536);
}

TEST(kv_admission, a_context_beyond_the_capacity_still_runs_one_episode) {
  kv_admission a(8192, 0, 8);
  EXPECT_EQ(a.limit(16), 16);  // nothing known yet: no initial estimate
  a.observe(131072);
  EXPECT_EQ(a.limit(16), 1);
  a.observe(3000);  // mean of 131072 and 3000, rounded up
  EXPECT_EQ(a.expected_context(), 67036);
}
