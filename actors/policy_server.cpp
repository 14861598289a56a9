// actors/policy_server.cpp: see policy_server.hpp.
#include "actors/policy_server.hpp"

#include <algorithm>
#include <unordered_map>
#include <vector>

#include <caf/all.hpp>

#include "actors/observed_actor.hpp"

namespace caf_agent {

namespace {

using namespace messages;

/// The server's own handle: its protocol plus the message a reply comes back in.
using server_handle = policy_actor::extend<caf::reacts_to<atoms::done, uint64_t, completion>>;

/// A detached worker of a blocking backend: one request at a time.
using worker_handle = caf::typed_actor<caf::replies_to<generate_request>::with<completion>,
                                       caf::replies_to<weights_published>::with<std::string>>;

struct server_state {
  std::shared_ptr<rollout::policy_backend> backend;
  std::vector<worker_handle> workers;  ///< blocking backends only
  std::unordered_map<uint64_t, caf::typed_response_promise<completion>> waiting;
  uint64_t seq = 0;
  static inline const char* name = "policy_server";
};

using server_actor = observed_actor<server_state, server_handle::base>;

completion failed(uint64_t request_id, std::string why) {
  completion c;
  c.request_id = request_id;
  c.finish_reason = completion_finish::error;
  c.error = std::move(why);
  return c;
}

worker_handle::behavior_type blocking_worker(worker_handle::pointer, std::shared_ptr<rollout::policy_backend> b) {
  return {
      [=](generate_request& req) -> completion {
        completion out = failed(req.request_id, b->name() + ": the backend did not answer");
        // A blocking backend answers before submit() returns (rollout::backend_mode::blocking).
        b->submit(std::move(req), [&](rollout::backend_reply r) { out = std::move(r.completion); });
        return out;
      },
      [=](weights_published& w) -> std::string { return b->publish_weights(w.path, w.version); },
  };
}

void deliver(server_actor* self, uint64_t id, completion c) {
  auto it = self->state.waiting.find(id);
  if (it == self->state.waiting.end()) return;
  it->second.deliver(std::move(c));
  self->state.waiting.erase(it);
}

server_handle::behavior_type server(server_actor* self, std::shared_ptr<rollout::policy_backend> backend,
                                    int32_t concurrency) {
  auto& st = self->state;
  st.backend = std::move(backend);
  if (st.backend->mode() == rollout::backend_mode::blocking)
    for (int32_t i = 0; i < std::max<int32_t>(1, concurrency); ++i)
      st.workers.push_back(self->spawn<caf::detached + caf::linked>(blocking_worker, st.backend));
  return {
      [=](generate_request& req) -> caf::result<completion> {
        auto& s = self->state;
        const auto id = ++s.seq;
        auto rp = s.waiting.emplace(id, self->make_response_promise<completion>()).first->second;
        if (!s.workers.empty()) {  // requests handed out to the workers in turn
          const auto request_id = req.request_id;
          self->request(s.workers[id % s.workers.size()], caf::infinite, std::move(req))
              .then([=](completion& c) { deliver(self, id, std::move(c)); },
                    [=](caf::error& err) {
                      deliver(self, id, failed(request_id, "policy worker: " + self->system().render(err)));
                    });
          return rp;
        }
        // Rationale: every reply comes back as a message, an immediate one too: an asynchronous
        // backend calls back from its own thread, where the actor's state must not be touched.
        auto hdl = caf::actor_cast<server_handle>(self);
        s.backend->submit(std::move(req), [hdl, id](rollout::backend_reply r) {
          if (r.delay.count() <= 0) return caf::anon_send(hdl, atoms::done::value, id, std::move(r.completion));
          r.completion.latency_us = r.delay.count();
          caf::delayed_anon_send(hdl, r.delay, atoms::done::value, id, std::move(r.completion));
        });
        return rp;
      },
      [=](atoms::done, uint64_t id, completion& c) { deliver(self, id, std::move(c)); },
      [=](weights_published& w) -> caf::result<std::string> {
        auto& s = self->state;
        if (!s.workers.empty()) return self->delegate(s.workers.front(), std::move(w));
        return s.backend->publish_weights(w.path, w.version);
      },
      [=](atoms::stats) -> std::map<std::string, double> {
        auto out = self->state.backend->stats();
        out["pending"] = static_cast<double>(self->state.waiting.size());
        return out;
      },
  };
}

}  // namespace

policy_actor spawn_policy_server(caf::actor_system& sys, std::shared_ptr<rollout::policy_backend> backend,
                                 int32_t concurrency) {
  return sys.spawn(server, std::move(backend), concurrency);
}

}  // namespace caf_agent
