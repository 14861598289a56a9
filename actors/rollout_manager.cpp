// actors/rollout_manager.cpp: see rollout_manager.hpp.
#include "actors/rollout_manager.hpp"

#include <algorithm>
#include <chrono>
#include <deque>
#include <map>
#include <utility>

#include <caf/all.hpp>

#include "actors/observed_actor.hpp"
#include "base/log.hpp"
#include "gpu_pool/slot_backend.hpp"
#include "messages/type_ids.hpp"
#include "rollout/kv_admission.hpp"
#include "rollout/pool_choice.hpp"
#include "rollout/wire_limit.hpp"

namespace caf_agent {

namespace {

using namespace messages;

struct pool_entry {
  pool_actor handle;
  std::string node;  // empty until its announcement names it (the local role's pool)
  rollout::pool_view view;
};

struct job_entry {
  eval_request req;
  caf::typed_response_promise<eval_result> promise;
  caf::actor_addr pool;  // where it is now; null while it waits for a pool
  int failures = 0;
};

struct running_episode {
  episode_actor handle;
  start_episode start;  // for the record of an episode actor that dies without one
};

struct manager_state {
  rollout_manager_options opts;
  std::vector<pool_entry> pools;  // every live pool: one logical pool
  caf::actor driver;
  std::deque<start_episode> waiting;
  std::map<uint64_t, running_episode> running;
  std::map<uint64_t, job_entry> jobs;            // evaluations routed and not answered
  std::deque<uint64_t> held;                     // jobs waiting for any pool to exist
  std::map<std::string, std::string> task_pool;  // task -> node of its last pool (affinity)
  std::map<std::string, int64_t> served;         // evaluations answered, per pool node
  rollout::kv_admission kv;                      // episodes at once the engine's KV cache holds
  int kv_limit_logged = 0;                       // the limit last logged
  bool pools_asked = false;                      // a reminder to ask the coordinator for pools is on its way
  caf::timespan pool_lookup_delay{};             // the wait before the next such question (0: the first)
  static inline const char* name = "rollout_manager";
};

using manager_actor = observed_actor<manager_state, rollout_manager_actor::base>;

/// A message to a dynamically typed peer (the run driver, the coordinator) from this
/// manager: CAF lets a typed actor send() only to typed actors, and these peers read the
/// sender (the coordinator registers it as the service; the driver's capacity table).
template <class... Ts>
void tell(manager_actor* self, const caf::actor& dest, Ts&&... xs) {
  caf::send_as(caf::actor_cast<caf::actor>(self), dest, std::forward<Ts>(xs)...);
}

std::vector<rollout::pool_view> views(const manager_state& st) {
  std::vector<rollout::pool_view> out;
  for (auto& p : st.pools) out.push_back(p.view);
  return out;
}

pool_entry* pool_by_addr(manager_state& st, const caf::actor_addr& addr) {
  for (auto& p : st.pools)
    if (p.handle.address() == addr) return &p;
  return nullptr;
}

/// The same actor object, not only the same address: a remote actor reached again through a
/// new connection gets a new proxy with the old one's address, and the old one's down message
/// must not drop the new one.
bool same_handle(const caf::actor_addr& a, const caf::actor_addr& b) {
  return a.get() == b.get();
}

// Rationale: one second lets the middleman finish closing a connection (so the coordinator's
// answer names the pool through a new proxy). A pool that dies again after each lookup (its node
// not yet noticed gone, or a pool actor that exited on a live node) doubles the wait, up to 30 s;
// an answered evaluation resets it.
constexpr auto first_pool_lookup_delay = std::chrono::seconds(1);
constexpr auto last_pool_lookup_delay = std::chrono::seconds(30);

/// Asks the coordinator for its pools again after a wait (it announces every pool to a
/// subscriber): a pool whose handle died while its node stayed in the cluster comes back.
void ask_for_pools_later(manager_actor* self) {
  auto& st = self->state;
  if (!st.opts.coordinator || st.pools_asked) return;
  st.pools_asked = true;
  st.pool_lookup_delay = st.pool_lookup_delay == caf::timespan{}
                             ? caf::timespan{first_pool_lookup_delay}
                             : std::min(caf::timespan{last_pool_lookup_delay}, 2 * st.pool_lookup_delay);
  self->delayed_send(caf::actor_cast<rollout_manager_actor>(self), st.pool_lookup_delay, atoms::subscribe::value);
}

/// Episodes to run at once now: rollout.max_concurrent_episodes, or fewer when the KV cache
/// bounds them.
int episode_limit(manager_actor* self) {
  auto& st = self->state;
  const int limit = st.kv.limit(st.opts.rollout.max_concurrent_episodes);
  if (st.kv.active() && limit != st.kv_limit_logged) {
    st.kv_limit_logged = limit;
    log_info("rollout", st.opts.node_id + ": " + std::to_string(limit) + " episodes at once (KV cache " +
                            std::to_string(st.kv.capacity_tokens()) + " tokens / expected context " +
                            std::to_string(st.kv.expected_context()) + " tokens; at most " +
                            std::to_string(st.opts.rollout.max_concurrent_episodes) + ")");
  }
  return limit;
}

void report_capacity(manager_actor* self) {
  auto& st = self->state;
  if (!st.driver) return;
  const int limit = episode_limit(self);
  int free = limit - static_cast<int>(st.running.size() + st.waiting.size());
  tell(self, st.driver,
       rollout_capacity{st.opts.node_id, std::max(0, free), static_cast<int32_t>(st.running.size()), limit});
}

void admit(manager_actor* self) {
  auto& st = self->state;
  while (!st.waiting.empty() && rollout::any_pool_admitting(views(st)) &&
         static_cast<int>(st.running.size()) < episode_limit(self)) {
    auto start = std::move(st.waiting.front());
    st.waiting.pop_front();
    auto env = st.opts.env;
    if (start.temperature >= 0) env.sampling.temperature = start.temperature;  // the trainer's choice
    if (start.policy == episode_policy::demonstrations) {
      if (!st.opts.demonstrations) {  // still one record for the episode, naming why
        trajectory_record rec;
        rec.episode_id = start.episode_id;
        rec.task_id = start.task.task_id;
        rec.mode = start.mode;
        rec.node_id = st.opts.node_id;
        rec.termination = episode_end::aborted;
        rec.abort_reason = "rollout node " + st.opts.node_id + " has no demonstrations (train.rft.demonstrations)";
        rec.reward = -1;
        if (st.driver) {
          tell(self, st.driver, episode_started{st.opts.node_id, start.episode_id});
          tell(self, st.driver, std::move(rec));
        }
        continue;
      }
      env.policy = st.opts.demonstrations;
    }
    // Evaluations go through the manager, which knows every pool: it answers eval_request as
    // a pool does, and takes its episodes' records (both interfaces are part of its own).
    env.pool = self;
    env.sink = self;
    env.node_id = st.opts.node_id;
    auto id = start.episode_id;
    auto start_copy = start;
    auto ep = spawn_episode(self->system(), std::move(start), std::move(env));
    // Rationale: episodes end normally on their own (a normal exit does not
    // propagate); when the manager is shut down, the link takes its episodes too,
    // instead of leaving them waiting on executors that are gone.
    self->link_to(ep);
    st.running[id] = {ep, start_copy};
    if (st.driver) tell(self, st.driver, episode_started{st.opts.node_id, id});
  }
}

void answer(manager_actor* self, uint64_t job_id, eval_result r) {
  auto& st = self->state;
  auto it = st.jobs.find(job_id);
  if (it == st.jobs.end()) return;
  it->second.promise.deliver(std::move(r));
  st.jobs.erase(it);
}

void send_job(manager_actor* self, uint64_t job_id);
void drop_pools(manager_actor* self, const std::string& node, const caf::actor_addr& addr, const std::string& why);

/// A pool's answer (or failure) for a job; answers of a pool the job has left are dropped.
void on_pool_reply(manager_actor* self, uint64_t job_id, const caf::actor_addr& from, eval_result* r,
                   const caf::error* err) {
  auto& st = self->state;
  auto it = st.jobs.find(job_id);
  if (it == st.jobs.end() || it->second.pool != from) return;
  auto* p = pool_by_addr(st, from);
  if (p) p->view.in_flight = std::max(0, p->view.in_flight - 1);
  if (r) {
    auto node = p ? p->node : std::string{};
    ++st.served[node];
    st.task_pool[it->second.req.task.task_id] = node;
    st.pool_lookup_delay = {};  // pools answer: the next lookup waits the first delay again
    return answer(self, job_id, std::move(*r));
  }
  if (*err == caf::sec::request_receiver_down) {
    // The handle it went through is dead (a pool that exited, a proxy whose connection closed),
    // and its down message may still be on its way: the job never ran there, so it costs no
    // attempt. That handle's pool is dropped (its jobs move) and this job goes out again.
    drop_pools(self, "", from, "unreachable: " + self->system().render(*err));
    if (auto j = st.jobs.find(job_id); j != st.jobs.end() && j->second.pool == from) {
      j->second.pool = caf::actor_addr{};
      send_job(self, job_id);
    }
    return;
  }
  // One more pool absorbs a pool that failed under the job (a timeout or a broken
  // connection); a second failure is reported as infrastructure (gpu_pool/judgement).
  auto j = gpu_pool::judge(
      {gpu_pool::outcome::pool_failed, it->second.req.mode, {}, "GPU pool failed: " + self->system().render(*err)});
  if (gpu_pool::retry_again(j, it->second.failures++)) {
    it->second.pool = caf::actor_addr{};
    return send_job(self, job_id);
  }
  answer(self, job_id, gpu_pool::result_of(j, job_id));
}

void send_job(manager_actor* self, uint64_t job_id) {
  auto& st = self->state;
  auto& job = st.jobs.at(job_id);
  int affinity = -1;
  if (auto t = st.task_pool.find(job.req.task.task_id); t != st.task_pool.end())
    for (size_t i = 0; i < st.pools.size(); ++i)
      if (st.pools[i].node == t->second) affinity = static_cast<int>(i);
  auto choice = rollout::choose_pool(views(st), affinity);
  if (!choice) {
    st.held.push_back(job_id);  // no pool at all: it goes out when one joins
    return;
  }
  auto& p = st.pools[*choice];
  ++p.view.sent_since_report;
  ++p.view.in_flight;
  ++p.view.assigned;
  job.pool = p.handle.address();
  auto from = job.pool;
  self->request(p.handle, std::chrono::milliseconds(st.opts.env.eval_timeout_ms), job.req)
      .then([=](eval_result& r) { on_pool_reply(self, job_id, from, &r, nullptr); },
            [=](caf::error& e) { on_pool_reply(self, job_id, from, nullptr, &e); });
}

void add_pool(manager_actor* self, pool_actor handle, std::string node) {
  auto& st = self->state;
  if (auto* p = pool_by_addr(st, handle.address())) {
    if (!node.empty()) p->node = std::move(node);
    if (same_handle(p->handle.address(), handle.address())) return;
    // The same pool through a new handle (its connection was made again): the old handle may
    // be dead, so this one serves from now on.
    p->handle = handle;
    self->monitor(handle);
    self->send(handle, atoms::subscribe::value);
    return;
  }
  st.pools.push_back({handle, node, {}});
  self->monitor(handle);
  self->send(handle, atoms::subscribe::value);
  log_info("rollout", st.opts.node_id + " uses the GPU pool" + (node.empty() ? "" : " on " + node) + " (" +
                          std::to_string(st.pools.size()) + " pools)");
  std::deque<uint64_t> held;
  held.swap(st.held);
  for (auto id : held)
    if (st.jobs.contains(id)) send_job(self, id);
  admit(self);
}

/// Drops pools (by node, or by handle when `node` is empty); their jobs go to another. A pool
/// dropped by handle (it died, its node still in the cluster) is looked up again later.
void drop_pools(manager_actor* self, const std::string& node, const caf::actor_addr& addr, const std::string& why) {
  auto& st = self->state;
  std::vector<caf::actor_addr> gone;
  std::erase_if(st.pools, [&](const pool_entry& p) {
    bool match = node.empty() ? same_handle(p.handle.address(), addr) : p.node == node;
    if (match) gone.push_back(p.handle.address());
    return match;
  });
  if (gone.empty()) return;
  if (node.empty()) ask_for_pools_later(self);
  log_error("rollout", st.opts.node_id + " lost the GPU pool" + (node.empty() ? "" : " on " + node) + " (" + why +
                           "); " + std::to_string(st.pools.size()) + " pools left");
  std::vector<uint64_t> moved;
  for (auto& [id, job] : st.jobs)
    for (auto& g : gone)
      if (job.pool == g) moved.push_back(id);
  for (auto id : moved) {
    st.jobs.at(id).pool = caf::actor_addr{};
    send_job(self, id);  // a new pool, or held until one joins
  }
}

rollout_manager_actor::behavior_type rollout_manager(manager_actor* self, rollout_manager_options opts) {
  auto& st = self->state;
  st.opts = std::move(opts);
  if (st.opts.rollout.kv_admission)
    st.kv = rollout::kv_admission(st.opts.kv_capacity_tokens, st.opts.kv_initial_context);
  if (st.opts.pool) add_pool(self, st.opts.pool, "");
  if (st.opts.coordinator) {
    tell(self, st.opts.coordinator, service_announce{st.opts.node_id, service_name(service_kind::rollout)});
    // Every pool (those that joined before us are replayed), pool changes, node losses.
    tell(self, st.opts.coordinator, atoms::subscribe::value);
  }
  // An episode actor that dies without its record (an exception, a kill) still ends in
  // one record, aborted with the reason, and its sandbox is closed; any other exit
  // (a shutdown) ends the manager and, through the links, its episodes.
  self->set_exit_handler([=](caf::exit_msg& em) {
    auto& s = self->state;
    auto it = std::find_if(s.running.begin(), s.running.end(),
                           [&](const auto& kv) { return kv.second.handle.address() == em.source; });
    if (it == s.running.end()) {
      if (em.reason) self->quit(em.reason);
      return;
    }
    if (!em.reason) return;  // ended normally, after its record
    auto start = std::move(it->second.start);
    s.running.erase(it);
    trajectory_record rec;
    rec.episode_id = start.episode_id;
    rec.attempt = start.attempt;
    rec.task_id = start.task.task_id;
    rec.mode = start.mode;
    rec.node_id = s.opts.node_id;
    rec.termination = episode_end::aborted;
    rec.abort_reason = "episode actor died: " + self->system().render(em.reason);
    rec.started_at_ms = rec.ended_at_ms = unix_ms();
    log_error("rollout", "episode " + std::to_string(rec.episode_id) + ": " + rec.abort_reason);
    if (s.opts.env.tools) caf::anon_send(s.opts.env.tools, atoms::close::value, rec.episode_id);
    if (s.driver) tell(self, s.driver, std::move(rec));
    admit(self);
    report_capacity(self);
  });
  self->set_down_handler(
      [=](caf::down_msg& dm) { drop_pools(self, "", dm.source, "exited: " + self->system().render(dm.reason)); });
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
        s.kv.observe(static_cast<int64_t>(rec.tokens.size()));
        if (rollout::fit_record_to_wire(rec))  // past BASP's limits: aborted, with the sizes
          log_error("rollout", "episode " + std::to_string(rec.episode_id) + ": " + rec.abort_reason);
        if (s.driver) tell(self, s.driver, std::move(rec));
        admit(self);
        report_capacity(self);
      },
      [=](eval_request& req) -> caf::typed_response_promise<eval_result> {
        auto rp = self->make_response_promise<eval_result>();
        auto& s = self->state;
        auto id = req.job_id;
        if (s.jobs.contains(id)) {
          rp.deliver(gpu_pool::result_of(
              gpu_pool::judge({gpu_pool::outcome::refused, req.mode, {}, "duplicate job id " + std::to_string(id)}),
              id));
          return rp;
        }
        s.jobs[id] = {std::move(req), rp, {}, 0};
        send_job(self, id);
        return rp;
      },
      [=](service_announce& svc, caf::actor& handle) {
        if (is_service(svc.name, service_kind::gpu_pool)) add_pool(self, pool_of(handle), svc.node_id);
      },
      [=](node_lost& lost) { drop_pools(self, lost.node_id, {}, lost.reason); },
      [=](atoms::subscribe) {  // ask_for_pools_later's reminder
        auto& s = self->state;
        s.pools_asked = false;
        if (s.opts.coordinator) tell(self, s.opts.coordinator, atoms::subscribe::value);
      },
      // The inspector's `episode ID` (through the coordinator): its transcript so far, "" if not here.
      [=](atoms::transcript, uint64_t id) -> caf::typed_response_promise<std::string> {
        auto rp = self->make_response_promise<std::string>();
        auto it = self->state.running.find(id);
        if (it == self->state.running.end())
          rp.deliver(std::string{});
        else
          rp.delegate(it->second.handle, atoms::transcript::value);
        return rp;
      },
      [=](pool_credits& pc) {
        auto& s = self->state;
        auto* p = pool_by_addr(s, caf::actor_cast<caf::actor_addr>(self->current_sender()));
        if (!p) return;
        p->view.healthy = pc.healthy_slots;
        p->view.busy = pc.busy_slots;
        p->view.queued = pc.queued;
        p->view.free_credits = pc.free_credits;
        p->view.sent_since_report = 0;
        p->view.reported = true;
        admit(self);
      },
      // Over the network (a std::map is no wire type in CAF 0.17): "NODE COUNT" lines.
      [=](atoms::stats, const std::string& what) -> std::string {
        std::string out;
        if (what != "evaluations") return out;
        for (auto& [node, n] : self->state.served)
          out += (node.empty() ? std::string{"local"} : node) + " " + std::to_string(n) + "\n";
        return out;
      },
      [=](atoms::stats) -> std::map<std::string, double> {
        auto& s = self->state;
        std::map<std::string, double> out{{"running", double(s.running.size())},
                                          {"waiting", double(s.waiting.size())},
                                          {"pools", double(s.pools.size())},
                                          {"evals_in_flight", double(s.jobs.size())},
                                          {"evals_held", double(s.held.size())}};
        for (auto& [node, n] : s.served) out["evals@" + (node.empty() ? "local" : node)] = double(n);
        return out;
      },
  };
}

}  // namespace

rollout_manager_actor spawn_rollout_manager(caf::actor_system& sys, rollout_manager_options opts) {
  return sys.spawn(rollout_manager, std::move(opts));
}

}  // namespace caf_agent
