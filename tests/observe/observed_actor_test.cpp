// tests/observe/observed_actor_test.cpp: an observed actor counts what it handles.
#include <chrono>
#include <thread>

#include <gtest/gtest.h>

#include <caf/all.hpp>

#include "actors/observed_actor.hpp"
#include "messages/type_ids.hpp"

using namespace caf_agent;

namespace {

struct probe_state {
  int handled = 0;
  static inline const char* name = "probe";
};

caf::behavior probe(observed_actor<probe_state>* self) {
  return {
      [=](messages::get_view& v) -> std::string {
        ++self->state.handled;
        return to_string(v.what);
      },
      [=](atoms::ping) -> int32_t { return ++self->state.handled; },
  };
}

const messages::actor_kind_metrics* kind(const messages::node_metrics& m, const std::string& name) {
  for (auto& k : m.kinds)
    if (k.kind == name) return &k;
  return nullptr;
}

// The actor counts a message after its handler returns, and the handler's reply may reach
// the requester first: wait (bounded) until `n` messages are counted.
messages::node_metrics snapshot_after(observe::metrics_registry& reg, int64_t n) {
  auto snap = reg.snapshot();
  for (int i = 0; i < 500; ++i) {
    auto* k = kind(snap, "probe");
    if (k && k->processed >= n) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    snap = reg.snapshot();
  }
  return snap;
}

}  // namespace

TEST(ObservedActor, CountsMessagesByTypeAndExits) {
  caf::actor_system_config cfg;
  cfg.add_message_types<caf::id_block::caf_agent>();
  caf::actor_system sys{cfg};
  auto& reg = observe::metrics_registry::process();
  reg.reset();
  auto a = sys.spawn(probe);
  {
    caf::scoped_actor self{sys};
    for (int i = 0; i < 3; ++i)
      self->request(a, std::chrono::seconds(5), messages::get_view{messages::view_kind::nodes, ""})
          .receive([](std::string&) {}, [](caf::error&) {});
    self->request(a, std::chrono::seconds(5), atoms::ping::value).receive([](int32_t) {}, [](caf::error&) {});
  }
  auto snap = snapshot_after(reg, 4);
  auto* k = kind(snap, "probe");
  ASSERT_NE(k, nullptr);
  EXPECT_EQ(k->running, 1);
  ASSERT_EQ(k->processed, 4);
  ASSERT_TRUE(k->handled.count("get_view") && k->handled.count("ping"));
  EXPECT_EQ(k->handled.at("get_view"), 3);
  EXPECT_EQ(k->handled.at("ping"), 1);
  caf::anon_send_exit(a, caf::exit_reason::user_shutdown);
  a = nullptr;
  for (int i = 0; i < 100 && kind(reg.snapshot(), "probe")->running != 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  snap = reg.snapshot();
  EXPECT_EQ(kind(snap, "probe")->running, 0);
  EXPECT_EQ(kind(snap, "probe")->errors, 0);  // a shutdown is no error
  // Kept after the exit (the exit message itself is one more handled message).
  ASSERT_TRUE(kind(snap, "probe")->handled.count("get_view"));
  EXPECT_EQ(kind(snap, "probe")->handled.at("get_view"), 3);
  EXPECT_EQ(kind(snap, "probe")->processed, 5);
}
