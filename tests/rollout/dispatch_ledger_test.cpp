// tests/rollout/dispatch_ledger_test.cpp: the run driver's bookkeeping, alone and over
// random interleavings of the messages between a driver and its rollout nodes.
#include "rollout/dispatch_ledger.hpp"

#include <deque>
#include <map>
#include <random>
#include <set>

#include <gtest/gtest.h>

using namespace caf_agent::rollout;

TEST(DispatchLedger, FillsEachNodeToItsLimitAndNoFurther) {
  dispatch_ledger l;
  for (uint64_t i = 1; i <= 20; ++i) l.plan(i);
  l.node_up("a", 3);
  l.node_up("b", 5);
  auto sent = l.assign();
  EXPECT_EQ(sent.size(), 8u);
  EXPECT_EQ(l.in_flight("a"), 3);
  EXPECT_EQ(l.in_flight("b"), 5);
  // A capacity report can only change the limit, never the count.
  l.node_up("a", 3);
  EXPECT_TRUE(l.assign().empty());
  EXPECT_EQ(l.record("a", sent[0].node == "a" ? sent[0].episode_id : sent[1].episode_id), record_outcome::stored);
  EXPECT_EQ(l.assign().size(), 1u);
  EXPECT_EQ(l.queued(), 11u);
}

TEST(DispatchLedger, SpreadsOverNodesByLoadShare) {
  dispatch_ledger l;
  for (uint64_t i = 1; i <= 4; ++i) l.plan(i);
  l.node_up("a", 128);
  l.node_up("b", 128);
  l.assign();
  EXPECT_EQ(l.in_flight("a"), 2);
  EXPECT_EQ(l.in_flight("b"), 2);
}

TEST(DispatchLedger, LostNodeRequeuesUnstartedAndAbortsStarted) {
  dispatch_ledger l;
  for (uint64_t i = 1; i <= 4; ++i) l.plan(i);
  l.node_up("a", 4);
  ASSERT_EQ(l.assign().size(), 4u);
  l.started("a", 2);
  l.started("a", 3);
  EXPECT_EQ(l.record("a", 3), record_outcome::stored);
  auto loss = l.node_lost("a");
  EXPECT_EQ(loss.requeued, (std::vector<uint64_t>{1, 4}));
  ASSERT_EQ(loss.aborted.size(), 1u);
  EXPECT_EQ(loss.aborted[0].episode_id, 2u);
  EXPECT_FALSE(l.has_node("a"));
  EXPECT_EQ(l.queued(), 2u);
  EXPECT_EQ(l.open_episodes(), 2u);  // 1 and 4; 2 ended aborted, 3 recorded
  l.node_up("b", 8);
  auto again = l.assign();
  ASSERT_EQ(again.size(), 2u);
  EXPECT_EQ(again[0].episode_id, 1u);
  EXPECT_EQ(again[1].episode_id, 4u);
  // A late record of the aborted episode (the node was only frozen) is a duplicate.
  EXPECT_EQ(l.record("a", 2), record_outcome::duplicate);
}

TEST(DispatchLedger, RetryAbortedRerunsStartedEpisodesWithTheNextAttempt) {
  dispatch_ledger l{true};
  l.plan(7);
  l.node_up("a", 1);
  l.assign();
  l.started("a", 7);
  auto loss = l.node_lost("a");
  EXPECT_TRUE(loss.aborted.empty());
  EXPECT_EQ(loss.requeued, (std::vector<uint64_t>{7}));
  l.node_up("b", 1);
  auto again = l.assign();
  ASSERT_EQ(again.size(), 1u);
  EXPECT_EQ(again[0].attempt, 1);
}

TEST(DispatchLedger, LateRecordOfARequeuedEpisodeEndsItOnce) {
  dispatch_ledger l;
  l.plan(1);
  l.node_up("a", 1);
  l.assign();
  l.node_lost("a");  // not started as far as the driver knows
  EXPECT_EQ(l.record("a", 1), record_outcome::stored);
  EXPECT_EQ(l.queued(), 0u);
  l.node_up("b", 1);
  EXPECT_TRUE(l.assign().empty());
  EXPECT_EQ(l.open_episodes(), 0u);
}

TEST(DispatchLedger, DropQueueKeepsWhatWasSent) {
  dispatch_ledger l;
  for (uint64_t i = 1; i <= 5; ++i) l.plan(i);
  l.node_up("a", 2);
  l.assign();
  EXPECT_EQ(l.drop_queue().size(), 3u);
  EXPECT_EQ(l.outstanding().size(), 2u);
  EXPECT_EQ(l.open_episodes(), 2u);
  EXPECT_EQ(l.record("a", 99), record_outcome::unknown);
}

