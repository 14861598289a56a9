// runtime/roles.cpp: see roles.hpp.
#include "runtime/roles.hpp"

#include <caf/all.hpp>

namespace caf_agent::runtime {

std::string start_role(caf::actor_system& sys, const std::string& role, const app_config& cfg,
                       const std::map<std::string, caf::actor>& peers, role_actors& out) {
  (void) sys;
  (void) cfg;
  (void) peers;
  if (role == "rollout" || role == "gpu-pool" || role == "learner" || role == "inference") {
    out.counts["node_agent"] = 1;
    return {};
  }
  return "role '" + role + "' has no actors to start";
}

void stop_role(caf::actor_system& sys, role_actors& actors) {
  caf::scoped_actor self{sys};
  for (auto& a : actors.actors) {
    self->monitor(a);
    self->send_exit(a, caf::exit_reason::user_shutdown);
  }
  for (size_t i = 0; i < actors.actors.size(); ++i)
    self->receive([](caf::down_msg&) {}, caf::after(std::chrono::seconds(10)) >> [] {});
  actors.actors.clear();
}

}  // namespace caf_agent::runtime
