// tests/actors/run_driver_deterministic_test.cpp: the run driver on CAF's test coordinator,
// with its real trajectory store (a temporary directory), against scripted rollout managers
// written here: the plan, a rollout node that vanishes (its unstarted episodes go to another
// node, its started ones are recorded aborted), every planned episode in exactly one record.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <memory>
#include <optional>
#include <set>

#include <caf/all.hpp>

#include "actors/run_driver.hpp"
#include "messages/type_ids.hpp"
#include "rollout/trajectory_store.hpp"
#include "tests/actors/deterministic.hpp"

using namespace caf_agent;
using namespace caf_agent::messages;
using caf_agent::testing::name_of_field;

namespace {

/// One rollout node as the driver sees it: it reports its capacity after every change and
/// tells the driver of the first `starts` episodes it receives that they started.
struct node_log {
  std::string node;
  int32_t limit = 1;
  size_t starts = 1000;
  std::vector<start_episode> received;
  std::set<uint64_t> held;
  size_t max_held = 0;
  int64_t records = 0;
  caf::actor driver;
};

caf::behavior fake_node(caf::event_based_actor* self, std::shared_ptr<node_log> n) {
  auto report = [=] {
    int32_t free = n->limit - static_cast<int32_t>(n->held.size());
    self->send(n->driver, rollout_capacity{n->node, std::max(0, free), static_cast<int32_t>(n->held.size()), n->limit});
  };
  return {
      [=](start_episode& s) {
        n->driver = caf::actor_cast<caf::actor>(self->current_sender());
        n->received.push_back(s);
        n->held.insert(s.episode_id);
        n->max_held = std::max(n->max_held, n->held.size());
        if (n->received.size() <= n->starts) self->send(n->driver, episode_started{n->node, s.episode_id});
        report();
      },
      [=](atoms::done) {  // its lowest episode finishes
        if (n->held.empty()) return;
        trajectory_record rec;
        rec.episode_id = *n->held.begin();
        rec.task_id = "t";
        rec.node_id = n->node;
        rec.termination = caf_agent::messages::episode_end::finished;
        n->held.erase(n->held.begin());
        ++n->records;
        self->send(n->driver, std::move(rec));
        report();
      },
      [=](atoms::stats, const std::string&) { return "gpu-node " + std::to_string(n->records) + "\n"; },
  };
}

struct driver_test : caf_agent::testing::deterministic {
  std::filesystem::path dir;
  std::shared_ptr<std::optional<run_summary>> summary = std::make_shared<std::optional<run_summary>>();

  driver_test() {
    dir = std::filesystem::temp_directory_path() / ("caf_agent_driver_det_" + std::to_string(::getpid()) + "_" +
                                                    ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir);
  }
  ~driver_test() override { std::filesystem::remove_all(dir); }

  run_driver_options options(int episodes) {
    run_driver_options o;
    o.tasks = {task_spec{"t1", "t1", 1, "# one"}, task_spec{"t2", "t2", 1, "# two"}};
    o.episodes = episodes;
    o.mode = caf_agent::messages::episode_mode::eval;
    o.max_turns = 20;
    o.store_dir = dir.string();
    o.seed = 5;
    o.on_finished = [s = summary](const run_summary& r) { *s = r; };
    return o;
  }

  caf::actor driver(const run_driver_options& o) {
    std::string error;
    auto d = spawn_run_driver(sys(), o, error);
    EXPECT_TRUE(d) << error;
    run();
    return d;
  }

  std::pair<caf::actor, std::shared_ptr<node_log>> node(const caf::actor& d, std::string name, int32_t limit,
                                                        size_t starts = 1000) {
    auto n = std::make_shared<node_log>();
    n->node = name;
    n->limit = limit;
    n->starts = starts;
    auto a = sys().spawn(fake_node, n);
    caf::anon_send(d, service_announce{name, "rollout"}, a);
    run();
    return {a, n};
  }

  /// Every record in the store, by episode id (a second one for an id fails the test).
  std::map<uint64_t, trajectory_record> stored() {
    std::map<uint64_t, trajectory_record> out;
    for (auto& r : rollout::trajectory_store::read_all(dir))
      EXPECT_TRUE(out.emplace(r.episode_id, r).second) << "two records for episode " << r.episode_id;
    return out;
  }

