// tests/observe/observe_test.cpp: histogram, registry, stuck detection, cluster view.
#include <gtest/gtest.h>

#include "observe/cluster_view.hpp"
#include "observe/histogram.hpp"
#include "observe/registry.hpp"
#include "observe/stuck.hpp"

using namespace caf_agent;
using namespace caf_agent::observe;

TEST(Histogram, QuantilesFallInTheRightBucket) {
  histogram h;
  for (int i = 0; i < 90; ++i) h.add(1500);    // (1000, 2000]
  for (int i = 0; i < 10; ++i) h.add(300000);  // (200000, 500000]
  EXPECT_GT(h.quantile(0.5), 1000);
  EXPECT_LE(h.quantile(0.5), 2000);
  EXPECT_GT(h.quantile(0.99), 200000);
  EXPECT_LE(h.quantile(0.99), 500000);
  histogram other;
  other.merge(h.to_vector());
  EXPECT_EQ(other.total, 100);
  EXPECT_EQ(histogram{}.quantile(0.5), 0);
}

namespace {

std::string name_of(const void*) {
  return "tick";
}

}  // namespace

TEST(Registry, CountsByKindAndKeepsEndedActors) {
  metrics_registry reg;
  auto a = reg.add("episode", 1);
  auto b = reg.add("episode", 2);
  a->handled({&typeid(int), 0}, &name_of, nullptr, 3, 2000);
  a->handled({&typeid(int), 0}, &name_of, nullptr, 1, 4000);
  b->handled({&typeid(int), 0}, &name_of, nullptr, 0, 1000);
  reg.remove(b, "");
  reg.remove(a, "boom");
  auto c = reg.add("episode", 3);
  reg.note_restart("gpu_slot", "worker died");
  auto snap = reg.snapshot();
  ASSERT_EQ(snap.kinds.size(), 2u);
  auto& ep = snap.kinds[0].kind == "episode" ? snap.kinds[0] : snap.kinds[1];
  auto& slot = snap.kinds[0].kind == "episode" ? snap.kinds[1] : snap.kinds[0];
  EXPECT_EQ(ep.running, 1);
  EXPECT_EQ(ep.spawned, 3);
  EXPECT_EQ(ep.processed, 3);
  EXPECT_EQ(ep.processing_us, 7);
  EXPECT_EQ(ep.mailbox_peak, 3);
  EXPECT_EQ(ep.errors, 1);
  EXPECT_EQ(ep.handled.at("tick"), 3);
  ASSERT_EQ(ep.restart_reasons.size(), 1u);
  EXPECT_NE(ep.restart_reasons[0].find("boom"), std::string::npos);
  EXPECT_EQ(slot.restarts, 1);
  ASSERT_EQ(snap.top.size(), 1u);
  EXPECT_EQ(snap.top[0].id, 3u);
  reg.remove(c, "");
}

TEST(Registry, EpisodesAndPools) {
  metrics_registry reg;
  reg.episode_update(7, [](messages::episode_progress& e) { e.turn = 4; });
  reg.pool_update({"gpu_pool", 4, 3, 2, 5, 0, 10, 1, {}});
  reg.pool_wait("gpu_pool", 1500);
  auto snap = reg.snapshot();
  ASSERT_EQ(snap.episodes.size(), 1u);
  EXPECT_EQ(snap.episodes[0].episode_id, 7u);
  EXPECT_EQ(snap.episodes[0].turn, 4);
  ASSERT_EQ(snap.pools.size(), 1u);
  EXPECT_EQ(snap.pools[0].busy, 2);
  histogram h;
  h.merge(snap.pools[0].wait_buckets);
  EXPECT_EQ(h.total, 1);
  reg.episode_done(7);
  EXPECT_TRUE(reg.snapshot().episodes.empty());
}

