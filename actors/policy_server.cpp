// actors/policy_server.cpp: see policy_server.hpp.
#include "actors/policy_server.hpp"

#include <chrono>
#include <map>

#include <caf/all.hpp>

#include "actors/observed_actor.hpp"
#include "messages/type_ids.hpp"

namespace caf_agent {

namespace {

using namespace messages;

struct server_state {
  std::shared_ptr<rollout::policy_backend> backend;
  std::map<uint64_t, caf::response_promise> waiting;
  uint64_t seq = 0;
  static inline const char* name = "policy_server";
};

using server_actor = observed_actor<server_state>;

caf::behavior blocking_worker(caf::event_based_actor*, std::shared_ptr<rollout::policy_backend> b) {
  return {
      [=](generate_request& req) -> completion {
        auto c = b->generate(req).completion;
        if (c.policy_version == 0) c.policy_version = b->weights_version();
        return c;
      },
      [=](weights_published& w) -> std::string { return b->publish_weights(w.path, w.version); },
  };
}

caf::behavior server(server_actor* self, std::shared_ptr<rollout::policy_backend> backend, int32_t concurrency) {
  self->state.backend = backend;
  // Blocking backends: `concurrency` detached workers, requests handed out in turn.
  auto workers = std::make_shared<std::vector<caf::actor>>();
  if (backend->blocking())
    for (int32_t i = 0; i < std::max<int32_t>(1, concurrency); ++i)
      workers->push_back(self->spawn<caf::detached + caf::linked>(blocking_worker, backend));
  caf::actor worker = workers->empty() ? caf::actor{} : workers->front();
  return {
      [=](generate_request& req) -> caf::response_promise {
        auto rp = self->make_response_promise();
        if (!workers->empty()) {
          rp.delegate((*workers)[self->state.seq++ % workers->size()], std::move(req));
          return rp;
        }
        auto reply = self->state.backend->generate(req);
        if (reply.completion.policy_version == 0)
          reply.completion.policy_version = self->state.backend->weights_version();
        if (reply.delay.count() <= 0) {
          rp.deliver(std::move(reply.completion));
          return rp;
        }
        auto id = ++self->state.seq;
        self->state.waiting.emplace(id, rp);
        reply.completion.latency_us = reply.delay.count();
        self->delayed_send(self, reply.delay, atoms::done::value, id, std::move(reply.completion));
        return rp;
      },
      [=](weights_published& w) -> caf::response_promise {
        auto rp = self->make_response_promise();
        if (worker)
          rp.delegate(worker, std::move(w));
        else
          rp.deliver(self->state.backend->publish_weights(w.path, w.version));
        return rp;
      },
      [=](atoms::done, uint64_t id, completion& c) {
        auto it = self->state.waiting.find(id);
        if (it == self->state.waiting.end()) return;
        it->second.deliver(std::move(c));
        self->state.waiting.erase(it);
      },
  };
}

}  // namespace

caf::actor spawn_policy_server(caf::actor_system& sys, std::shared_ptr<rollout::policy_backend> backend,
                               int32_t concurrency) {
  return sys.spawn(server, std::move(backend), concurrency);
}

}  // namespace caf_agent
