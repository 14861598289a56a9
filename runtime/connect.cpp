// runtime/connect.cpp: see connect.hpp.
#include "runtime/connect.hpp"

#include <future>
#include <thread>

#include <caf/all.hpp>
#include <caf/io/all.hpp>
#include <caf/openssl/all.hpp>

#include "actors/coordinator.hpp"
#include "base/log.hpp"
#include "runtime/node.hpp"
#include "runtime/observe_service.hpp"
#include "runtime/tls.hpp"

namespace caf_agent::runtime {

bool split_host_port(const std::string& text, std::string& host, uint16_t& port, std::string& error) {
  auto colon = text.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == text.size()) {
    error = "coordinator address '" + text + "' is not HOST:PORT";
    return false;
  }
  host = text.substr(0, colon);
  auto digits = text.substr(colon + 1);
  if (digits.find_first_not_of("0123456789") != std::string::npos || digits.size() > 5 || std::stoi(digits) <= 0 ||
      std::stoi(digits) > 65535) {
    error = "coordinator address '" + text + "' has an invalid port";
    return false;
  }
  port = static_cast<uint16_t>(std::stoi(digits));
  return true;
}

publish_result publish_coordinator(caf::actor_system& sys, caf::actor coordinator, const std::string& host, int port,
                                   bool tls) {
  publish_result out;
  auto res = tls ? caf::openssl::publish(coordinator, static_cast<uint16_t>(port), host.c_str(), true)
                 : sys.middleman().publish(coordinator, static_cast<uint16_t>(port), host.c_str(), true);
  if (!res) {
    out.error = "cannot listen on " + host + ":" + std::to_string(port) + ": " + sys.render(res.error()) +
                (port != 0 ? " (is the port in use by another process?)" : "");
    return out;
  }
  out.ok = true;
  out.port = *res;
  return out;
}

caf::actor start_coordinator(caf::actor_system& sys, const app_config& cfg, const std::string& id, uint16_t& port) {
  if (auto err = plaintext_refusal(cfg.cluster, cfg.cluster.listen_host,
                                   "cluster.listen_host '" + cfg.cluster.listen_host + "'");
      !err.empty()) {
    log_error("caf-agent", err);
    return {};
  }
  if (tls_enabled(cfg.cluster))
    if (auto err = check_tls_files(cfg.cluster); !err.empty()) {
      log_error("caf-agent", err);
      return {};
    }
  auto coord = spawn_coordinator(
      sys, {id, cfg.cluster.heartbeat_interval_ms, cfg.cluster.node_timeout_ms, stuck_options_of(cfg.observe)});
  auto pub = publish_coordinator(sys, coord, cfg.cluster.listen_host, cfg.cluster.port, tls_enabled(cfg.cluster));
  if (!pub.ok) {
    log_error("caf-agent", pub.error);
    caf::anon_send_exit(coord, caf::exit_reason::user_shutdown);
    return {};
  }
  port = pub.port;
  start_metrics_endpoint(sys, coord, cfg.observe);
  return coord;
}

connect_result connect_coordinator(caf::actor_system& sys, const cluster_config& cluster, const std::string& address,
                                   int64_t timeout_ms, bool exit_on_hang) {
  connect_result out;
  std::string host;
  uint16_t port = 0;
  if (!split_host_port(address, host, port, out.error)) return out;
  out.error = plaintext_refusal(cluster, host, "coordinator address '" + address + "'");
  if (!out.error.empty()) return out;
  const bool tls = tls_enabled(cluster);
  if (tls) out.error = check_tls_files(cluster);
  if (!out.error.empty()) return out;
  auto promise = std::make_shared<std::promise<caf::expected<caf::actor>>>();
  auto future = promise->get_future();
  std::thread{[&sys, host, port, promise, tls] {
    promise->set_value(tls ? caf::openssl::remote_actor(sys, host, port) : sys.middleman().remote_actor(host, port));
  }}.detach();
  if (future.wait_for(std::chrono::milliseconds(timeout_ms)) != std::future_status::ready) {
    if (!exit_on_hang) {
      out.error =
          "coordinator at " + address + " did not complete the handshake within " + std::to_string(timeout_ms) + " ms";
      return out;
    }
    log_error("caf-agent", "coordinator at " + address + " did not complete the handshake within " +
                               std::to_string(timeout_ms) + " ms (is it a caf-agent coordinator of the same version" +
                               (tls ? ", with TLS on?)" : ", with TLS off as here?)"));
    std::_Exit(2);
  }
  auto res = future.get();
  if (!res) {
    out.error = "cannot reach coordinator at " + address + ": " + sys.render(res.error());
    out.retryable = true;
    // A TLS handshake that fails (either side refused the other's certificate) shows only as
    // a dropped connection; say what to check.
    if (tls)
      out.error +=
          " (TLS: the coordinator refused this node's certificate or this node refused the "
          "coordinator's; both must be signed by the cluster CA in cluster.tls_ca, and the "
          "coordinator must have TLS on)";
    return out;
  }
  out.ok = true;
  out.handle = *res;
  return out;
}

}  // namespace caf_agent::runtime
