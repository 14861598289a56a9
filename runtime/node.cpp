// runtime/node.cpp: see node.hpp.
#include "runtime/node.hpp"

#include <future>
#include <iostream>
#include <thread>

#include <caf/all.hpp>
#include <caf/io/all.hpp>

#include "actors/coordinator.hpp"
#include "actors/log.hpp"
#include "actors/node_agent.hpp"
#include "messages/type_ids.hpp"
#include "runtime/caf_setup.hpp"
#include "runtime/connect.hpp"
#include "runtime/local_job.hpp"
#include "runtime/membership.hpp"
#include "runtime/process.hpp"
#include "runtime/roles.hpp"

namespace caf_agent::runtime {

namespace {

int run_coordinator(const cli_options& opts, const app_config& cfg, exit_latch& latch) {
  bool drive = opts.episodes.has_value() || opts.eval;
  caf::actor_system_config caf_cfg;
  configure_caf(caf_cfg, cfg);
  caf::actor_system sys{caf_cfg};
  auto id = make_node_id("coordinator");
  uint16_t port = 0;
  auto coord = start_coordinator(sys, cfg, id, port);
  if (!coord) return 2;
  log_info("coordinator", "listening on " + cfg.cluster.listen_host + ":" +
                              std::to_string(port) + " as " + id);
  if (drive) {
    auto code = run_episodes(sys, opts, cfg, coord, latch);
    caf::anon_send_exit(coord, caf::exit_reason::user_shutdown);
    return code;
  }
  latch.wait();
  log_info("coordinator", "shutting down (" + latch.reason() + ")");
  caf::anon_send_exit(coord, caf::exit_reason::user_shutdown);
  return latch.exit_code();
}

int run_member(const std::string& role, const app_config& cfg, exit_latch& latch) {
  caf::actor_system_config caf_cfg;
  configure_caf(caf_cfg, cfg);
  caf::actor_system sys{caf_cfg};
  auto coord = connect_coordinator(sys, cfg.cluster.coordinator, cfg.cluster.connect_timeout_ms);
  if (!coord.ok) {
    log_error("caf-agent", coord.error);
    return 2;
  }
  role_actors actors;
  if (auto err = start_role(sys, role, cfg, {{"coordinator", coord.handle}}, actors);
      !err.empty()) {
    log_error("caf-agent", err);
    stop_role(sys, actors);
    return 2;
  }
  auto node_id = make_node_id(role);
  caf::actor agent;
  auto on_lost = [&latch](const std::string& why) { latch.trigger(3, why); };
  if (auto err = join_cluster(sys, coord.handle, describe_node(node_id, role, actors.counts, actors.notes),
                              cfg.cluster.connect_timeout_ms, on_lost, agent);
      !err.empty()) {
    log_error("caf-agent", err);
    stop_role(sys, actors);
    return 2;
  }
  log_info(role, "joined " + cfg.cluster.coordinator + " as " + node_id);
  latch.wait();
  log_info(role, "shutting down (" + latch.reason() + ")");
  leave_cluster(sys, agent, latch.reason());
  stop_role(sys, actors);
  return latch.exit_code();
}

}  // namespace

int run_node(const cli_options& opts, const app_config& cfg) {
  exit_latch latch;
  install_signal_latch(latch);
  if (opts.role == "coordinator") return run_coordinator(opts, cfg, latch);
  if (opts.role == "local") return run_local(opts, cfg, latch);
  return run_member(opts.role, cfg, latch);
}

}  // namespace caf_agent::runtime
