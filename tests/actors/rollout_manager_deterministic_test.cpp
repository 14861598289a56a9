// tests/actors/rollout_manager_deterministic_test.cpp: the rollout manager on CAF's test
// coordinator, with its real episode actors, against a scripted driver, policy, tool router,
// GPU pools and coordinator written here: the admission limit, an episode actor that dies, a
// pool lost under an evaluation, a dead pool handle, and the manager drained at the end.
#include <gtest/gtest.h>

#include <memory>
#include <set>

#include <caf/all.hpp>

#include "actors/rollout_manager.hpp"
#include "messages/type_ids.hpp"
#include "tests/actors/deterministic.hpp"

using namespace caf_agent;
using namespace caf_agent::messages;
using caf_agent::testing::name_of_field;

namespace {

/// The driver's side: what the manager reports.
struct driver_log {
  std::vector<uint64_t> started;
  std::vector<trajectory_record> records;
  std::vector<rollout_capacity> capacity;
  size_t max_in_flight = 0;  // started and not recorded, at its highest
};

caf::behavior fake_driver(caf::event_based_actor*, std::shared_ptr<driver_log> d) {
  auto in_flight = [d] { return d->started.size() - d->records.size(); };
  return {
      [=](episode_started& s) {
        d->started.push_back(s.episode_id);
        d->max_in_flight = std::max(d->max_in_flight, in_flight());
      },
      [=](trajectory_record& r) { d->records.push_back(std::move(r)); },
      [=](rollout_capacity& c) { d->capacity.push_back(c); },
  };
}

/// A policy that holds every request until the test answers it: each episode ends its
/// first turn with a final answer when released.
struct held_policy {
  std::map<uint64_t, caf::typed_response_promise<completion>> waiting;  // by episode
  std::map<uint64_t, caf::actor> episodes;                              // the requesting actors
  std::set<uint64_t> seen;
};

caf::behavior fake_policy(caf::event_based_actor* self, std::shared_ptr<held_policy> p) {
  return {
      [=](generate_request& r) -> caf::result<completion> {
        p->seen.insert(r.episode_id);
        p->episodes[r.episode_id] = caf::actor_cast<caf::actor>(self->current_sender());
        return p->waiting.emplace(r.episode_id, self->make_response_promise<completion>()).first->second;
      },
      [=](atoms::done, uint64_t id) {  // the test releases episode id's turn: a final answer
        auto it = p->waiting.find(id);
        if (it == p->waiting.end()) return;
        completion c;
        c.text = "Done.";
        it->second.deliver(c);
        p->waiting.erase(it);
      },
  };
}

caf::behavior fake_tools(caf::event_based_actor*, std::shared_ptr<std::vector<uint64_t>> closed) {
  return {
      [=](atoms::open, uint64_t, task_spec&) { return std::string{}; },
      [=](atoms::lookup, uint64_t) { return caf::make_message(std::string{}, std::map<std::string, std::string>{}); },
      [=](tool_request& r) {
        return tool_response{r.call_id, "ok", tool_status::ok, 0, 1.0};
      },
      [=](atoms::close, uint64_t id) {
        closed->push_back(id);
        return true;
      },
  };
}

/// A GPU pool: reports credits to subscribers, answers at once, holds or bounces (test's choice).
struct pool_log {
  bool hold = false;
  /// Its handle is dead as the manager reaches it: each evaluation comes back as CAF bounces a
  /// request to a dead actor or a proxy whose connection closed (request_receiver_down).
  bool bounce = false;
  std::vector<eval_request> seen;
  std::vector<caf::typed_response_promise<eval_result>> held;
};

eval_result passed(const eval_request& r) {
  eval_result out;
  out.job_id = r.job_id;
  out.correct = true;
  out.reward = r.mode == eval_mode::final ? 3 : 0;
  return out;
}

caf::behavior fake_pool(caf::event_based_actor* self, std::shared_ptr<pool_log> p) {
  return {
      [=](atoms::subscribe) {
        self->send(caf::actor_cast<caf::actor>(self->current_sender()), pool_credits{8, 0, 0, 2});
      },
      [=](eval_request& r) -> caf::result<eval_result> {
        p->seen.push_back(r);
        if (p->bounce) return caf::make_error(caf::sec::request_receiver_down);
        if (p->hold) return p->held.emplace_back(self->make_response_promise<eval_result>());
        return passed(r);
      },
      [=](atoms::done) {  // the test releases the held answers
        for (size_t i = 0; i < p->held.size(); ++i) p->held[i].deliver(passed(p->seen[i]));
        p->held.clear();
      },
  };
}

struct manager_test : caf_agent::testing::deterministic {
  std::shared_ptr<driver_log> dl = std::make_shared<driver_log>();
  std::shared_ptr<held_policy> hp = std::make_shared<held_policy>();
  std::shared_ptr<std::vector<uint64_t>> closed = std::make_shared<std::vector<uint64_t>>();
  caf::actor driver = sys().spawn(fake_driver, dl);
  caf::actor policy = sys().spawn(fake_policy, hp);
  caf::actor tools = sys().spawn(fake_tools, closed);

