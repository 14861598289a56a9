// actors/rollout_manager.cpp: see rollout_manager.hpp.
#include "actors/rollout_manager.hpp"

#include <chrono>
#include <deque>
#include <map>

#include <caf/all.hpp>

#include "actors/log.hpp"
#include "messages/type_ids.hpp"

namespace caf_agent {

namespace {

using namespace messages;

struct manager_state {
  rollout_manager_options opts;
  caf::actor pool;
  std::string pool_node;  // node the pool runs on, once its announcement arrives
  caf::actor driver;
  bool pool_open = true;
  std::deque<start_episode> waiting;
  std::map<uint64_t, caf::actor> running;
  static inline const char* name = "rollout_manager";
};

using manager_actor = caf::stateful_actor<manager_state>;

void report_capacity(manager_actor* self) {
  auto& st = self->state;
  if (!st.driver) return;
  int free = st.opts.max_concurrent - static_cast<int>(st.running.size() + st.waiting.size());
  self->send(st.driver, rollout_capacity{st.opts.node_id, std::max(0, free),
                                         static_cast<int32_t>(st.running.size())});
}

void admit(manager_actor* self) {
  auto& st = self->state;
  while (!st.waiting.empty() && st.pool && st.pool_open &&
         static_cast<int>(st.running.size()) < st.opts.max_concurrent) {
    auto start = std::move(st.waiting.front());
    st.waiting.pop_front();
    auto env = st.opts.env;
    env.pool = self;  // evaluations go through the manager, which knows the current pool
    env.sink = self;
    env.node_id = st.opts.node_id;
    auto id = start.episode_id;
    auto ep = spawn_episode(self->system(), std::move(start), std::move(env));
    // Rationale: episodes end normally on their own (a normal exit does not
    // propagate); when the manager is shut down, the link takes its episodes too,
    // instead of leaving them waiting on executors that are gone.
    self->link_to(ep);
    st.running[id] = ep;
  }
}

void adopt_pool(manager_actor* self, caf::actor pool, std::string node) {
  auto& s = self->state;
  s.pool = pool;
  s.pool_node = std::move(node);
  s.pool_open = true;
  self->monitor(pool);
  self->send(pool, atoms::subscribe::value);
  log_info("rollout", s.opts.node_id + " uses the GPU pool" +
                          (s.pool_node.empty() ? "" : " on " + s.pool_node));
  admit(self);
}

void find_pool(manager_actor* self) {
  auto& st = self->state;
  if (st.pool || !st.opts.coordinator) return;
  self->request(st.opts.coordinator, std::chrono::seconds(5), atoms::lookup::value,
                std::string{"gpu_pool"})
      .then(
          [=](caf::actor& pool) {
            if (!self->state.pool) adopt_pool(self, pool, "");
          },
          [=](caf::error&) {
            self->delayed_send(self, std::chrono::milliseconds(500), atoms::tick::value);
          });
}

caf::behavior rollout_manager(manager_actor* self, rollout_manager_options opts) {
  auto& st = self->state;
  st.opts = std::move(opts);
  if (st.opts.pool) {
    st.pool = st.opts.pool;
    self->monitor(st.pool);
    self->send(st.pool, atoms::subscribe::value);
  }
  if (st.opts.coordinator) {
    self->send(st.opts.coordinator, service_announce{st.opts.node_id, "rollout"});
    self->send(st.opts.coordinator, atoms::subscribe::value);  // pool changes, node losses
  }
  find_pool(self);
  self->set_down_handler([=](caf::down_msg& dm) {
    auto& s = self->state;
    if (s.pool && dm.source == s.pool.address()) {
      log_error("rollout", s.opts.node_id + " lost the GPU pool: " + self->system().render(dm.reason));
      s.pool = nullptr;
      find_pool(self);
    }
  });
  return {
      [=](start_episode& start) {
        auto& s = self->state;
        s.driver = caf::actor_cast<caf::actor>(self->current_sender());
        s.waiting.push_back(std::move(start));
        admit(self);
        report_capacity(self);
      },
      [=](trajectory_record& rec) {
        auto& s = self->state;
        s.running.erase(rec.episode_id);
        if (s.driver) self->send(s.driver, std::move(rec));
        admit(self);
        report_capacity(self);
      },
      [=](eval_request& req) -> caf::response_promise {
        auto rp = self->make_response_promise();
        if (self->state.pool) {
          rp.delegate(self->state.pool, std::move(req));
        } else {
          eval_result r;
          r.job_id = req.job_id;
          r.status = "infra_error";
          r.reason = "no GPU pool is available";
          rp.deliver(std::move(r));
        }
        return rp;
      },
      [=](service_announce& svc, caf::actor& handle) {
        auto& s = self->state;
        if (svc.name != "gpu_pool") return;
        if (handle == s.pool) {
          s.pool_node = svc.node_id;
        } else if (!s.pool) {
          adopt_pool(self, handle, svc.node_id);
        }
      },
      [=](node_lost& lost) {
        auto& s = self->state;
        if (!s.pool || lost.node_id != s.pool_node) return;
        log_error("rollout", s.opts.node_id + " lost the GPU pool on " + lost.node_id + " (" +
                                 lost.reason + ")");
        s.pool = nullptr;
        s.pool_node.clear();
        // Evaluations in flight on the lost node will never answer: fail them now.
        for (auto& [id, ep] : s.running) self->send(ep, atoms::drain::value);
        find_pool(self);
      },
      [=](pool_credits& pc) {
        self->state.pool_open = pc.free_credits > 0;
        admit(self);
      },
      [=](atoms::tick) { find_pool(self); },
      [=](atoms::stats) -> std::map<std::string, double> {
        return {{"running", double(self->state.running.size())},
                {"waiting", double(self->state.waiting.size())}};
      },
  };
}

}  // namespace

caf::actor spawn_rollout_manager(caf::actor_system& sys, rollout_manager_options opts) {
  return sys.spawn(rollout_manager, std::move(opts));
}

}  // namespace caf_agent
