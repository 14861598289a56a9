// runtime/inspector.cpp: `caf-agent --role inspector`, the cluster view.
#include <cstdio>
#include <filesystem>
#include <sstream>
#include <iostream>

#include <caf/all.hpp>
#include <caf/io/all.hpp>

#include "actors/log.hpp"
#include "messages/type_ids.hpp"
#include "runtime/caf_setup.hpp"
#include "runtime/connect.hpp"
#include "runtime/node.hpp"
#include "runtime/process.hpp"

namespace caf_agent::runtime {

namespace {

std::string format_age(int64_t ms) {
  if (ms < 1000) return std::to_string(ms) + "ms";
  return std::to_string(ms / 1000) + "." + std::to_string((ms % 1000) / 100) + "s";
}

void print_snapshot(const messages::cluster_snapshot& snap) {
  size_t up = 0;
  for (auto& n : snap.nodes) up += n.state == "up";
  std::printf("coordinator %s: %zu nodes (%zu up)\n", snap.coordinator_id.c_str(),
              snap.nodes.size(), up);
  std::printf("%-40s %-10s %-6s %-16s %7s %5s %4s %9s  %s\n", "NODE", "ROLE", "STATE", "HOST",
              "PID", "CORES", "GPUS", "LAST SEEN", "ACTORS");
  for (auto& n : snap.nodes) {
    std::string actors;
    for (auto& [k, v] : n.info.actor_counts)
      actors += (actors.empty() ? "" : ",") + k + "=" + std::to_string(v);
    std::printf("%-40s %-10s %-6s %-16s %7d %5d %4d %9s  %s\n", n.info.node_id.c_str(),
                n.info.role.c_str(), n.state.c_str(), n.info.host.c_str(), n.info.pid,
                n.info.cores, n.info.gpus, format_age(snap.now_ms - n.last_seen_ms).c_str(),
                actors.c_str());
    if (!n.reason.empty() && n.state != "up") std::printf("    reason: %s\n", n.reason.c_str());
    for (const auto& note : n.info.notes) std::printf("    note: %s\n", note.c_str());
  }
  std::fflush(stdout);
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
  int code = 0;
  if (opts.publish_weights) {
    // Paths travel as given; make them absolute so nodes started elsewhere find them.
    auto path = std::filesystem::absolute(*opts.publish_weights).lexically_normal().string();
    caf::scoped_actor self{sys};
    self->request(coord.handle, std::chrono::minutes(5), messages::weights_published{opts.weights_version, path})
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
  do {
    caf::scoped_actor self{sys};
    self->request(coord.handle, std::chrono::milliseconds(cfg.cluster.connect_timeout_ms),
                  messages::get_cluster{true})
        .receive([](messages::cluster_snapshot& snap) { print_snapshot(snap); },
                 [&](caf::error& err) {
                   log_error("caf-agent", "coordinator did not answer: " + sys.render(err));
                   code = 2;
                 });
    if (code != 0 || !opts.watch) break;
    std::printf("\n");
  } while (!latch.wait_for(std::chrono::seconds(1)));
  return code;
}

}  // namespace caf_agent::runtime