namespace {

/// A rollout node as the driver cannot see it: its inbox (sent, not yet received), its
/// queue, its running episodes, and its messages to the driver in flight.
struct sim_node {
  std::string id;
  int32_t limit = 1;
  bool alive = true;    // false: killed (or frozen); its inbox never arrives
  bool frozen = false;  // comes back later and still sends what it had
  std::deque<uint64_t> inbox, waiting;
  std::set<uint64_t> running;
  struct note {
    enum kind_t { capacity, started, record } kind;
    uint64_t id = 0;
  };
  std::deque<note> outbox;
  bool lost_pending = false;  // the coordinator's node_lost is on its way
  size_t held() const { return inbox.size() + waiting.size() + running.size(); }
};

struct interleaving_result {
  std::map<uint64_t, int> ends;  // records stored plus aborts, per episode
  int max_over_limit = 0;        // worst (held - limit) seen on any node
};

interleaving_result run_interleaving(uint64_t seed, bool retry_aborted, int episodes) {
  std::mt19937_64 rng{seed};
  auto pick = [&](size_t n) { return static_cast<size_t>(rng() % n); };
  dispatch_ledger l{retry_aborted};
  for (int i = 1; i <= episodes; ++i) l.plan(static_cast<uint64_t>(i));
  std::vector<sim_node> nodes;
  int next_node = 0;
  interleaving_result res;
  auto join = [&] {
    sim_node n;
    n.id = "n" + std::to_string(next_node++);
    n.limit = 1 + static_cast<int32_t>(pick(6));
    // Before its first report the driver gives a node room for one.
    l.node_up(n.id, 1);
    n.outbox.push_back({sim_node::note::capacity, 0});
    nodes.push_back(std::move(n));
  };
  auto dispatch = [&] {
    for (auto& a : l.assign())
      for (auto& n : nodes)
        if (n.id == a.node) n.inbox.push_back(a.episode_id);
  };
  join();
  join();
  for (int step = 0; step < 200000 && l.open_episodes() > 0; ++step) {
    auto& n = nodes[pick(nodes.size())];
    auto ev = pick(100);
    if (ev < 25 && n.alive && !n.inbox.empty()) {  // the node receives a start
      n.waiting.push_back(n.inbox.front());
      n.inbox.pop_front();
      n.outbox.push_back({sim_node::note::capacity, 0});  // stale as soon as it is sent
    } else if (ev < 45 && n.alive && !n.waiting.empty() && n.running.size() < size_t(n.limit)) {
      auto id = n.waiting.front();
      n.waiting.pop_front();
      n.running.insert(id);
      n.outbox.push_back({sim_node::note::started, id});
    } else if (ev < 60 && n.alive && !n.running.empty()) {
      auto it = std::next(n.running.begin(), static_cast<long>(pick(n.running.size())));
      n.outbox.push_back({sim_node::note::record, *it});
      n.running.erase(it);
      n.outbox.push_back({sim_node::note::capacity, 0});
    } else if (ev < 90 && !n.outbox.empty() && (n.alive || !n.frozen || pick(2))) {
      auto note = n.outbox.front();  // the node's messages arrive in order
      n.outbox.pop_front();
      if (note.kind == sim_node::note::capacity && l.has_node(n.id)) l.node_up(n.id, n.limit);
      if (note.kind == sim_node::note::started) l.started(n.id, note.id);
      if (note.kind == sim_node::note::record && l.record(n.id, note.id) == record_outcome::stored) ++res.ends[note.id];
    } else if (ev < 93 && n.lost_pending) {  // the coordinator's notice arrives
      n.lost_pending = false;
      for (auto& a : l.node_lost(n.id).aborted) ++res.ends[a.episode_id];
    } else if (ev < 95 && n.alive && nodes.size() < 12) {  // killed, or frozen
      n.alive = false;
      n.frozen = pick(2) == 0;
      n.inbox.clear();
      n.waiting.clear();
      if (!n.frozen) n.running.clear();  // a frozen node's episodes finish when it thaws
      n.lost_pending = true;
    } else if (ev < 97 && n.frozen && !n.lost_pending) {  // thaws: reports, then rejoins anew
      for (auto id : n.running) n.outbox.push_back({sim_node::note::record, id});
      n.running.clear();
      n.frozen = false;
      join();
    } else if (ev < 98 && nodes.size() < 12) {
      join();
    }
    bool any_alive = false;
    for (auto& m : nodes) any_alive = any_alive || (m.alive && l.has_node(m.id));
    if (!any_alive) join();
    dispatch();
    for (auto& m : nodes)
      if (m.alive) res.max_over_limit = std::max(res.max_over_limit, int(m.held()) - m.limit);
  }
  return res;
}

}  // namespace

class DispatchInterleavings : public ::testing::TestWithParam<bool> {};

TEST_P(DispatchInterleavings, NoNodeEverHoldsMoreThanItsLimitAndEveryEpisodeEndsOnce) {
  const bool retry = GetParam();
  // Rationale: 300 seeds of 60 episodes run in well under a second and have covered
  // every branch (losses before and after started notices, late records, rejoins).
  for (uint64_t seed = 1; seed <= 300; ++seed) {
    auto res = run_interleaving(seed, retry, 60);
    ASSERT_EQ(res.max_over_limit, 0) << "seed " << seed;
    ASSERT_EQ(res.ends.size(), 60u) << "seed " << seed << ": not every episode ended";
    for (auto& [id, n] : res.ends) ASSERT_EQ(n, 1) << "seed " << seed << " episode " << id;
  }
}

INSTANTIATE_TEST_SUITE_P(AbortOrRetry, DispatchInterleavings, ::testing::Values(false, true));
