// actors/coordinator.cpp: see coordinator.hpp.
#include "actors/coordinator.hpp"

#include <algorithm>
#include <chrono>
#include <map>
#include <vector>

#include <caf/all.hpp>

#include "actors/observed_actor.hpp"
#include "actors/policy_server.hpp"
#include "base/log.hpp"
#include "cluster/node_registry.hpp"
#include "messages/type_ids.hpp"
#include "observe/cluster_view.hpp"
#include "observe/registry.hpp"

namespace caf_agent {

namespace {

using namespace messages;

struct coordinator_state {
  coordinator_options opts;
  cluster::node_registry registry{3000};
  std::map<caf::actor_addr, std::string> node_of;  // node agent -> node id
  struct service {
    std::string node_id;
    std::string name;
    caf::actor handle;
  };
  std::vector<service> services;
  std::vector<caf::actor> subscribers;  // run drivers: get services and node losses
  observe::cluster_view view;           // the heartbeats' metrics, stuck episodes
  static inline const char* name = "coordinator";
};

using coordinator_actor = observed_actor<coordinator_state>;

observe::view_inputs view_inputs_of(coordinator_actor* self) {
  auto& st = self->state;
  return {{st.opts.coordinator_id, unix_ms(), st.registry.snapshot(true)},
          observe::metrics_registry::process().snapshot(),
          observe::run_board::process().facts(),
          unix_ms()};
}

void check_stuck(coordinator_actor* self) {
  for (auto& f : self->state.view.check_stuck(view_inputs_of(self)))
    log_error("coordinator", "episode " + std::to_string(f.episode_id) + " on " + f.node_id + " looks stuck (" +
                                 f.reason + "): " + f.detail);
}

/// `episode ID`: the transcript so far, from whichever rollout node runs it.
void episode_transcript(coordinator_actor* self, const std::string& arg, caf::response_promise rp) {
  uint64_t id = 0;
  try {
    size_t used = 0;
    id = std::stoull(arg, &used);
    if (used != arg.size()) throw std::invalid_argument{arg};
  } catch (const std::exception&) {
    rp.deliver(std::string{R"({"error": "episode needs a numeric episode id"})"});
    return;
  }
  std::vector<caf::actor> managers;
  for (auto& s : self->state.services)
    if (is_service(s.name, service_kind::rollout)) managers.push_back(s.handle);
  auto missing = "{\"error\": \"episode " + std::to_string(id) + " is not in flight on any rollout node\"}";
  if (managers.empty()) return rp.deliver(missing);
  auto left = std::make_shared<size_t>(managers.size());
  auto done = std::make_shared<bool>(false);
  for (auto& m : managers) {
    auto answer = [=](const std::string& text) mutable {
      if (*done) return;
      if (!text.empty()) {
        *done = true;
        return rp.deliver(text);
      }
      if (--*left == 0) rp.deliver(missing);
    };
    self->request(m, std::chrono::seconds(5), atoms::transcript::value, id)
        .then([=](std::string& text) mutable { answer(text); }, [=](caf::error&) mutable { answer(""); });
  }
}

void notify_lost(coordinator_actor* self, const cluster::node_event& ev) {
  auto& st = self->state;
  if (ev.to != node_state::down && ev.to != node_state::left) return;
  st.services.erase(
      std::remove_if(st.services.begin(), st.services.end(), [&](auto& s) { return s.node_id == ev.node_id; }),
      st.services.end());
  for (auto& sub : st.subscribers) self->send(sub, node_lost{ev.node_id, ev.reason});
}

void report(const cluster::node_event& ev) {
  std::string line = "node " + ev.node_id + " " + to_string(ev.to);
  if (!ev.reason.empty()) line += " (" + ev.reason + ")";
  if (ev.to == node_state::up || ev.to == node_state::left)
    log_info("coordinator", line);
  else
    log_error("coordinator", line);
}

void schedule_tick(coordinator_actor* self) {
  self->delayed_send(self, std::chrono::milliseconds(self->state.opts.heartbeat_interval_ms), atoms::tick::value);
}

register_ack on_register(coordinator_actor* self, register_node& msg) {
  auto& st = self->state;
  if (auto refusal = st.registry.check(msg)) {
    log_error("coordinator", "refused " + msg.info.node_id + ": " + *refusal);
    return {false, *refusal, st.opts.heartbeat_interval_ms};
  }
  auto sender = self->current_sender();
  if (sender) {
    st.node_of[caf::actor_cast<caf::actor_addr>(sender)] = msg.info.node_id;
    self->monitor(sender);
  }
  auto ev = st.registry.add(msg.info, unix_ms());
  std::string counts;
  for (auto& [kind, n] : msg.info.actor_counts) counts += (counts.empty() ? "" : ", ") + kind + "=" + std::to_string(n);
  log_info("coordinator", "node " + msg.info.node_id + " registered: role=" + to_string(msg.info.role) +
                              " host=" + msg.info.host + " pid=" + std::to_string(msg.info.pid) +
                              " cores=" + std::to_string(msg.info.cores) + " gpus=" + std::to_string(msg.info.gpus) +
                              " actors{" + counts + "}");
  (void)ev;
  return {true, "", st.opts.heartbeat_interval_ms};
}

caf::behavior coordinator(coordinator_actor* self, coordinator_options opts) {
  self->state.opts = opts;
  self->state.registry = cluster::node_registry{opts.node_timeout_ms};
  self->state.view = observe::cluster_view{opts.stuck};
  self->set_down_handler([=](caf::down_msg& dm) {
    auto& st = self->state;
    auto it = st.node_of.find(dm.source);
    if (it == st.node_of.end()) return;
    auto reason = dm.reason ? self->system().render(dm.reason) : std::string{"actor exited"};
    if (auto ev = st.registry.down(it->second, "connection lost: " + reason)) {
      report(*ev);
      notify_lost(self, *ev);
    }
    st.node_of.erase(it);
  });
  schedule_tick(self);
  return {
      [=](register_node& msg) -> register_ack { return on_register(self, msg); },
      [=](node_heartbeat& hb) {
        if (auto ev = self->state.registry.heartbeat(hb, unix_ms())) report(*ev);
        self->state.view.on_metrics(hb.node_id, std::move(hb.metrics));
      },
      [=](get_view& req) -> caf::response_promise {
        auto rp = self->make_response_promise();
        if (req.what == view_kind::episode) {
          episode_transcript(self, req.arg, rp);
          return rp;
        }
        auto in = view_inputs_of(self);
        rp.deliver(
            req.what == view_kind::prometheus
                ? self->state.view.prometheus(in)
                : self->state.view.render(req.what, in).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
        return rp;
      },
      [=](leave_cluster& msg) {
        if (auto ev = self->state.registry.left(msg.node_id, msg.reason)) {
          report(*ev);
          notify_lost(self, *ev);
        }
      },
      [=](service_announce& msg) {
        auto handle = caf::actor_cast<caf::actor>(self->current_sender());
        if (!handle) return;
        self->state.services.push_back({msg.node_id, msg.name, handle});
        log_info("coordinator", "service " + msg.name + " on " + msg.node_id);
        for (auto& sub : self->state.subscribers) self->send(sub, msg, handle);
      },
      // New weights (from the learner or `caf-agent --role inspector --publish-weights`):
      // every policy service switches; the answer has one line per node, "NODE: ok" or
      // "NODE: <error>" (a std::string: CAF 0.17 has no wire type for a vector of strings).
      [=](weights_published& w) -> caf::response_promise {
        auto rp = self->make_response_promise();
        // The registry holds services untyped; a "policy" service is a policy server.
        std::vector<std::pair<std::string, policy_actor>> targets;
        for (auto& s : self->state.services)
          if (is_service(s.name, service_kind::policy))
            targets.emplace_back(s.node_id, caf::actor_cast<policy_actor>(s.handle));
        if (targets.empty()) {
          rp.deliver(std::string{"no policy service has joined"});
          return rp;
        }
        log_info("coordinator", "publishing weights version " + std::to_string(w.version) + " from " + w.path + " to " +
                                    std::to_string(targets.size()) + " policy services");
        auto results = std::make_shared<std::vector<std::string>>();
        auto left = std::make_shared<size_t>(targets.size());
        for (auto& [node, handle] : targets) {
          auto finish = [=](std::string line) mutable {
            results->push_back(std::move(line));
            if (--*left == 0) {
              std::sort(results->begin(), results->end());
              std::string text;
              for (auto& r : *results) text += (text.empty() ? "" : "\n") + r;
              rp.deliver(std::move(text));
            }
          };
          self->request(handle, std::chrono::seconds(120), w)
              .then([=,
                     node = node](std::string& error) mutable { finish(node + ": " + (error.empty() ? "ok" : error)); },
                    [=, node = node](caf::error& err) mutable {
                      finish(node + ": unreachable: " + self->system().render(err));
                    });
        }
        return rp;
      },
      [=](atoms::lookup, const std::string& name) -> caf::result<caf::actor> {
        for (auto& s : self->state.services)
          if (s.name == name) return s.handle;
        return caf::make_error(caf::sec::runtime_error, "no service named " + name);
      },
      [=](atoms::subscribe) {
        auto sub = caf::actor_cast<caf::actor>(self->current_sender());
        if (!sub) return;
        // A subscriber that asks again (a rollout manager looking up a pool whose handle died)
        // gets every service again, not its later announcements twice.
        auto& subs = self->state.subscribers;
        if (std::find(subs.begin(), subs.end(), sub) == subs.end()) subs.push_back(sub);
        for (auto& s : self->state.services) self->send(sub, service_announce{s.node_id, s.name}, s.handle);
      },
      [=](get_cluster& req) -> cluster_snapshot {
        return {self->state.opts.coordinator_id, unix_ms(), self->state.registry.snapshot(req.include_left)};
      },
      [=](atoms::tick) {
        for (auto& ev : self->state.registry.expire(unix_ms())) report(ev);
        check_stuck(self);
        schedule_tick(self);
      },
  };
}

}  // namespace

caf::actor spawn_coordinator(caf::actor_system& sys, coordinator_options opts) {
  return sys.spawn(coordinator, std::move(opts));
}

}  // namespace caf_agent
