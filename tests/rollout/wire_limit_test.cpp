// rollout/wire_limit: the size bound holds for real serializations, and a record past the limit
// becomes one small aborted record that says why.
#include "rollout/wire_limit.hpp"

#include <gtest/gtest.h>
#include <msgpack.hpp>

namespace caf_agent::rollout {
namespace {

messages::trajectory_record sample(size_t tokens, size_t observations, size_t observation_bytes) {
  messages::trajectory_record r;
  r.episode_id = 7;
  r.task_id = "softmax";
  r.node_id = "rollout@host:1";
  r.termination = caf_agent::messages::episode_end::finished;
  r.reward = 2;
  r.turns = 3;
  for (size_t i = 0; i < tokens; ++i) {
    r.tokens.push_back(static_cast<int32_t>(i * 7919));
    r.logprobs.push_back(-0.25f);
    r.loss_mask.push_back(i % 2);
  }
  r.turn_starts = {0, 10, 20};
  r.turn_texts = {"a", "b"};
  for (size_t i = 0; i < observations; ++i) r.observations.push_back(std::string(observation_bytes, 'x'));
  r.tools["Bash"] = {};
  r.timings_ms["total"] = 12.5;
  r.policy_versions = {1, 2};
  r.turn_overhead_us = {100, 200, 300};
  return r;
}

TEST(wire_limit, bound_is_at_least_the_msgpack_size) {
  for (auto r : {sample(0, 0, 0), sample(131072, 200, 16384), sample(5, 3, 70000)}) {
    msgpack::sbuffer body;
    msgpack::pack(body, r);
    EXPECT_GE(wire_bytes_bound(r), body.size());
    // Not wildly above either: the limit must mean what it says.
    EXPECT_LE(wire_bytes_bound(r), body.size() * 2 + 4096);
  }
}

TEST(wire_limit, a_record_within_the_limit_is_untouched) {
  auto r = sample(1000, 10, 100);
  const auto before = r;
  EXPECT_FALSE(fit_record_to_wire(r));
  EXPECT_EQ(r, before);
}

TEST(wire_limit, an_oversized_record_becomes_a_small_aborted_record_that_says_why) {
  // 300 observations of 1 MiB: past the 256 MiB default.
  auto r = sample(1000, 300, 1 << 20);
  ASSERT_GT(wire_bytes_bound(r), max_record_wire_bytes);
  EXPECT_TRUE(fit_record_to_wire(r));
  EXPECT_EQ(caf_agent::messages::name_of(r.termination), "aborted");
  EXPECT_NE(r.abort_reason.find("record too large to send"), std::string::npos) << r.abort_reason;
  EXPECT_NE(r.abort_reason.find("300 observations"), std::string::npos) << r.abort_reason;
  EXPECT_EQ(r.episode_id, 7u);
  EXPECT_EQ(r.task_id, "softmax");
  EXPECT_TRUE(r.tokens.empty() && r.observations.empty() && r.logprobs.empty());
  EXPECT_LT(wire_bytes_bound(r), 64u << 10);
  msgpack::sbuffer body;
  msgpack::pack(body, r);  // and it still serializes
  EXPECT_LT(body.size(), 64u << 10);
}

TEST(wire_limit, an_aborted_record_keeps_its_first_reason) {
  auto r = sample(10, 3, 100);
  r.termination = caf_agent::messages::episode_end::aborted;
  r.abort_reason = "policy timeout";
  EXPECT_TRUE(fit_record_to_wire(r, 100));
  EXPECT_NE(r.abort_reason.find("(policy timeout)"), std::string::npos) << r.abort_reason;
}

}  // namespace
}  // namespace caf_agent::rollout
