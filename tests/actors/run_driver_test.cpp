// tests/actors/run_driver_test.cpp: the run driver against fake rollout managers that
// answer every start with a capacity report computed on arrival (so reports lag behind
// the driver's sends, as they do over a network), and that lose episodes with a node.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <set>
#include <thread>

#include <caf/all.hpp>

#include "actors/run_driver.hpp"
#include "messages/type_ids.hpp"
#include "rollout/trajectory_store.hpp"

using namespace caf_agent;
using namespace caf_agent::messages;
using namespace std::chrono_literals;

namespace {

struct fake_state {
  std::string node;
  int32_t limit = 1;
  bool notify_start = false;  // sends episode_started for every start
  std::set<uint64_t> held;
  std::vector<uint64_t> received;
  size_t max_held = 0;
  caf::actor driver;
  static inline const char* name = "fake_rollout_manager";
};

caf::behavior fake_manager(caf::stateful_actor<fake_state>* self, std::string node, int32_t limit, bool notify_start) {
  self->state.node = node;
  self->state.limit = limit;
  self->state.notify_start = notify_start;
  return {
      [=](start_episode& s) {
        auto& st = self->state;
        st.driver = caf::actor_cast<caf::actor>(self->current_sender());
        st.held.insert(s.episode_id);
        st.received.push_back(s.episode_id);
        st.max_held = std::max(st.max_held, st.held.size());
        if (st.notify_start) self->send(st.driver, episode_started{st.node, s.episode_id});
        int32_t free = st.limit - static_cast<int32_t>(st.held.size());
        self->send(st.driver, rollout_capacity{st.node, std::max(0, free), 0, st.limit});
      },
      [=](atoms::done) {  // finishes its lowest episode
        auto& st = self->state;
        if (st.held.empty()) return;
        trajectory_record rec;
        rec.episode_id = *st.held.begin();
        rec.node_id = st.node;
        rec.termination = caf_agent::messages::episode_end::finished;
        st.held.erase(st.held.begin());
        self->send(st.driver, std::move(rec));
        int32_t free = st.limit - static_cast<int32_t>(st.held.size());
        self->send(st.driver, rollout_capacity{st.node, free, 0, st.limit});
      },
      [=](atoms::stats) -> std::map<std::string, double> {
        auto& st = self->state;
        double first = st.received.empty() ? 0 : double(st.received.front());
        return {{"held", double(st.held.size())},
                {"max_held", double(st.max_held)},
                {"received", double(st.received.size())},
                {"first", first}};
      },
  };
}

struct driver_fixture : ::testing::Test {
  caf::actor_system_config cfg;
  std::unique_ptr<caf::actor_system> sys;
  std::filesystem::path dir;
  void SetUp() override {
    cfg.add_message_types<caf::id_block::caf_agent>();
    sys = std::make_unique<caf::actor_system>(cfg);
    dir = std::filesystem::temp_directory_path() / ("caf_agent_driver_test_" + std::to_string(::getpid()) + "_" +
                                                    ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir);
  }
  void TearDown() override { std::filesystem::remove_all(dir); }

  caf::actor driver(int episodes, std::string& error) {
    run_driver_options o;
    o.tasks = {task_spec{"t1", "t1", 1, "# model"}};
    o.episodes = episodes;
    o.store_dir = dir.string();
    return spawn_run_driver(*sys, o, error);
  }

  std::map<std::string, double> stats(const caf::actor& a) {
    caf::scoped_actor self{*sys};
    std::map<std::string, double> out;
    self->request(a, 5s, atoms::stats::value)
        .receive([&](std::map<std::string, double>& m) { out = std::move(m); },
                 [&](caf::error& e) { ADD_FAILURE() << sys->render(e); });
    return out;
  }
};

}  // namespace

TEST_F(driver_fixture, StaleCapacityReportsNeverOverfillANode) {
  std::string error;
  auto d = driver(40, error);
  ASSERT_TRUE(d) << error;
  auto a = sys->spawn(fake_manager, std::string{"a"}, 4, false);
  caf::anon_send(d, service_announce{"a", "rollout"}, a);
  std::this_thread::sleep_for(300ms);
  auto s = stats(a);
  EXPECT_EQ(s["max_held"], 4) << "the driver sent more than the node's limit";
  EXPECT_EQ(s["received"], 4);
  // Each record frees exactly one place.
  for (int i = 0; i < 3; ++i) caf::anon_send(a, atoms::done::value);
  std::this_thread::sleep_for(300ms);
  s = stats(a);
  EXPECT_EQ(s["max_held"], 4);
  EXPECT_EQ(s["received"], 7);
  caf::anon_send_exit(d, caf::exit_reason::user_shutdown);
  caf::anon_send_exit(a, caf::exit_reason::user_shutdown);
}

TEST_F(driver_fixture, UnstartedEpisodesOfALostNodeRunElsewhere) {
  std::string error;
  auto d = driver(3, error);
  ASSERT_TRUE(d) << error;
  auto a = sys->spawn(fake_manager, std::string{"a"}, 2, false);  // queues, never starts
  caf::anon_send(d, service_announce{"a", "rollout"}, a);
  std::this_thread::sleep_for(200ms);
  ASSERT_EQ(stats(a)["received"], 2);
  auto b = sys->spawn(fake_manager, std::string{"b"}, 8, true);
  caf::anon_send(d, service_announce{"b", "rollout"}, b);
  std::this_thread::sleep_for(200ms);
  EXPECT_EQ(stats(b)["received"], 1);  // episode 3
  caf::anon_send(d, node_lost{"a", "test"});
  std::this_thread::sleep_for(200ms);
  auto sb = stats(b);
  EXPECT_EQ(sb["received"], 3) << "the lost node's unstarted episodes were not re-sent";
  auto sd = stats(d);
  EXPECT_EQ(sd["aborted"], 0);
  // b started all three: losing b records them as aborted, once each.
  caf::anon_send(d, node_lost{"b", "test"});
  std::this_thread::sleep_for(200ms);
  sd = stats(d);
  EXPECT_EQ(sd["aborted"], 3);
  EXPECT_EQ(sd["recorded"], 3);
  caf::anon_send_exit(d, caf::exit_reason::user_shutdown);
  caf::anon_send_exit(a, caf::exit_reason::user_shutdown);
  caf::anon_send_exit(b, caf::exit_reason::user_shutdown);
  std::this_thread::sleep_for(100ms);
  auto records = rollout::trajectory_store::read_all(dir);
  ASSERT_EQ(records.size(), 3u);
  for (auto& r : records) {
    EXPECT_EQ(caf_agent::messages::name_of(r.termination), "aborted");
    EXPECT_NE(r.abort_reason.find("lost"), std::string::npos) << r.abort_reason;
  }
}
