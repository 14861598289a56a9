// actors/node_agent.cpp: see node_agent.hpp.
#include "actors/node_agent.hpp"

#include <chrono>

#include <caf/all.hpp>

#include "actors/observed_actor.hpp"
#include "base/log.hpp"
#include "messages/type_ids.hpp"

namespace caf_agent {

namespace {

using namespace messages;

struct node_agent_state {
  caf::actor coordinator;
  node_info info;
  node_agent_events events;
  int64_t heartbeat_ms = 500;
  bool registered = false;
  bool leaving = false;
  static inline const char* name = "node_agent";
};

using agent_actor = observed_actor<node_agent_state>;

void beat(agent_actor* self) {
  auto& st = self->state;
  node_heartbeat hb{st.info.node_id, {}, unix_ms()};
  if (st.events.counters) hb.counters = st.events.counters();
  // The process's actors, episodes and pools (observe/registry.hpp): the coordinator aggregates.
  if (observe::metrics_registry::process().enabled()) hb.metrics = observe::metrics_registry::process().snapshot();
  self->send(st.coordinator, std::move(hb));
  self->delayed_send(self, std::chrono::milliseconds(st.heartbeat_ms), atoms::tick::value);
}

void start_registration(agent_actor* self, int64_t timeout_ms) {
  auto& st = self->state;
  self->request(st.coordinator, std::chrono::milliseconds(timeout_ms), register_node{protocol_version, st.info})
      .then(
          [=](register_ack& ack) {
            auto& s = self->state;
            if (!ack.accepted) {
              if (s.events.failed) s.events.failed("coordinator refused registration: " + ack.reason);
              self->quit();
              return;
            }
            s.registered = true;
            if (ack.heartbeat_interval_ms > 0) s.heartbeat_ms = ack.heartbeat_interval_ms;
            if (s.events.registered) s.events.registered();
            beat(self);
          },
          [=](caf::error& err) {
            auto& s = self->state;
            if (s.events.failed)
              s.events.failed("registration with the coordinator failed: " + self->system().render(err));
            self->quit();
          });
}

caf::behavior node_agent(agent_actor* self, caf::actor coordinator, node_info info, int64_t register_timeout_ms,
                         node_agent_events events) {
  auto& st = self->state;
  st.coordinator = coordinator;
  st.info = std::move(info);
  st.events = std::move(events);
  self->monitor(coordinator);
  self->set_down_handler([=](caf::down_msg& dm) {
    auto& s = self->state;
    if (dm.source != s.coordinator.address() || s.leaving) return;
    if (s.events.failed)
      s.events.failed("lost the coordinator: " +
                      (dm.reason ? self->system().render(dm.reason) : std::string{"exited"}));
    self->quit();
  });
  start_registration(self, register_timeout_ms);
  return {
      [=](atoms::tick) {
        if (!self->state.leaving) beat(self);
      },
      [=](atoms::stop, const std::string& reason) {
        auto& s = self->state;
        s.leaving = true;
        if (s.registered) self->send(s.coordinator, leave_cluster{s.info.node_id, reason});
        self->quit();
      },
  };
}

}  // namespace

caf::actor spawn_node_agent(caf::actor_system& sys, caf::actor coordinator, node_info info, int64_t register_timeout_ms,
                            node_agent_events events) {
  return sys.spawn(node_agent, std::move(coordinator), std::move(info), register_timeout_ms, std::move(events));
}

}  // namespace caf_agent
