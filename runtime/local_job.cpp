// runtime/local_job.cpp: see local_job.hpp.
#include "runtime/local_job.hpp"

#include <future>
#include <thread>

#include <caf/all.hpp>
#include <caf/io/all.hpp>

#include "actors/coordinator.hpp"
#include "actors/node_agent.hpp"
#include "base/log.hpp"
#include "messages/type_ids.hpp"
#include "runtime/caf_setup.hpp"
#include "runtime/connect.hpp"
#include "runtime/membership.hpp"
#include "runtime/roles.hpp"

namespace caf_agent::runtime {

namespace {

// Rationale: pools first, so the rollout role can wire to them.
const messages::node_role local_roles[] = {messages::node_role::gpu_pool, messages::node_role::inference,
                                           messages::node_role::learner, messages::node_role::rollout};

std::string describe_counts(const std::map<std::string, int64_t>& counts) {
  std::string out;
  for (auto& [k, v] : counts) out += (out.empty() ? "" : ", ") + k + "=" + std::to_string(v);
  return out;
}

int local_work(caf::actor_system& sys, const cli_options& opts, const app_config& cfg, exit_latch& latch) {
  auto id = make_node_id(messages::node_role::local);
  uint16_t port = 0;
  auto coord = start_coordinator(sys, cfg, id, port);
  if (!coord) return 2;
  log_info("local", "coordinator listening on " + cfg.cluster.listen_host + ":" + std::to_string(port) +
                        " (inspect with: caf-agent --role inspector " + "--coordinator " + cfg.cluster.listen_host +
                        ":" + std::to_string(port) + ")");
  std::map<std::string, caf::actor> peers{{"coordinator", coord}, {"local", coord}};
  std::vector<role_actors> started;
  std::vector<caf::actor> agents;
  int code = 0;
  for (auto role : local_roles) {
    role_actors actors;
    auto err = start_role(sys, role, cfg, peers, actors);
    caf::actor agent;
    if (err.empty())
      err = join_cluster(sys, coord, describe_node("local/" + make_node_id(role), role, actors.counts, actors.notes),
                         cfg.cluster.connect_timeout_ms, {}, agent);
    started.push_back(std::move(actors));
    if (!err.empty()) {
      log_error("caf-agent", to_string(role) + ": " + err);
      code = 2;
      break;
    }
    agents.push_back(agent);
    peers.insert(started.back().named.begin(), started.back().named.end());
    log_info("local", "started " + to_string(role) + ": " + describe_counts(started.back().counts));
  }
  if (code == 0) {
    log_info("local", "all roles started and registered (" + std::to_string(started.size()) + " roles + coordinator)");
    if (!opts.exit_after_start) code = run_local_main_job(sys, opts, cfg, peers, latch);
  }
  for (auto& a : agents) caf::anon_send(a, atoms::stop::value, std::string{"local job done"});
  for (auto it = started.rbegin(); it != started.rend(); ++it) stop_role(sys, *it);
  caf::anon_send_exit(coord, caf::exit_reason::user_shutdown);
  log_info("local", "shut down cleanly");
  return code;
}

}  // namespace

int run_local(const cli_options& opts, const app_config& cfg, exit_latch& latch) {
  return run_in_actor_system(cfg, [&](caf::actor_system& sys) { return local_work(sys, opts, cfg, latch); });
}

}  // namespace caf_agent::runtime
