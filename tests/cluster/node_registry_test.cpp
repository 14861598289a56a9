// tests/cluster/node_registry_test.cpp: the coordinator's bookkeeping, without CAF.
#include <gtest/gtest.h>

#include "cluster/node_registry.hpp"

using namespace caf_agent;
using namespace caf_agent::cluster;
using namespace caf_agent::messages;

namespace {

register_node reg(const std::string& id, messages::node_role role = messages::node_role::rollout) {
  register_node r;
  r.info.node_id = id;
  r.info.role = role;
  return r;
}

}  // namespace

TEST(node_registry, refuses_wrong_version_unknown_role_and_empty_id) {
  node_registry reg_{1000};
  auto r = reg("a");
  r.version = protocol_version + 1;
  ASSERT_TRUE(reg_.check(r));
  EXPECT_NE(reg_.check(r)->find("protocol version"), std::string::npos);
  EXPECT_NE(reg_.check(reg("a", static_cast<messages::node_role>(99)))->find("unknown role value 99"),
            std::string::npos);
  EXPECT_TRUE(reg_.check(reg("")));
  EXPECT_FALSE(reg_.check(reg("a")));
}

TEST(node_registry, stale_after_timeout_then_recovers) {
  node_registry r{1000};
  r.add(reg("a").info, 0);
  r.add(reg("b").info, 0);
  EXPECT_TRUE(r.expire(1000).empty());  // exactly at the timeout: still up
  ASSERT_TRUE(r.heartbeat({"b", {}, 0}, 900) == std::nullopt);
  auto events = r.expire(1500);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].node_id, "a");
  EXPECT_EQ(events[0].to, messages::node_state::stale);
  EXPECT_EQ(r.up_count(), 1u);
  auto back = r.heartbeat({"a", {{"episodes", 3}}, 0}, 1600);
  ASSERT_TRUE(back);
  EXPECT_EQ(back->to, messages::node_state::up);
  EXPECT_EQ(r.snapshot(true)[0].counters.at("episodes"), 3);
}

TEST(node_registry, down_is_reported_once_and_left_is_not_down) {
  node_registry r{1000};
  r.add(reg("a").info, 0);
  r.add(reg("b").info, 0);
  ASSERT_TRUE(r.down("a", "connection lost"));
  EXPECT_FALSE(r.down("a", "again"));
  ASSERT_TRUE(r.left("b", "SIGTERM"));
  EXPECT_FALSE(r.down("b", "connection closed after leaving"));
  EXPECT_EQ(r.snapshot(false).size(), 1u);
  EXPECT_EQ(r.snapshot(true).size(), 2u);
  EXPECT_FALSE(r.down("zzz", "never registered"));
}

TEST(node_registry, reregistration_replaces_entry) {
  node_registry r{1000};
  r.add(reg("a").info, 0);
  r.down("a", "lost");
  auto ev = r.add(reg("a").info, 5);
  EXPECT_EQ(ev.from, messages::node_state::down);
  EXPECT_EQ(r.up_count(), 1u);
}
