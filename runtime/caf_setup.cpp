// runtime/caf_setup.cpp: see caf_setup.hpp.
#include "runtime/caf_setup.hpp"

#include <thread>

#include <caf/io/middleman.hpp>
#include <caf/openssl/manager.hpp>

#include "messages/type_ids.hpp"
#include "runtime/tls.hpp"

namespace caf_agent::runtime {

std::string app_identifier() {
  return "caf-agent/" + std::to_string(messages::protocol_version);
}

void configure_caf(caf::actor_system_config& caf_cfg, const app_config& cfg) {
  caf_cfg.load<caf::io::middleman>();
  if (tls_enabled(cfg.cluster)) {
    // CAF's OpenSSL module: with a certificate, key and CA set, both ends of every connection
    // present a certificate and verify the other's against the CA (runtime/tls.hpp).
    caf_cfg.load<caf::openssl::manager>();
    caf_cfg.openssl_certificate = cfg.cluster.tls_cert;
    caf_cfg.openssl_key = cfg.cluster.tls_key;
    caf_cfg.openssl_cafile = cfg.cluster.tls_ca;
  }
  caf_cfg.add_message_types<caf::id_block::caf_agent>();
  auto threads = cfg.runtime.scheduler_threads > 0 ? static_cast<size_t>(cfg.runtime.scheduler_threads)
                                                   : std::max<size_t>(2, std::thread::hardware_concurrency());
  caf_cfg.set("scheduler.max-threads", threads);
  if (cfg.runtime.scheduler_idle == idle_mode::sleep) {
    // Rationale: CAF's idle workers first poll (100 attempts) and then nap 50 us at a time (500
    // attempts) before they wait on their condition variable. With more processes than cores
    // (a whole cluster on one host) those naps are runnable threads that preempt the busy ones:
    // 21 processes on 2 cores spent more system time than user time. "sleep" waits at once; a
    // message from outside a worker (network, timers) wakes it, and stealing waits for the
    // relaxed timeout.
    caf_cfg.set("work-stealing.aggressive-poll-attempts", size_t{0});
    caf_cfg.set("work-stealing.moderate-poll-attempts", size_t{0});
  }
  // Rationale: CAF 0.17 sends no heartbeats by default, so a peer that hangs
  // (stopped, or a network partition) would never be noticed at the connection
  // level. Half our node timeout lets two heartbeats be lost first.
  auto beat = std::chrono::milliseconds(std::max<int64_t>(100, cfg.cluster.heartbeat_interval_ms));
  caf_cfg.set("middleman.heartbeat-interval", caf::timespan{beat});
  caf_cfg.set("middleman.connection-timeout",
              caf::timespan{std::chrono::milliseconds(cfg.cluster.node_timeout_ms * 2)});
  caf_cfg.set("middleman.app-identifiers", std::vector<std::string>{app_identifier()});
  caf_cfg.set("logger.console-verbosity", caf::atom("quiet"));
  caf_cfg.set("logger.file-verbosity", caf::atom("quiet"));
}

}  // namespace caf_agent::runtime
