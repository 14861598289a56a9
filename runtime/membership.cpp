// runtime/membership.cpp: see membership.hpp.
#include "runtime/membership.hpp"

#include <future>
#include <mutex>
#include <thread>

#include <unistd.h>

#include <caf/all.hpp>

#include "actors/node_agent.hpp"
#include "base/log.hpp"
#include "messages/type_ids.hpp"
#include "runtime/process.hpp"

namespace caf_agent::runtime {

messages::node_info describe_node(const std::string& node_id, messages::node_role role,
                                  const std::map<std::string, int64_t>& actor_counts,
                                  const std::vector<std::string>& notes) {
  messages::node_info info;
  info.node_id = node_id;
  info.role = role;
  info.host = host_name();
  info.pid = static_cast<int32_t>(getpid());
  info.cores = static_cast<int32_t>(std::thread::hardware_concurrency());
  info.gpus = count_gpus();
  info.actor_counts = actor_counts;
  info.started_at_ms = unix_ms();
  info.notes = notes;
  return info;
}

std::string join_cluster(caf::actor_system& sys, caf::actor coordinator, messages::node_info info, int64_t timeout_ms,
                         std::function<void(const std::string&)> on_lost, caf::actor& agent) {
  auto joined = std::make_shared<std::promise<std::string>>();
  auto once = std::make_shared<std::once_flag>();
  node_agent_events ev;
  ev.registered = [=] { std::call_once(*once, [&] { joined->set_value(""); }); };
  ev.failed = [=](const std::string& why) {
    bool first = false;
    std::call_once(*once, [&] {
      joined->set_value(why);
      first = true;
    });
    if (!first && on_lost) on_lost(why);  // lost the coordinator after joining
  };
  agent = spawn_node_agent(sys, coordinator, std::move(info), timeout_ms, ev);
  return joined->get_future().get();
}

void leave_cluster(caf::actor_system& sys, caf::actor agent, const std::string& reason) {
  if (!agent) return;
  caf::scoped_actor self{sys};
  self->monitor(agent);
  self->send(agent, atoms::stop::value, reason);
  self->receive([](caf::down_msg&) {}, caf::after(std::chrono::seconds(5)) >> [] {});
  // Rationale: the leave message travels asynchronously over BASP; give it a
  // moment to be written before the middleman closes the connection.
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
}

}  // namespace caf_agent::runtime
