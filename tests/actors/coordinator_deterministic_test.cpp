// tests/actors/coordinator_deterministic_test.cpp: the coordinator's service directory on
// CAF's test coordinator: a subscriber gets every service so far and each one announced later.
#include <gtest/gtest.h>

#include <memory>

#include <caf/all.hpp>

#include "actors/coordinator.hpp"
#include "messages/type_ids.hpp"
#include "tests/actors/deterministic.hpp"

using namespace caf_agent;
using namespace caf_agent::messages;

namespace {

caf::behavior announcements(caf::event_based_actor*, std::shared_ptr<std::vector<std::string>> seen) {
  return {
      [=](service_announce& a, caf::actor&) { seen->push_back(a.node_id + "/" + a.name); },
      [=](node_lost&) {},
  };
}

caf::behavior service(caf::event_based_actor*) {
  return {[=](atoms::ping) {}};
}

struct coordinator_test : caf_agent::testing::deterministic {};

// A rollout manager asks again when a pool's handle died (rollout_manager.hpp): the answer is
// every service once more, and a later announcement still reaches it once.
TEST_F(coordinator_test, a_subscriber_that_asks_again_gets_every_service_again_and_later_ones_once) {
  auto coord = spawn_coordinator(sys(), coordinator_options{"c"});
  auto seen = std::make_shared<std::vector<std::string>>();
  auto sub = sys().spawn(announcements, seen);
  caf::send_as(sys().spawn(service), coord, service_announce{"g1", "gpu_pool"});
  run();
  caf::send_as(sub, coord, atoms::subscribe::value);
  run();
  EXPECT_EQ(*seen, std::vector<std::string>{"g1/gpu_pool"});
  caf::send_as(sub, coord, atoms::subscribe::value);
  run();
  EXPECT_EQ(*seen, (std::vector<std::string>{"g1/gpu_pool", "g1/gpu_pool"}));
  caf::send_as(sys().spawn(service), coord, service_announce{"g2", "gpu_pool"});
  run();
  EXPECT_EQ(*seen, (std::vector<std::string>{"g1/gpu_pool", "g1/gpu_pool", "g2/gpu_pool"}));
  stop(coord);
}

}  // namespace
