// runtime/inspector.cpp: `caf-agent --role inspector`, the cluster view.
//
//   caf-agent --role inspector --coordinator HOST:PORT                 nodes (the classic table)
//   caf-agent --role inspector --coordinator HOST:PORT VIEW [ARG] [--json]
//       VIEW: nodes, actors, episodes, gpu, queues, train, run, episode ID, metrics, prometheus
//       (messages::view_kind's names)
//   caf-agent --role inspector --coordinator HOST:PORT --watch         the live full-screen view
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <iostream>
#include <map>
#include <sstream>

#include <caf/all.hpp>
#include <caf/io/all.hpp>
#include <nlohmann/json.hpp>

#include "base/log.hpp"
#include "messages/type_ids.hpp"
#include "runtime/caf_setup.hpp"
#include "runtime/connect.hpp"
#include "runtime/inspector_text.hpp"
#include "runtime/node.hpp"
#include "runtime/process.hpp"

namespace caf_agent::runtime {

namespace {

using nlohmann::json;

std::string format_age(int64_t ms) {
  if (ms < 1000) return std::to_string(ms) + "ms";
  return std::to_string(ms / 1000) + "." + std::to_string((ms % 1000) / 100) + "s";
}

void print_snapshot(const messages::cluster_snapshot& snap) {
  size_t up = 0;
  for (auto& n : snap.nodes) up += n.state == messages::node_state::up;
  std::printf("coordinator %s: %zu nodes (%zu up)\n", snap.coordinator_id.c_str(), snap.nodes.size(), up);
  std::printf("%-40s %-10s %-6s %-16s %7s %5s %4s %9s  %s\n", "NODE", "ROLE", "STATE", "HOST", "PID", "CORES", "GPUS",
              "LAST SEEN", "ACTORS");
  for (auto& n : snap.nodes) {
    std::string actors;
    for (auto& [k, v] : n.info.actor_counts) actors += (actors.empty() ? "" : ",") + k + "=" + std::to_string(v);
    std::printf("%-40s %-10s %-6s %-16s %7d %5d %4d %9s  %s\n", n.info.node_id.c_str(), to_string(n.info.role).c_str(),
                to_string(n.state).c_str(), n.info.host.c_str(), n.info.pid, n.info.cores, n.info.gpus,
                format_age(snap.now_ms - n.last_seen_ms).c_str(), actors.c_str());
    if (!n.reason.empty() && n.state != messages::node_state::up) std::printf("    reason: %s\n", n.reason.c_str());
    for (const auto& note : n.info.notes) std::printf("    note: %s\n", note.c_str());
  }
  std::fflush(stdout);
}

/// Asks the coordinator for one view; returns false (and says why) when it does not answer.
bool fetch_view(caf::actor_system& sys, const caf::actor& coord, int64_t timeout_ms, messages::view_kind what,
                const std::string& arg, std::string& out) {
  bool ok = false;
  caf::scoped_actor self{sys};
  self->request(coord, std::chrono::milliseconds(timeout_ms), messages::get_view{what, arg})
      .receive(
          [&](std::string& text) {
            out = std::move(text);
            ok = true;
          },
          [&](caf::error& err) {
            // An older coordinator has no get_view: say so rather than a bare "unexpected message".
            log_error("caf-agent",
                      "coordinator did not answer the '" + to_string(what) + "' view: " + sys.render(err) +
                          " (a coordinator of another caf-agent version answers only the plain node list)");
          });
  return ok;
}

int run_publish(caf::actor_system& sys, const caf::actor& coord, const cli_options& opts) {
  int code = 0;
  // Paths travel as given; make them absolute so nodes started elsewhere find them.
  auto path = std::filesystem::absolute(*opts.publish_weights).lexically_normal().string();
  caf::scoped_actor self{sys};
  self->request(coord, std::chrono::minutes(5), messages::weights_published{opts.weights_version, path})
      .receive(
          [&](std::string& text) {
            std::istringstream lines{text};
            for (std::string line; std::getline(lines, line);) {
              std::printf("%s\n", line.c_str());
              if (!line.ends_with(": ok")) code = 1;
            }
          },
          [&](caf::error& err) {
            log_error("caf-agent", "coordinator did not answer: " + sys.render(err));
            code = 2;
          });
  std::fflush(stdout);
  return code;
}

/// One-shot VIEW [ARG]: JSON as the coordinator sent it, or a table.
int run_view(caf::actor_system& sys, const caf::actor& coord, const cli_options& opts, int64_t timeout_ms) {
  const auto& name = opts.inspect.front();
  auto arg = opts.inspect.size() > 1 ? opts.inspect[1] : std::string{};
  const auto parsed = messages::parse_name<messages::view_kind>(name);
  if (!parsed) {
    log_error("caf-agent",
              "inspector: unknown view '" + name + "' (expected " + messages::names_list<messages::view_kind>() + ")");
    return 2;
  }
  const auto what = *parsed;
  if (what == messages::view_kind::episode && arg.empty()) {
    log_error("caf-agent", "inspector: 'episode' needs an episode id (caf-agent --role inspector episode ID)");
    return 2;
  }
  std::string text;
  if (!fetch_view(sys, coord, timeout_ms, what, arg, text)) return 2;
  if (what == messages::view_kind::prometheus) {
    std::fputs(text.c_str(), stdout);
    return 0;
  }
  auto j = json::parse(text, nullptr, false);
  if (j.is_discarded()) {
    log_error("caf-agent", "the coordinator's '" + name + "' view is not JSON");
    return 2;
  }
  int code = j.is_object() && j.contains("error") ? 1 : 0;
  if (opts.json)
    std::printf("%s\n", j.dump(2, ' ', false, json::error_handler_t::replace).c_str());
  else
    std::fputs(render_view_text(what, j).c_str(), stdout);
  std::fflush(stdout);
  return code;
}

/// The live view: every second, a full screen on a terminal, plain frames otherwise.
int run_watch(caf::actor_system& sys, const caf::actor& coord, exit_latch& latch, int64_t timeout_ms) {
  const bool tty = isatty(STDOUT_FILENO) == 1;
  do {
    std::map<messages::view_kind, json> views;
    for (auto v : dashboard_views) {
      std::string text;
      if (!fetch_view(sys, coord, timeout_ms, v, "", text)) return 2;
      views[v] = json::parse(text, nullptr, false);
    }
    auto frame = render_dashboard(views, unix_ms());
    if (tty) std::fputs("\x1b[H\x1b[2J", stdout);  // home, clear
    std::fputs(frame.c_str(), stdout);
    if (!tty) std::fputs("\n", stdout);
    std::fflush(stdout);
  } while (!latch.wait_for(std::chrono::seconds(1)));
  return 0;
}

}  // namespace

int run_inspector(const cli_options& opts, const app_config& cfg) {
  exit_latch latch;
  install_signal_latch(latch);
  caf::actor_system_config caf_cfg;
  configure_caf(caf_cfg, cfg);
  caf::actor_system sys{caf_cfg};
  auto coord = connect_coordinator(sys, cfg.cluster, cfg.cluster.coordinator, cfg.cluster.connect_timeout_ms);
  if (!coord.ok) {
    log_error("caf-agent", coord.error);
    return 2;
  }
  if (opts.publish_weights) return run_publish(sys, coord.handle, opts);
  if (!opts.inspect.empty() || opts.json) {
    auto view_opts = opts;
    if (view_opts.inspect.empty()) view_opts.inspect = {"nodes"};
    return run_view(sys, coord.handle, view_opts, cfg.cluster.connect_timeout_ms);
  }
  if (opts.watch) return run_watch(sys, coord.handle, latch, cfg.cluster.connect_timeout_ms);
  int code = 0;
  caf::scoped_actor self{sys};
  self->request(coord.handle, std::chrono::milliseconds(cfg.cluster.connect_timeout_ms), messages::get_cluster{true})
      .receive([](messages::cluster_snapshot& snap) { print_snapshot(snap); },
               [&](caf::error& err) {
                 log_error("caf-agent", "coordinator did not answer: " + sys.render(err));
                 code = 2;
               });
  return code;
}

}  // namespace caf_agent::runtime
