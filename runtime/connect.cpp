// runtime/connect.cpp: see connect.hpp.
#include "runtime/connect.hpp"

#include <future>
#include <thread>

#include <caf/all.hpp>
#include <caf/io/all.hpp>

#include "actors/coordinator.hpp"
#include "actors/log.hpp"
#include "runtime/node.hpp"

namespace caf_agent::runtime {

bool split_host_port(const std::string& text, std::string& host, uint16_t& port,
                     std::string& error) {
  auto colon = text.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == text.size()) {
    error = "coordinator address '" + text + "' is not HOST:PORT";
    return false;
  }
  host = text.substr(0, colon);
  auto digits = text.substr(colon + 1);
  if (digits.find_first_not_of("0123456789") != std::string::npos || digits.size() > 5 ||
      std::stoi(digits) <= 0 || std::stoi(digits) > 65535) {
    error = "coordinator address '" + text + "' has an invalid port";
    return false;
  }
  port = static_cast<uint16_t>(std::stoi(digits));
  return true;
}

publish_result publish_coordinator(caf::actor_system& sys, caf::actor coordinator,
                                   const std::string& host, int port) {
  publish_result out;
  auto res = sys.middleman().publish(coordinator, static_cast<uint16_t>(port), host.c_str(), true);
  if (!res) {
    out.error = "cannot listen on " + host + ":" + std::to_string(port) + ": " +
                sys.render(res.error()) +
                (port != 0 ? " (is the port in use by another process?)" : "");
    return out;
  }
  out.ok = true;
  out.port = *res;
  return out;
}

caf::actor start_coordinator(caf::actor_system& sys, const app_config& cfg, const std::string& id,
                             uint16_t& port) {
  auto coord = spawn_coordinator(
      sys, {id, cfg.cluster.heartbeat_interval_ms, cfg.cluster.node_timeout_ms});
  auto pub = publish_coordinator(sys, coord, cfg.cluster.listen_host, cfg.cluster.port);
  if (!pub.ok) {
    log_error("caf-agent", pub.error);
    caf::anon_send_exit(coord, caf::exit_reason::user_shutdown);
    return {};
  }
  port = pub.port;
  return coord;
}

connect_result connect_coordinator(caf::actor_system& sys, const std::string& address,
                                   int64_t timeout_ms, bool exit_on_hang) {
  connect_result out;
  std::string host;
  uint16_t port = 0;
  if (!split_host_port(address, host, port, out.error)) return out;
  auto promise = std::make_shared<std::promise<caf::expected<caf::actor>>>();
  auto future = promise->get_future();
  std::thread{[&sys, host, port, promise] {
    promise->set_value(sys.middleman().remote_actor(host, port));
  }}.detach();
  if (future.wait_for(std::chrono::milliseconds(timeout_ms)) != std::future_status::ready) {
    if (!exit_on_hang) {
      out.error = "coordinator at " + address + " did not complete the handshake within " +
                  std::to_string(timeout_ms) + " ms";
      return out;
    }
    log_error("caf-agent", "coordinator at " + address + " did not complete the handshake within " +
                               std::to_string(timeout_ms) +
                               " ms (is it a caf-agent coordinator of the same version?)");
    std::_Exit(2);
  }
  auto res = future.get();
  if (!res) {
    out.error = "cannot reach coordinator at " + address + ": " + sys.render(res.error());
    return out;
  }
  out.ok = true;
  out.handle = *res;
  return out;
}

}  // namespace caf_agent::runtime
