// runtime/node.cpp: see node.hpp.
#include "runtime/node.hpp"

#include <atomic>
#include <future>
#include <iostream>
#include <memory>
#include <mutex>
#include <thread>

#include <caf/all.hpp>
#include <caf/io/all.hpp>

#include "actors/coordinator.hpp"
#include "actors/node_agent.hpp"
#include "base/log.hpp"
#include "messages/type_ids.hpp"
#include "runtime/caf_setup.hpp"
#include "runtime/connect.hpp"
#include "runtime/local_job.hpp"
#include "runtime/membership.hpp"
#include "runtime/process.hpp"
#include "runtime/roles.hpp"
#include "runtime/train_job.hpp"
#include "sandbox/node_reaper.hpp"

namespace caf_agent::runtime {

namespace {

int coordinator_work(caf::actor_system& sys, const cli_options& opts, const app_config& cfg, exit_latch& latch) {
  bool drive = opts.episodes.has_value() || opts.eval || opts.resume.has_value();
  auto id = make_node_id(messages::node_role::coordinator);
  uint16_t port = 0;
  auto coord = start_coordinator(sys, cfg, id, port);
  if (!coord) return 2;
  log_info("coordinator", "listening on " + cfg.cluster.listen_host + ":" + std::to_string(port) + " as " + id);
  if (opts.train) {
    auto code = run_training(sys, cfg, coord, latch, false);
    caf::anon_send_exit(coord, caf::exit_reason::user_shutdown);
    return code;
  }
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

int run_coordinator(const cli_options& opts, const app_config& cfg, exit_latch& latch) {
  return run_in_actor_system(cfg, [&](caf::actor_system& sys) { return coordinator_work(sys, opts, cfg, latch); });
}

/// Connects to the coordinator, retrying a refused connection until `deadline`: a first
/// join waits `cluster.connect_timeout_ms` for a coordinator that is still starting (nodes
/// and the coordinator are usually launched together), a rejoin `cluster.rejoin_timeout_ms`
/// for one that restarts. A peer that accepts but never completes the handshake is not
/// retried (connect_coordinator ends a first join's process on it with code 2).
connect_result reach_coordinator(caf::actor_system& sys, const app_config& cfg, bool rejoining,
                                 std::chrono::steady_clock::time_point deadline, exit_latch& latch) {
  const auto started = std::chrono::steady_clock::now();
  for (int attempt = 1;; ++attempt) {
    // Each attempt that reaches a listener gets the whole handshake window.
    auto coord =
        connect_coordinator(sys, cfg.cluster, cfg.cluster.coordinator, cfg.cluster.connect_timeout_ms, !rejoining);
    if (coord.ok) return coord;
    if (!coord.retryable) return coord;
    if (std::chrono::steady_clock::now() >= deadline || latch.triggered()) {
      auto waited =
          std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - started).count();
      coord.error += " (" + std::to_string(attempt) + " attempt(s) over " + std::to_string(waited) + " ms)";
      return coord;
    }
    // Rationale: 200 ms between attempts finds a starting or restarted coordinator within a
    // fraction of a second without flooding a host that is still down.
    if (latch.wait_for(std::chrono::milliseconds(200))) return coord;
  }
}

int member_work(caf::actor_system& sys, messages::node_role role, const app_config& cfg, exit_latch& latch) {
  for (int incarnation = 0;; ++incarnation) {
    // Each incarnation is a new node (a new id): the coordinator, the driver and the
    // rollout managers see the last one lost and this one join.
    set_node_incarnation(incarnation);
    auto deadline =
        std::chrono::steady_clock::now() +
        std::chrono::milliseconds(incarnation > 0 ? cfg.cluster.rejoin_timeout_ms : cfg.cluster.connect_timeout_ms);
    auto coord = reach_coordinator(sys, cfg, incarnation > 0, deadline, latch);
    if (!coord.ok) {
      if (latch.triggered()) return latch.exit_code();
      log_error("caf-agent", coord.error);
      return incarnation > 0 ? 3 : 2;
    }
    role_actors actors;
    if (auto err = start_role(sys, role, cfg, {{"coordinator", coord.handle}}, actors); !err.empty()) {
      log_error("caf-agent", err);
      stop_role(sys, actors);
      return 2;
    }
    auto node_id = make_node_id(role);
    caf::actor agent;
    auto lost = std::make_shared<std::atomic<bool>>(false);
    auto lost_why = std::make_shared<std::string>();
    auto lost_mutex = std::make_shared<std::mutex>();
    bool rejoin = cfg.cluster.rejoin_timeout_ms > 0;
    auto on_lost = [&latch, lost, lost_why, lost_mutex, rejoin](const std::string& why) {
      if (!rejoin) return latch.trigger(3, why);
      std::lock_guard lock{*lost_mutex};
      *lost_why = why;
      *lost = true;
    };
    if (auto err = join_cluster(sys, coord.handle, describe_node(node_id, role, actors.counts, actors.notes),
                                cfg.cluster.connect_timeout_ms, on_lost, agent);
        !err.empty()) {
      log_error("caf-agent", err);
      stop_role(sys, actors);
      return 2;
    }
    log_info(to_string(role), "joined " + cfg.cluster.coordinator + " as " + node_id);
    // Rationale: 100 ms polling of the loss flag keeps a rejoin well within a second.
    while (!latch.wait_for(std::chrono::milliseconds(100)) && !*lost) {
    }
    if (latch.triggered()) {
      log_info(to_string(role), "shutting down (" + latch.reason() + ")");
      leave_cluster(sys, agent, latch.reason());
      stop_role(sys, actors);
      return latch.exit_code();
    }
    {
      std::lock_guard lock{*lost_mutex};
      log_error(to_string(role), *lost_why + "; stopping this node's work and rejoining (for up to " +
                                     std::to_string(cfg.cluster.rejoin_timeout_ms) + " ms)");
    }
    stop_role(sys, actors);
  }
}

int run_member(messages::node_role role, const app_config& cfg, exit_latch& latch) {
  return run_in_actor_system(cfg, [&](caf::actor_system& sys) { return member_work(sys, role, cfg, latch); });
}

}  // namespace

int run_node(const cli_options& opts, const app_config& cfg) {
  // First, while this process has one thread: the reaper forks (see sandbox/node_reaper).
  if (auto err = sandbox::start_node_reaper(); !err.empty())
    log_error("caf-agent",
              "no reaper for this node's children (" + err + "); a SIGKILLed node may leave its eval workers running");
  exit_latch latch;
  install_signal_latch(latch);
  const int code = opts.role == messages::node_role::coordinator ? run_coordinator(opts, cfg, latch)
                   : opts.role == messages::node_role::local     ? run_local(opts, cfg, latch)
                                                                 : run_member(opts.role, cfg, latch);
  sandbox::stop_node_reaper();
  return code;
}

}  // namespace caf_agent::runtime