TEST(Stuck, EachSignFlagsOnlyPastItsThreshold) {
  stuck_options o;
  o.no_progress_ms = 1000;
  o.repeat_calls = 3;
  o.turn_factor = 10;
  o.min_turn_samples = 5;
  o.min_turn_ms = 500;
  messages::episode_progress idle, looping, slow, fine;
  idle.episode_id = 1;
  idle.last_progress_ms = 8000;
  looping.episode_id = 2;
  looping.last_progress_ms = 9900;
  looping.repeats = 3;
  slow.episode_id = 3;
  slow.last_progress_ms = 9900;
  slow.turn_started_ms = 9000;
  fine.episode_id = 4;
  fine.last_progress_ms = 9900;
  fine.turn_started_ms = 9900;
  fine.repeats = 2;
  auto flags = detect_stuck({idle, looping, slow, fine}, 10000, 50.0, 10, o);
  ASSERT_EQ(flags.size(), 3u);
  EXPECT_EQ(flags[0].episode_id, 1u);
  EXPECT_EQ(flags[0].reason, "no_progress");
  EXPECT_EQ(flags[1].reason, "repeated_call");
  EXPECT_EQ(flags[2].reason, "slow_turn");
  // Too few turns for a median: no slow_turn.
  EXPECT_EQ(detect_stuck({slow}, 10000, 50.0, 4, o).size(), 0u);
}

namespace {

messages::node_status node(const std::string& id, const std::string& state) {
  messages::node_status n;
  n.info.node_id = id;
  n.state = messages::parse_name<messages::node_state>(state).value();
  return n;
}

}  // namespace

TEST(ClusterView, SharedProcessCountsOnceAndLostNodesDropOut) {
  cluster_view view{stuck_options{.no_progress_ms = 1000}};
  messages::node_metrics m;
  m.process = "h:1";
  m.kinds.push_back({.kind = "episode", .running = 2});
  messages::episode_progress e;
  e.episode_id = 5;
  e.node_id = "local/rollout@h:1";
  e.last_progress_ms = 1;
  m.episodes.push_back(e);
  view.on_metrics("local/rollout@h:1", m);
  view.on_metrics("local/gpu-pool@h:1", m);
  view_inputs in;
  in.now_ms = 5000;
  in.snapshot.nodes = {node("local/rollout@h:1", "up"), node("local/gpu-pool@h:1", "up")};
  auto actors = view.render(messages::view_kind::actors, in);
  ASSERT_EQ(actors["kinds"].size(), 1u);
  EXPECT_EQ(actors["kinds"][0]["caf.system.running-actors"], 2);
  auto fresh = view.check_stuck(in);
  ASSERT_EQ(fresh.size(), 1u);
  EXPECT_EQ(fresh[0].episode_id, 5u);
  EXPECT_TRUE(view.check_stuck(in).empty());  // counted once
  EXPECT_EQ(view.stuck_counts().at("no_progress"), 1);
  auto eps = view.render(messages::view_kind::episodes, in);
  EXPECT_EQ(eps["summary"]["in_flight"], 1);
  EXPECT_EQ(eps["episodes"][0]["stuck"][0]["reason"], "no_progress");
  auto prom = view.prometheus(in);
  EXPECT_NE(prom.find("caf_system_running_actors{process=\"h:1\",name=\"episode\"} 2"), std::string::npos);
  EXPECT_NE(prom.find("caf_agent_episodes_stuck_total{reason=\"no_progress\"} 1"), std::string::npos);
  in.snapshot.nodes = {node("local/rollout@h:1", "down"), node("local/gpu-pool@h:1", "down")};
  EXPECT_EQ(view.render(messages::view_kind::episodes, in)["summary"]["in_flight"], 0);
  // The coordinator answers these two itself (a transcript, the Prometheus text), not from JSON here.
  EXPECT_TRUE(view.render(messages::view_kind::episode, in).contains("error"));
  EXPECT_TRUE(view.render(messages::view_kind::prometheus, in).contains("error"));
  EXPECT_TRUE(view.render(messages::view_kind::metrics, in).contains("nodes"));
}
