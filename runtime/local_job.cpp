// runtime/local_job.cpp: see local_job.hpp.
#include "runtime/local_job.hpp"

#include <future>
#include <thread>

#include <caf/all.hpp>
#include <caf/io/all.hpp>

#include "actors/coordinator.hpp"
#include "actors/log.hpp"
#include "actors/node_agent.hpp"
#include "messages/type_ids.hpp"
#include "runtime/caf_setup.hpp"
#include "runtime/connect.hpp"
#include "runtime/roles.hpp"

namespace caf_agent::runtime {

namespace {

// Rationale: pools first, so the rollout role can wire to them.
const char* const local_roles[] = {"gpu-pool", "inference", "learner", "rollout"};

std::string describe_counts(const std::map<std::string, int64_t>& counts) {
  std::string out;
  for (auto& [k, v] : counts) out += (out.empty() ? "" : ", ") + k + "=" + std::to_string(v);
  return out;
}

/// Registers one in-process role with the coordinator; returns "" or an error.
std::string register_local(caf::actor_system& sys, caf::actor coord, const std::string& role,
                           const role_actors& actors, const app_config& cfg, caf::actor& agent) {
  messages::node_info info;
  info.node_id = "local/" + make_node_id(role);
  info.role = role;
  info.host = host_name();
  info.pid = static_cast<int32_t>(getpid());
  info.cores = static_cast<int32_t>(std::thread::hardware_concurrency());
  info.gpus = count_gpus();
  info.actor_counts = actors.counts;
  info.started_at_ms = unix_ms();
  auto done = std::make_shared<std::promise<std::string>>();
  auto once = std::make_shared<std::once_flag>();
  node_agent_events ev;
  ev.registered = [=] { std::call_once(*once, [&] { done->set_value(""); }); };
  ev.failed = [=](const std::string& why) { std::call_once(*once, [&] { done->set_value(why); }); };
  agent = spawn_node_agent(sys, coord, info, cfg.cluster.connect_timeout_ms, ev);
  return done->get_future().get();
}

}  // namespace

int run_local(const cli_options& opts, const app_config& cfg, exit_latch& latch) {
  caf::actor_system_config caf_cfg;
  configure_caf(caf_cfg, cfg);
  caf::actor_system sys{caf_cfg};
  auto id = make_node_id("local");
  auto coord = spawn_coordinator(
      sys, {id, cfg.cluster.heartbeat_interval_ms, cfg.cluster.node_timeout_ms});
  auto pub = publish_coordinator(sys, coord, cfg.cluster.listen_host, cfg.cluster.port);
  if (!pub.ok) {
    log_error("caf-agent", pub.error);
    caf::anon_send_exit(coord, caf::exit_reason::user_shutdown);
    return 2;
  }
  log_info("local", "coordinator listening on " + cfg.cluster.listen_host + ":" +
                        std::to_string(pub.port) + " (inspect with: caf-agent --role inspector " +
                        "--coordinator " + cfg.cluster.listen_host + ":" +
                        std::to_string(pub.port) + ")");
  std::map<std::string, caf::actor> peers{{"coordinator", coord}, {"local", coord}};
  std::vector<role_actors> started;
  std::vector<caf::actor> agents;
  int code = 0;
  for (auto* role : local_roles) {
    role_actors actors;
    auto err = start_role(sys, role, cfg, peers, actors);
    caf::actor agent;
    if (err.empty()) err = register_local(sys, coord, role, actors, cfg, agent);
    started.push_back(std::move(actors));
    if (!err.empty()) {
      log_error("caf-agent", std::string{role} + ": " + err);
      code = 2;
      break;
    }
    agents.push_back(agent);
    peers.insert(started.back().named.begin(), started.back().named.end());
    log_info("local", std::string{"started "} + role + ": " + describe_counts(started.back().counts));
  }
  if (code == 0) {
    log_info("local", "all roles started and registered (" + std::to_string(started.size()) +
                          " roles + coordinator)");
    if (!opts.exit_after_start) code = run_local_main_job(sys, opts, cfg, peers, latch);
  }
  for (auto& a : agents) caf::anon_send(a, atoms::stop::value, std::string{"local job done"});
  for (auto it = started.rbegin(); it != started.rend(); ++it) stop_role(sys, *it);
  caf::anon_send_exit(coord, caf::exit_reason::user_shutdown);
  log_info("local", "shut down cleanly");
  return code;
}

}  // namespace caf_agent::runtime