  manager_test() { run(); }

  rollout_manager_options options(int max_concurrent) {
    rollout_manager_options o;
    o.rollout.max_concurrent_episodes = max_concurrent;
    o.node_id = "r1";
    o.env.policy = caf::actor_cast<policy_generator>(policy);
    o.env.tools = caf::actor_cast<tool_router_actor>(tools);
    o.env.system_text = "SKILL";
    return o;
  }

  void start(const caf::actor& manager, uint64_t id) {
    start_episode s;
    s.episode_id = id;
    s.task = task_spec{"t" + std::to_string(id % 2), "t", 1, "class Model: pass\n"};
    s.mode = caf_agent::messages::episode_mode::eval;
    s.max_turns = 5;
    caf::send_as(driver, manager, std::move(s));
  }

  /// Releases episode `id`'s held turn with a final answer.
  void finish(uint64_t id) {
    ASSERT_EQ(hp->waiting.count(id), 1u) << "episode " << id << " has no turn waiting";
    caf::anon_send(policy, atoms::done::value, id);
    run();
  }

  /// The manager's stats map (asked by a probe actor, answered within run()).
  std::map<std::string, double> stats(const caf::actor& manager) {
    auto out = std::make_shared<std::map<std::string, double>>();
    sys().spawn([=](caf::event_based_actor* probe) {
      probe->request(manager, caf::infinite, atoms::stats::value).then([=](std::map<std::string, double>& m) {
        *out = std::move(m);
      });
    });
    run();
    return *out;
  }
};

TEST_F(manager_test, never_more_episodes_in_flight_than_the_limit) {
  auto pl = std::make_shared<pool_log>();
  auto opts = options(2);
  opts.pool = pool_of(sys().spawn(fake_pool, pl));
  auto m = caf::actor_cast<caf::actor>(spawn_rollout_manager(sys(), opts));
  run();
  for (uint64_t id = 1; id <= 5; ++id) start(m, id);
  run();
  EXPECT_EQ(dl->started, (std::vector<uint64_t>{1, 2}));
  EXPECT_EQ(hp->seen, (std::set<uint64_t>{1, 2})) << "only the admitted episodes run";
  ASSERT_FALSE(dl->capacity.empty());
  EXPECT_EQ(dl->capacity.back().free_slots, 0);
  EXPECT_EQ(dl->capacity.back().limit, 2);
  auto s = stats(m);
  EXPECT_EQ(s["running"], 2);
  EXPECT_EQ(s["waiting"], 3);
  // Each record frees one place, taken by the next episode in order.
  finish(2);
  EXPECT_EQ(dl->records.size(), 1u);
  EXPECT_EQ(dl->records[0].episode_id, 2u);
  EXPECT_EQ(name_of_field(dl->records[0].termination), "finished");
  EXPECT_EQ(dl->records[0].reward, 3);
  EXPECT_EQ(dl->started, (std::vector<uint64_t>{1, 2, 3}));
  for (uint64_t id : {1, 3, 4, 5}) finish(id);
  EXPECT_EQ(dl->records.size(), 5u);
  EXPECT_EQ(dl->max_in_flight, 2u) << "the limit held at every step";
  for (auto& c : dl->capacity) EXPECT_LE(c.running, 2);
  EXPECT_EQ(pl->seen.size(), 5u) << "one final evaluation per episode, through the manager";
  s = stats(m);
  EXPECT_EQ(s["running"], 0);
  EXPECT_EQ(s["waiting"], 0);
  EXPECT_EQ(s["evals_in_flight"], 0);
  EXPECT_EQ(s["evals_held"], 0);
  EXPECT_EQ(dl->capacity.back().free_slots, 2);
}

TEST_F(manager_test, the_kv_cache_bounds_episodes_at_once_by_the_contexts_episodes_reach) {
  auto pl = std::make_shared<pool_log>();
  auto opts = options(8);
  opts.pool = pool_of(sys().spawn(fake_pool, pl));
  opts.rollout.kv_admission = true;
  opts.kv_capacity_tokens = 4000;  // an engine holding 4,000 tokens of keys
  opts.kv_initial_context = 2000;  // its context limit: the cautious start
  auto m = caf::actor_cast<caf::actor>(spawn_rollout_manager(sys(), opts));
  run();
  for (uint64_t id = 1; id <= 5; ++id) start(m, id);
  run();
  EXPECT_EQ(dl->started, (std::vector<uint64_t>{1, 2})) << "4,000 / 2,000: two conversations fit";
  ASSERT_FALSE(dl->capacity.empty());
  EXPECT_EQ(dl->capacity.back().limit, 2);
  // Episodes (of another node's shape: records arrive as an episode sends them) that ended
  // at 1,000 tokens: four fit, so two more are admitted.
  for (uint64_t id = 100; id < 104; ++id) {
    trajectory_record r;
    r.episode_id = id;
    r.tokens.assign(1000, 7);
    caf::anon_send(m, std::move(r));
  }
  run();
  EXPECT_EQ(dl->started, (std::vector<uint64_t>{1, 2, 3, 4}));
  EXPECT_EQ(dl->capacity.back().limit, 4);
  for (uint64_t id : {1, 2, 3, 4}) finish(id);
  EXPECT_EQ(dl->started.back(), 5u);
}

// rollout.kv_admission off (the default): the engine's KV storage is known but bounds nothing.
TEST_F(manager_test, without_kv_admission_the_kv_cache_bounds_nothing) {
  auto pl = std::make_shared<pool_log>();
  auto opts = options(8);
  opts.pool = pool_of(sys().spawn(fake_pool, pl));
  opts.kv_capacity_tokens = 4000;
  opts.kv_initial_context = 2000;
  auto m = caf::actor_cast<caf::actor>(spawn_rollout_manager(sys(), opts));
  run();
  for (uint64_t id = 1; id <= 5; ++id) start(m, id);
  run();
  EXPECT_EQ(dl->started, (std::vector<uint64_t>{1, 2, 3, 4, 5}));
  ASSERT_FALSE(dl->capacity.empty());
  EXPECT_EQ(dl->capacity.back().limit, 8);
}

TEST_F(manager_test, no_admission_while_no_pool_admits_work) {
  auto opts = options(2);  // no pool known yet
  auto m = caf::actor_cast<caf::actor>(spawn_rollout_manager(sys(), opts));
  run();
  start(m, 1);
  run();
  EXPECT_TRUE(dl->started.empty()) << "no episode starts without a pool to judge it";
  auto pl = std::make_shared<pool_log>();
  caf::anon_send(m, service_announce{"g1", "gpu_pool"}, sys().spawn(fake_pool, pl));
  run();
  EXPECT_EQ(dl->started, (std::vector<uint64_t>{1}));
}

TEST_F(manager_test, an_episode_actor_that_dies_still_ends_in_one_record) {
  auto pl = std::make_shared<pool_log>();
  auto opts = options(1);
  opts.pool = pool_of(sys().spawn(fake_pool, pl));
  auto m = caf::actor_cast<caf::actor>(spawn_rollout_manager(sys(), opts));
  run();
  start(m, 1);
  start(m, 2);
  run();
  ASSERT_EQ(hp->episodes.count(1), 1u);
  self->monitor(m);
  // What an exception escaping a handler does to the episode.
  stop(hp->episodes[1], caf::exit_reason::unhandled_exception);
  ASSERT_EQ(dl->records.size(), 1u);
  EXPECT_EQ(dl->records[0].episode_id, 1u);
  EXPECT_EQ(name_of_field(dl->records[0].termination), "aborted");
  EXPECT_NE(dl->records[0].abort_reason.find("episode actor died"), std::string::npos) << dl->records[0].abort_reason;
  EXPECT_EQ(dl->records[0].task_id, "t1");
  EXPECT_EQ(*closed, (std::vector<uint64_t>{1})) << "its sandbox is closed";
  EXPECT_FALSE(self_receive<caf::down_msg>().has_value()) << "the manager survives its episode";
  EXPECT_EQ(dl->started, (std::vector<uint64_t>{1, 2})) << "its place goes to the next episode";
  finish(2);
  ASSERT_EQ(dl->records.size(), 2u);
  EXPECT_EQ(name_of_field(dl->records[1].termination), "finished");
  fire_timers();
  EXPECT_EQ(dl->records.size(), 2u);
}

TEST_F(manager_test, a_shutdown_still_ends_the_manager_and_its_episodes) {
  auto pl = std::make_shared<pool_log>();
  auto opts = options(1);
  opts.pool = pool_of(sys().spawn(fake_pool, pl));
  auto m = caf::actor_cast<caf::actor>(spawn_rollout_manager(sys(), opts));
  run();
  start(m, 1);
  run();
  self->monitor(m);
  self->monitor(hp->episodes[1]);
  stop(m);
  EXPECT_TRUE(self_receive<caf::down_msg>().has_value());
  EXPECT_TRUE(self_receive<caf::down_msg>().has_value()) << "the link takes the episode too";
}

/// The pool's node is lost while it holds the episode's final evaluation: the job goes to
/// the other pool, the lost pool's late answer is dropped, one record.
void lost_pool_moves_the_job(manager_test& t, bool by_node_lost) {
  auto a = std::make_shared<pool_log>();
  auto b = std::make_shared<pool_log>();
  a->hold = true;
  auto m = caf::actor_cast<caf::actor>(spawn_rollout_manager(t.sys(), t.options(1)));
  auto pool_a = t.sys().spawn(fake_pool, a);
  t.run();
  caf::anon_send(m, service_announce{"ga", "gpu_pool"}, pool_a);
  t.run();
  t.start(m, 1);
  t.run();
  t.finish(1);
  ASSERT_EQ(a->seen.size(), 1u);
  EXPECT_TRUE(t.dl->records.empty());
  caf::anon_send(m, service_announce{"gb", "gpu_pool"}, t.sys().spawn(fake_pool, b));
  t.run();
  if (by_node_lost) {
    caf::anon_send(m, node_lost{"ga", "heartbeats stopped"});
    t.run();
  } else {
    t.stop(pool_a, caf::exit_reason::kill);
  }
  ASSERT_EQ(b->seen.size(), 1u) << "the job moved";
  EXPECT_EQ(b->seen[0].job_id, a->seen[0].job_id);
  ASSERT_EQ(t.dl->records.size(), 1u);
  EXPECT_EQ(name_of_field(t.dl->records[0].termination), "finished");
  EXPECT_EQ(t.dl->records[0].reward, 3);
  if (by_node_lost) {  // the lost pool answers after all: dropped
    caf::anon_send(pool_a, atoms::done::value);
    t.run();
  }
  t.fire_timers();
  EXPECT_EQ(t.dl->records.size(), 1u);
  auto s = t.stats(m);  // drained
  EXPECT_EQ(s["running"], 0);
  EXPECT_EQ(s["waiting"], 0);
  EXPECT_EQ(s["evals_in_flight"], 0);
  EXPECT_EQ(s["evals_held"], 0);
  EXPECT_EQ(s["pools"], 1);
  EXPECT_EQ(s["evals@gb"], 1);
  EXPECT_EQ(s.count("evals@ga"), 0u);
}

/// The coordinator's side of pool discovery: every subscribe gets the pools of the moment.
struct pool_directory {
  std::vector<std::pair<std::string, caf::actor>> pools;  // node, handle
  int subscribes = 0;
};

caf::behavior fake_coordinator(caf::event_based_actor* self, std::shared_ptr<pool_directory> d) {
  return {
      [=](service_announce&) {},  // the manager's own announcement
      [=](atoms::subscribe) {
        ++d->subscribes;
        auto to = caf::actor_cast<caf::actor>(self->current_sender());
        for (auto& [node, handle] : d->pools) self->send(to, service_announce{node, "gpu_pool"}, handle);
      },
  };
}

// The race of a frozen node that rejoins: its pools' connections closed, and its requests
// reach the dead proxies before their down messages reach the manager. Each bounced request
// used to count as a failed evaluation, so two dead pools aborted the episode.
TEST_F(manager_test, a_dead_pool_handle_costs_its_job_no_attempt_and_the_pools_are_looked_up_again) {
  auto a = std::make_shared<pool_log>();
  auto b = std::make_shared<pool_log>();
  auto c = std::make_shared<pool_log>();
  auto dir = std::make_shared<pool_directory>();
  a->bounce = b->bounce = true;
  dir->pools = {{"ga", sys().spawn(fake_pool, a)}, {"gb", sys().spawn(fake_pool, b)}};
  auto opts = options(1);
  opts.coordinator = sys().spawn(fake_coordinator, dir);
  auto m = caf::actor_cast<caf::actor>(spawn_rollout_manager(sys(), opts));
  run();
  ASSERT_EQ(stats(m)["pools"], 2);
  start(m, 1);
  run();
  finish(1);
  ASSERT_EQ(a->seen.size(), 1u);
  ASSERT_EQ(b->seen.size(), 1u) << "the job moved to the other pool";
  EXPECT_TRUE(dl->records.empty()) << "a bounced request is no failed evaluation: " << dl->records[0].abort_reason;
  auto s = stats(m);
  EXPECT_EQ(s["pools"], 0);
  EXPECT_EQ(s["evals_held"], 1) << "held until a pool is there";
  EXPECT_EQ(dir->subscribes, 1);
  // A second later the manager asks the coordinator again (once for both drops); the pool now
  // announced takes the held job.
  dir->pools = {{"gc", sys().spawn(fake_pool, c)}};
  advance(std::chrono::seconds(1));
  EXPECT_EQ(dir->subscribes, 2);
  ASSERT_EQ(c->seen.size(), 1u);
  EXPECT_EQ(c->seen[0].job_id, a->seen[0].job_id);
  ASSERT_EQ(dl->records.size(), 1u);
  EXPECT_EQ(name_of_field(dl->records[0].termination), "finished");
  EXPECT_EQ(dl->records[0].reward, 3);
  s = stats(m);
  EXPECT_EQ(s["pools"], 1);
  EXPECT_EQ(s["evals_in_flight"], 0);
  EXPECT_EQ(s["evals@gc"], 1);
}

// A pool that dies again after each lookup (a pool actor that exited on a node still in the
// cluster) is asked for after 1, 2, 4 s, not every second, while its job waits.
TEST_F(manager_test, a_pool_that_stays_dead_is_looked_up_less_and_less_often) {
  auto a = std::make_shared<pool_log>();
  auto c = std::make_shared<pool_log>();
  auto dir = std::make_shared<pool_directory>();
  a->bounce = true;
  dir->pools = {{"ga", sys().spawn(fake_pool, a)}};
  auto opts = options(1);
  opts.coordinator = sys().spawn(fake_coordinator, dir);
  auto m = caf::actor_cast<caf::actor>(spawn_rollout_manager(sys(), opts));
  run();
  start(m, 1);
  run();
  finish(1);
  ASSERT_EQ(a->seen.size(), 1u);
  EXPECT_EQ(dir->subscribes, 1);
  advance(std::chrono::seconds(1));
  EXPECT_EQ(dir->subscribes, 2);
  EXPECT_EQ(a->seen.size(), 2u) << "found again, tried again";
  advance(std::chrono::seconds(1));
  EXPECT_EQ(dir->subscribes, 2) << "the second lookup waits 2 s";
  advance(std::chrono::seconds(1));
  EXPECT_EQ(dir->subscribes, 3);
  EXPECT_EQ(a->seen.size(), 3u);
  dir->pools = {{"gc", sys().spawn(fake_pool, c)}};
  advance(std::chrono::seconds(3));
  EXPECT_EQ(dir->subscribes, 3) << "the third waits 4 s";
  advance(std::chrono::seconds(1));
  EXPECT_EQ(dir->subscribes, 4);
  ASSERT_EQ(c->seen.size(), 1u);
  ASSERT_EQ(dl->records.size(), 1u);
  EXPECT_EQ(name_of_field(dl->records[0].termination), "finished");
}

TEST_F(manager_test, a_lost_pool_node_hands_its_evaluation_to_another_pool) {
  lost_pool_moves_the_job(*this, true);
}

TEST_F(manager_test, a_pool_actor_that_exits_hands_its_evaluation_to_another_pool) {
  lost_pool_moves_the_job(*this, false);
}

}  // namespace