  std::vector<uint64_t> ids(const node_log& n) {
    std::vector<uint64_t> out;
    for (auto& s : n.received) out.push_back(s.episode_id);
    return out;
  }
};

TEST_F(driver_test, the_plan_runs_within_the_node_limit_and_ends_in_one_record_each) {
  auto o = options(5);
  auto plan = plan_episodes(o);
  auto d = driver(o);
  auto [a, n] = node(d, "a", 2);
  // Room for one until the node reports, then its limit.
  EXPECT_EQ(ids(*n), (std::vector<uint64_t>{1, 2}));
  ASSERT_EQ(n->received.size(), 2u);
  EXPECT_EQ(n->received[0].task.task_id, "t1");
  EXPECT_EQ(n->received[1].task.task_id, "t2") << "tasks are cycled";
  EXPECT_EQ(n->received[1].seed, plan[1].seed);
  EXPECT_EQ(n->received[1].max_turns, 20);
  EXPECT_EQ(caf_agent::messages::name_of(n->received[1].mode), "eval");
  while (!summary->has_value() && !n->held.empty()) {
    caf::anon_send(a, atoms::done::value);
    run();
  }
  ASSERT_TRUE(summary->has_value()) << "the run finishes when every episode has its record";
  EXPECT_EQ(n->max_held, 2u) << "never more than the node's limit";
  EXPECT_EQ(ids(*n), (std::vector<uint64_t>{1, 2, 3, 4, 5}));
  auto& s = **summary;
  EXPECT_EQ(s.planned, 5);
  EXPECT_EQ(s.recorded, 5);
  EXPECT_EQ(s.aborted, 0);
  EXPECT_EQ(s.duplicates, 0);
  EXPECT_EQ(s.evaluations_per_pool["gpu-node"], 5);
  EXPECT_EQ(stored().size(), 5u);
}

TEST_F(driver_test, a_vanished_node_s_unstarted_episodes_go_elsewhere_and_started_ones_abort) {
  auto d = driver(options(4));
  auto [a, na] = node(d, "a", 3, 1);  // takes 1, 2, 3; only 1 starts
  ASSERT_EQ(ids(*na), (std::vector<uint64_t>{1, 2, 3}));
  auto [b, nb] = node(d, "b", 8);
  EXPECT_EQ(ids(*nb), (std::vector<uint64_t>{4}));
  caf::anon_send(d, node_lost{"a", "heartbeats stopped"});
  run();
  EXPECT_EQ(ids(*nb), (std::vector<uint64_t>{4, 2, 3})) << "the unstarted episodes run on b";
  // Node a's own record of episode 1 arrives after all: the aborted one stays.
  caf::anon_send(a, atoms::done::value);
  run();
  for (int i = 0; i < 3; ++i) {
    caf::anon_send(b, atoms::done::value);
    run();
  }
  ASSERT_TRUE(summary->has_value());
  auto& s = **summary;
  EXPECT_EQ(s.planned, 4);
  EXPECT_EQ(s.recorded, 4);
  EXPECT_EQ(s.aborted, 1);
  EXPECT_EQ(s.requeued, 2);
  EXPECT_EQ(s.duplicates, 1) << "the late record is dropped";
  auto recs = stored();
  ASSERT_EQ(recs.size(), 4u) << "every planned episode, exactly once";
  EXPECT_EQ(name_of_field(recs[1].termination), "aborted");
  EXPECT_NE(recs[1].abort_reason.find("rollout node a lost (heartbeats stopped)"), std::string::npos);
  for (uint64_t id : {2, 3, 4}) {
    EXPECT_EQ(name_of_field(recs[id].termination), "finished");
    EXPECT_EQ(recs[id].node_id, "b");
  }
  fire_timers();
  EXPECT_EQ(stored().size(), 4u);
}

TEST_F(driver_test, a_resumed_run_plays_only_the_episodes_without_a_record) {
  {
    auto d = driver(options(3));
    auto [a, n] = node(d, "a", 1);
    caf::anon_send(a, atoms::done::value);  // episode 1 recorded, then the run stops
    run();
    stop(d);
  }
  summary->reset();
  auto d = driver(options(3));
  auto [a, n] = node(d, "a", 4);
  EXPECT_EQ(ids(*n), (std::vector<uint64_t>{2, 3}));
  caf::anon_send(a, atoms::done::value);
  caf::anon_send(a, atoms::done::value);
  run();
  ASSERT_TRUE(summary->has_value());
  EXPECT_EQ((*summary)->resumed, 1);
  EXPECT_EQ(stored().size(), 3u);
}

TEST_F(driver_test, an_interrupted_run_records_what_was_sent_and_drops_the_rest) {
  auto d = driver(options(5));
  auto [a, n] = node(d, "a", 2);
  auto answer = std::make_shared<std::optional<bool>>();
  sys().spawn([=](caf::event_based_actor* probe) {
    probe->request(d, caf::infinite, atoms::stop::value, std::string{"SIGINT"}).then([=](bool ok) { *answer = ok; });
  });
  run();
  ASSERT_TRUE(answer->has_value());
  auto recs = stored();
  ASSERT_EQ(recs.size(), 2u) << "the two episodes sent; those never sent need no record";
  for (auto& [id, r] : recs) EXPECT_EQ(name_of_field(r.termination), "aborted");
  caf::anon_send(a, atoms::done::value);  // the node's late record
  run();
  EXPECT_EQ(stored().size(), 2u);
}

}  // namespace
