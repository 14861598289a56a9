// actors/gpu_pool.cpp: see gpu_pool.hpp.
#include "actors/gpu_pool.hpp"

#include <algorithm>
#include <map>

#include <caf/all.hpp>

#include "actors/gpu_slot.hpp"
#include "actors/observed_actor.hpp"
#include "base/log.hpp"
#include "gpu_pool/pool_policy.hpp"
#include "gpu_pool/worker_protocol.hpp"
#include "messages/type_ids.hpp"

namespace caf_agent {

namespace {

using namespace messages;
// -- manager ---------------------------------------------------------------

/// What a reply needs; gpu_pool::pool_policy holds where the job is and decides what next.
struct job_entry {
  eval_request req;
  caf::typed_response_promise<eval_result> promise;
  int64_t enqueued_us = 0;
  int64_t build_us = 0;  // time in a builder (0: none)
};

/// The pool's name in the log and the node's metrics.
constexpr const char* pool_name = "gpu_pool";

struct manager_state {
  std::unique_ptr<gpu_pool::pool_policy> policy;
  std::vector<slot_actor> slots;
  std::map<uint64_t, job_entry> jobs;  // known to the policy
  std::vector<pool_listener_actor> subscribers;
  std::vector<builder_actor> builders;
  double builds = 0, build_failures = 0, build_infra = 0, build_us_total = 0;
  pool_credits last_published{-1, -1, -1, -1};
  double jobs_done = 0, infra_failures = 0, queue_us_total = 0;
  double busy_integral_us = 0;
  double saturated_busy_us = 0, saturated_slot_us = 0;
  double run_us_total = 0;  // time slots spent running jobs, as slots measure it
  int64_t last_event_us = 0;
  int64_t started_us = 0;
  static inline const char* name = "gpu_pool";
};

/// The manager's own type: the pool's protocol, its slots' and builders' reports, and the
/// slot and builder lists spawn_gpu_pool sends it once.
using pool_manager_actor =
    pool_actor::extend_with<slot_manager_actor>::extend<caf::reacts_to<std::vector<slot_actor>>,
                                                        caf::reacts_to<atoms::build, std::vector<builder_actor>>>;

using manager_actor = observed_actor<manager_state, pool_manager_actor::base>;

/// Integrates busy slots over time, overall and while work was waiting (the
/// state between two events is constant, so this is exact).
void account(manager_actor* self) {
  auto& st = self->state;
  auto& sched = st.policy->scheduler();
  auto now = steady_us();
  auto dt = static_cast<double>(now - st.last_event_us);
  auto busy = static_cast<double>(sched.busy());
  st.busy_integral_us += busy * dt;
  if (sched.queued() + st.policy->parked() > 0) {
    st.saturated_busy_us += busy * dt;
    st.saturated_slot_us += static_cast<double>(sched.healthy()) * dt;
  }
  st.last_event_us = now;
}

/// Tells subscribers the pool's state whenever it changed: rollout managers spread
/// evaluations over pools by these reports (idle slots, queue depth, credits).
void publish_credits(manager_actor* self) {
  auto& st = self->state;
  auto& p = *st.policy;
  auto& sched = p.scheduler();
  pool_credits pc{p.open() ? static_cast<int32_t>(sched.credits()) : 0,
                  static_cast<int32_t>(sched.queued() + p.parked()), static_cast<int32_t>(sched.busy()),
                  static_cast<int32_t>(sched.healthy())};
  observe::metrics_registry::process().pool_update({pool_name,
                                                    static_cast<int32_t>(sched.slots()),
                                                    pc.healthy_slots,
                                                    pc.busy_slots,
                                                    pc.queued,
                                                    static_cast<int32_t>(p.building()),
                                                    static_cast<int64_t>(st.jobs_done),
                                                    static_cast<int64_t>(st.infra_failures),
                                                    {}});
  if (pc == st.last_published) return;
  st.last_published = pc;
  for (auto& s : st.subscribers) self->send(s, pc);
}

/// Final evaluations go before intermediate ones.
gpu_pool::job_kind kind_of(const eval_request& req) {
  return req.mode == eval_mode::final ? gpu_pool::job_kind::final_eval : gpu_pool::job_kind::intermediate;
}

/// The answer to a job the policy ended without a slot's result (gpu_pool/judgement says what
/// it means).
eval_result answer_of(const gpu_pool::ended_job& e, const job_entry& entry, const std::string& detail) {
  using gpu_pool::outcome;
  gpu_pool::job_outcome o{outcome::refused, entry.req.mode, {}, detail};
  switch (e.how) {
    case gpu_pool::job_end::no_healthy_slot:
      o.what = outcome::no_healthy_slot;
      break;
    case gpu_pool::job_end::episode_busy:
      o.detail = "episode already has an evaluation outstanding";
      break;
    case gpu_pool::job_end::build_failed:
      o.what = outcome::build_failed;
      break;
    case gpu_pool::job_end::slot_lost:
      o.what = outcome::slot_lost;
      break;
    case gpu_pool::job_end::done:
      o.what = outcome::slot_lost;
      break;  // never: done carries its result
  }
  auto r = gpu_pool::result_of(gpu_pool::judge(o), e.job_id);
  r.build_us = entry.build_us;
  return r;
}

/// Carries out what the policy decided: answers the jobs that ended (`own` is the result of
/// the event's own job, `detail` the text of its failure), sends runs to slots and builds to
/// builders, publishes the pool's state.
void apply(manager_actor* self, gpu_pool::pool_step& step, eval_result* own = nullptr, const std::string& detail = {},
           bool slot_gone = false) {
  auto& st = self->state;
  for (auto slot : step.quarantined)
    log_error(pool_name, "slot" + std::to_string(slot) +
                             (slot_gone ? " quarantined: its actor is gone" : " quarantined after repeated failures"));
  for (auto& e : step.ended) {
    auto it = st.jobs.find(e.job_id);
    if (it == st.jobs.end()) continue;
    auto& entry = it->second;
    if (own && own->job_id == e.job_id && e.how == gpu_pool::job_end::done) {
      own->build_us = entry.build_us;
      own->queue_us = steady_us() - entry.enqueued_us - own->run_us - own->build_us;
      entry.promise.deliver(std::move(*own));
    } else {
      auto r = answer_of(e, entry, detail);
      if (e.how == gpu_pool::job_end::build_failed) {
        r.queue_us = steady_us() - entry.enqueued_us - entry.build_us;
        if (own) r.slot = own->slot;
      }
      entry.promise.deliver(std::move(r));
    }
    st.jobs.erase(it);
  }
  for (auto& a : step.runs) {
    account(self);
    auto& e = st.jobs.at(a.job.job_id);
    st.queue_us_total += static_cast<double>(steady_us() - e.enqueued_us);
    observe::metrics_registry::process().pool_wait(pool_name, steady_us() - e.enqueued_us);
    self->send(st.slots[a.slot], atoms::run::value, e.req);  // deadline 0: the slot's default
  }
  for (auto& b : step.builds) self->send(st.builders.at(b.builder), atoms::build::value, st.jobs.at(b.job_id).req);
  publish_credits(self);
}

caf::typed_response_promise<eval_result> on_request(manager_actor* self, eval_request& req) {
  auto& st = self->state;
  auto promise = self->make_response_promise<eval_result>();
  if (st.policy->known(req.job_id)) {
    promise.deliver(gpu_pool::result_of(
        gpu_pool::judge({gpu_pool::outcome::refused, req.mode, {}, "duplicate job id " + std::to_string(req.job_id)}),
        req.job_id));
    return promise;
  }
  gpu_pool::pool_job job{req.job_id, req.episode_id, kind_of(req), gpu_pool::has_kernel_sources(req.files)};
  st.jobs[req.job_id] = {std::move(req), promise, steady_us()};
  auto step = st.policy->submit(job);
  apply(self, step);
  return promise;
}

void on_built(manager_actor* self, int32_t builder, uint64_t id, bool ok, bool infra, std::string& log,
              int64_t build_us) {
  auto& st = self->state;
  st.builds += 1;
  st.build_us_total += static_cast<double>(build_us);
  if (auto it = st.jobs.find(id); it != st.jobs.end()) it->second.build_us = build_us;
  if (infra) {
    st.build_infra += 1;
    log_error(pool_name, "builder" + std::to_string(builder) + " failed on job " + std::to_string(id) + " (" +
                             log.substr(0, 500) + "); its slot builds it instead");
  } else if (!ok) {
    st.build_failures += 1;
  }
  auto step = st.policy->built(static_cast<size_t>(builder), id, ok, infra);
  eval_result where;  // names the builder in a failed build's answer
  where.job_id = id;
  where.slot = "builder" + std::to_string(builder);
  apply(self, step, &where, log);
}

void on_done(manager_actor* self, int32_t slot, eval_result& res, bool infra, bool retry) {
  auto& st = self->state;
  account(self);
  auto running = st.policy->running(static_cast<size_t>(slot));
  if (!running || *running != res.job_id) {
    // A late answer of a slot the pool already gave up on (its actor died).
    log_error(pool_name,
              "slot" + std::to_string(slot) + ": dropped a late result of job " + std::to_string(res.job_id));
    return;
  }
  st.jobs_done += 1;
  st.infra_failures += infra;
  st.run_us_total += static_cast<double>(res.run_us);
  if (infra)
    observe::metrics_registry::process().note_restart("gpu_slot", "slot" + std::to_string(slot) + ": " + res.reason);
  auto step = st.policy->finished(static_cast<size_t>(slot), infra, retry);
  for (auto id : step.retried)
    log_error(pool_name, "job " + std::to_string(id) + " hit an infrastructure failure on slot" + std::to_string(slot) +
                             " (" + res.reason + "); retrying");
  apply(self, step, &res);
}

/// A slot actor is gone (an exception escaped its backend, or it was killed): the slot leaves
/// the pool for good and its job runs elsewhere (or is answered infra_error), as
/// gpu_pool/judgement says of outcome::slot_lost.
void on_slot_down(manager_actor* self, size_t slot, const caf::error& reason) {
  auto& st = self->state;
  account(self);
  auto detail = "eval slot" + std::to_string(slot) + " died: " + to_string(reason);
  log_error(pool_name, detail);
  observe::metrics_registry::process().note_restart("gpu_slot", detail);
  auto running = st.policy->running(slot);
  bool retry = true;
  if (running) {
    st.infra_failures += 1;
    retry = gpu_pool::judge({gpu_pool::outcome::slot_lost, st.jobs.at(*running).req.mode, {}, detail}).retry;
  }
  auto step = st.policy->slot_lost(slot, retry);
  for (auto id : step.retried) log_error(pool_name, "job " + std::to_string(id) + " was on it; retrying");
  apply(self, step, nullptr, detail, true);
}

pool_manager_actor::behavior_type manager(manager_actor* self, gpu_pool::pool_config cfg, size_t slot_count) {
  auto& st = self->state;
  st.policy = std::make_unique<gpu_pool::pool_policy>(slot_count, static_cast<size_t>(cfg.queue_capacity),
                                                      cfg.quarantine_after_failures);
  st.started_us = st.last_event_us = steady_us();
  publish_credits(self);  // nobody subscribed yet: this only shows the idle pool in the node's metrics
  self->set_down_handler([=](caf::down_msg& dm) {
    auto& slots = self->state.slots;
    for (size_t i = 0; i < slots.size(); ++i)
      if (slots[i] && slots[i].address() == dm.source) {
        slots[i] = nullptr;
        on_slot_down(self, i, dm.reason);
        return;
      }
  });
  return {
      [=](eval_request& req) -> caf::typed_response_promise<eval_result> { return on_request(self, req); },
      [=](atoms::done, int32_t slot, eval_result& res, bool infra, bool retry) {
        on_done(self, slot, res, infra, retry);
      },
      [=](std::vector<slot_actor>& slots) {
        for (auto& s : slots) self->monitor(s);
        self->state.slots = std::move(slots);
      },
      [=](atoms::build, std::vector<builder_actor>& builders) {
        self->state.policy->set_builders(builders.size());
        self->state.builders = std::move(builders);
      },
      [=](atoms::built, int32_t builder, uint64_t id, bool ok, bool infra, std::string& log, int64_t build_us) {
        on_built(self, builder, id, ok, infra, log, build_us);
      },
      [=](atoms::subscribe) {
        // Rationale: a subscriber asks for credit reports, so it takes pool_credits (an
        // untyped rollout manager does); the sender's handle arrives untyped.
        auto s = caf::actor_cast<pool_listener_actor>(self->current_sender());
        if (!s) return;
        self->state.subscribers.push_back(s);
        auto& sched = self->state.policy->scheduler();
        self->send(s, pool_credits{static_cast<int32_t>(sched.credits()), static_cast<int32_t>(sched.queued()),
                                   static_cast<int32_t>(sched.busy()), static_cast<int32_t>(sched.healthy())});
      },
      [=](atoms::stats) -> std::map<std::string, double> {
        account(self);
        auto& st = self->state;
        auto& sched = st.policy->scheduler();
        return {{"slots", double(sched.slots())},
                {"healthy", double(sched.healthy())},
                {"busy", double(sched.busy())},
                {"queued", double(sched.queued())},
                {"parked", double(st.policy->parked())},
                {"jobs_done", st.jobs_done},
                {"infra_failures", st.infra_failures},
                {"busy_integral_us", st.busy_integral_us},
                {"queue_us_total", st.queue_us_total},
                {"saturated_busy_us", st.saturated_busy_us},
                {"saturated_slot_us", st.saturated_slot_us},
                {"run_us_total", st.run_us_total},
                {"builders", double(st.builders.size())},
                {"building", double(st.policy->building())},
                {"builds", st.builds},
                {"build_failures", st.build_failures},
                {"build_infra", st.build_infra},
                {"build_us_total", st.build_us_total},
                {"uptime_us", double(steady_us() - st.started_us)}};
      },
      [=](atoms::ping, int32_t slot) -> caf::typed_response_promise<int32_t> {
        auto rp = self->make_response_promise<int32_t>();
        auto& slots = self->state.slots;
        if (slot < 0 || static_cast<size_t>(slot) >= slots.size() || !slots[slot])
          rp.deliver(caf::make_error(caf::sec::invalid_argument, "no such slot"));
        else
          rp.delegate(slots[slot], atoms::ping::value);
        return rp;
      },
  };
}

}  // namespace

pool_actor spawn_gpu_pool(caf::actor_system& sys, const gpu_pool::pool_config& cfg,
                          std::vector<std::unique_ptr<gpu_pool::slot_backend>> backends,
                          std::vector<std::unique_ptr<gpu_pool::build_backend>> builders) {
  auto mgr = sys.spawn(manager, cfg, backends.size());
  slot_manager_actor reports = mgr;
  // The builders' list is in the manager's mailbox before this returns, so before any job.
  std::vector<builder_actor> build_actors;
  int32_t b = 0;
  for (auto& be : builders) {
    std::shared_ptr<gpu_pool::build_backend> shared{std::move(be)};
    mgr->attach_functor([shared](const caf::error&) { shared->abort(); });
    auto actor = spawn_builder(sys, shared, reports, b++);
    mgr->attach_functor([actor](const caf::error&) { caf::anon_send_exit(actor, caf::exit_reason::user_shutdown); });
    build_actors.push_back(actor);
  }
  caf::anon_send(mgr, atoms::build::value, std::move(build_actors));
  std::vector<slot_actor> slots;
  int32_t i = 0;
  for (auto& b : backends) {
    std::shared_ptr<gpu_pool::slot_backend> shared{std::move(b)};
    // On shutdown a slot may be blocked in a job for minutes: abort it so the
    // node exits promptly (the job's episode is shutting down too).
    mgr->attach_functor([shared](const caf::error&) { shared->abort(); });
    auto slot = spawn_slot(sys, shared, reports, i);
    // Slots live and die with their manager.
    mgr->attach_functor([slot](const caf::error&) { caf::anon_send_exit(slot, caf::exit_reason::user_shutdown); });
    slots.push_back(slot);
    ++i;
  }
  caf::anon_send(mgr, std::move(slots));
  return mgr;
}

}  // namespace caf_agent
