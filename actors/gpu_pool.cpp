// actors/gpu_pool.cpp: see gpu_pool.hpp.
#include "actors/gpu_pool.hpp"

#include <algorithm>
#include <chrono>
#include <deque>
#include <map>

#include <caf/all.hpp>

#include "base/log.hpp"
#include "actors/observed_actor.hpp"
#include "gpu_pool/worker_protocol.hpp"
#include "messages/type_ids.hpp"

namespace caf_agent {

namespace {

using namespace messages;
using steady = std::chrono::steady_clock;

int64_t now_us() {
  return std::chrono::duration_cast<std::chrono::microseconds>(steady::now().time_since_epoch())
      .count();
}

// -- slot ------------------------------------------------------------------

struct slot_state {
  std::shared_ptr<gpu_pool::slot_backend> backend;
  caf::actor manager;
  int32_t index = 0;
  static inline const char* name = "gpu_slot";
};

caf::behavior slot_actor(observed_actor<slot_state>* self, std::shared_ptr<gpu_pool::slot_backend> be,
                         caf::actor manager, int32_t index) {
  self->state.backend = std::move(be);
  self->state.manager = manager;
  self->state.index = index;
  self->attach_functor([b = self->state.backend] { b->stop(); });
  return {
      [=](atoms::run, eval_request& req) {
        auto& st = self->state;
        auto t0 = now_us();
        auto reply = st.backend->run(req);
        reply.result.slot = "slot" + std::to_string(st.index);
        if (!reply.notice.empty()) {
          log_error("gpu-pool", reply.result.slot + ": " + reply.notice);
          observe::metrics_registry::process().note_restart("gpu_slot", reply.result.slot + ": " + reply.notice);
        }
        if (reply.delay.count() > 0) {
          reply.result.run_us = reply.delay.count();
          self->delayed_send(st.manager, reply.delay, atoms::done::value, st.index, reply.result,
                             reply.infra_failure, reply.retry);
        } else {
          reply.result.run_us = now_us() - t0;
          self->send(st.manager, atoms::done::value, st.index, reply.result, reply.infra_failure,
                     reply.retry);
        }
      },
      [=](atoms::ping) -> int32_t { return self->state.backend->worker_pid(); },
  };
}

// -- builder ---------------------------------------------------------------

struct builder_state {
  static inline const char* name = "eval_builder";
};

caf::behavior builder_actor(observed_actor<builder_state>* self, std::shared_ptr<gpu_pool::build_backend> be,
                            caf::actor manager, int32_t index) {
  self->attach_functor([be] { be->stop(); });
  return {
      [=](atoms::build, eval_request& req) {
        auto t0 = now_us();
        auto r = be->build(req);
        if (!r.notice.empty()) {
          log_error("gpu-pool", "builder" + std::to_string(index) + ": " + r.notice);
          observe::metrics_registry::process().note_restart("eval_builder", "builder" + std::to_string(index) + ": " + r.notice);
        }
        self->send(manager, atoms::built::value, index, req.job_id, r.ok, r.infra_failure, r.log,
                   now_us() - t0);
      },
  };
}

// -- manager ---------------------------------------------------------------

struct job_entry {
  eval_request req;
  caf::response_promise promise;
  int64_t enqueued_us = 0;
  int attempts = 0;
  int64_t build_us = 0;  // time in a builder (0: none)
};

struct manager_state {
  gpu_pool_options opts;
  std::unique_ptr<gpu_pool::slot_scheduler> sched;
  std::vector<caf::actor> slots;
  std::map<uint64_t, job_entry> jobs;  // queued or running
  std::deque<uint64_t> parked;         // queue full: waiting for a credit (bounded by episodes)
  std::vector<caf::actor> subscribers;
  std::vector<caf::actor> builders;
  std::vector<bool> builder_busy;
  std::deque<uint64_t> to_build;  // jobs waiting for a builder
  double builds = 0, build_failures = 0, build_infra = 0, build_us_total = 0;
  bool open = true;
  pool_credits last_published{-1, -1, -1, -1};
  double jobs_done = 0, infra_failures = 0, queue_us_total = 0;
  double busy_integral_us = 0;
  double saturated_busy_us = 0, saturated_slot_us = 0;
  double run_us_total = 0;  // time slots spent running jobs, as slots measure it
  int64_t last_event_us = 0;
  int64_t started_us = 0;
  static inline const char* name = "gpu_pool";
};

using manager_actor = observed_actor<manager_state>;

/// Integrates busy slots over time, overall and while work was waiting (the
/// state between two events is constant, so this is exact).
void account(manager_actor* self) {
  auto& st = self->state;
  auto now = now_us();
  auto dt = static_cast<double>(now - st.last_event_us);
  auto busy = static_cast<double>(st.sched->busy());
  st.busy_integral_us += busy * dt;
  if (st.sched->queued() + st.parked.size() > 0) {
    st.saturated_busy_us += busy * dt;
    st.saturated_slot_us += static_cast<double>(st.sched->healthy()) * dt;
  }
  st.last_event_us = now;
}

/// Tells subscribers the pool's state whenever it changed: rollout managers spread
/// evaluations over pools by these reports (idle slots, queue depth, credits).
void publish_credits(manager_actor* self) {
  auto& st = self->state;
  bool open = st.sched->credits() > 0 && st.parked.empty();
  st.open = open;
  pool_credits pc{open ? static_cast<int32_t>(st.sched->credits()) : 0, static_cast<int32_t>(st.sched->queued() + st.parked.size()),
                  static_cast<int32_t>(st.sched->busy()), static_cast<int32_t>(st.sched->healthy())};
  observe::metrics_registry::process().pool_update(
      {st.opts.name, static_cast<int32_t>(st.sched->slots()), pc.healthy_slots, pc.busy_slots, pc.queued,
       static_cast<int32_t>(st.to_build.size() + std::count(st.builder_busy.begin(), st.builder_busy.end(), true)),
       static_cast<int64_t>(st.jobs_done), static_cast<int64_t>(st.infra_failures), {}});
  if (pc == st.last_published) return;
  st.last_published = pc;
  for (auto& s : st.subscribers) self->send(s, pc);
}

/// Final evaluations go before intermediate ones.
gpu_pool::job_kind kind_of(const eval_request& req) {
  return req.mode == eval_mode::final ? gpu_pool::job_kind::final_eval : gpu_pool::job_kind::intermediate;
}

/// Answers a job the scheduler would not take (no healthy slot, or the episode already has an
/// evaluation outstanding) and forgets it.
void refuse(manager_actor* self, uint64_t id, gpu_pool::admit_result admitted) {
  auto& st = self->state;
  auto& e = st.jobs.at(id);
  auto r = gpu_pool::result_of(admitted == gpu_pool::admit_result::no_slots
                         ? gpu_pool::judge({gpu_pool::outcome::no_healthy_slot, e.req.mode, {}, ""})
                         : gpu_pool::judge({gpu_pool::outcome::refused, e.req.mode, {},
                                            "episode already has an evaluation outstanding"}),
                     id);
  r.build_us = e.build_us;
  e.promise.deliver(std::move(r));
  st.jobs.erase(id);
}

void dispatch(manager_actor* self) {
  auto& st = self->state;
  while (!st.parked.empty() && st.sched->credits() > 0) {
    auto id = st.parked.front();
    auto& e = st.jobs.at(id);
    auto kind = kind_of(e.req);
    auto admitted = st.sched->submit({id, e.req.episode_id, kind});
    if (admitted == gpu_pool::admit_result::queue_full) break;
    st.parked.pop_front();
    // E.g. a retried job whose last healthy slot was just quarantined: answered now, not
    // parked for good (which also kept the pool closed to every rollout manager).
    if (admitted != gpu_pool::admit_result::queued) refuse(self, id, admitted);
  }
  while (auto a = st.sched->next()) {
    account(self);
    auto& e = st.jobs.at(a->job.job_id);
    e.req.deadline_ms = e.req.deadline_ms;  // slot default applies when 0
    st.queue_us_total += static_cast<double>(now_us() - e.enqueued_us);
    observe::metrics_registry::process().pool_wait(st.opts.name, now_us() - e.enqueued_us);
    self->send(st.slots[a->slot], atoms::run::value, e.req);
  }
  publish_credits(self);
}

void dispatch_builds(manager_actor* self) {
  auto& st = self->state;
  for (size_t i = 0; i < st.builders.size() && !st.to_build.empty(); ++i) {
    if (st.builder_busy[i]) continue;
    auto id = st.to_build.front();
    st.to_build.pop_front();
    st.builder_busy[i] = true;
    self->send(st.builders[i], atoms::build::value, st.jobs.at(id).req);
  }
}

/// Hands a stored job to the slot scheduler (or parks it while the queue is full).
void admit(manager_actor* self, uint64_t id) {
  auto& st = self->state;
  auto& e = st.jobs.at(id);
  auto kind = kind_of(e.req);
  auto admitted = st.sched->submit({id, e.req.episode_id, kind});
  if (admitted == gpu_pool::admit_result::queue_full) {
    st.parked.push_back(id);  // back-pressure: the reply waits, nobody polls
  } else if (admitted != gpu_pool::admit_result::queued) {
    refuse(self, id, admitted);
    return;
  }
  dispatch(self);
}

caf::response_promise on_request(manager_actor* self, eval_request& req) {
  auto& st = self->state;
  auto promise = self->make_response_promise();
  if (st.jobs.contains(req.job_id)) {
    promise.deliver(gpu_pool::result_of(gpu_pool::judge({gpu_pool::outcome::refused, req.mode, {},
                                               "duplicate job id " + std::to_string(req.job_id)}),
                              req.job_id));
    return promise;
  }
  auto id = req.job_id;
  bool build_first = !st.builders.empty() && gpu_pool::has_kernel_sources(req.files);
  st.jobs[id] = {std::move(req), promise, now_us()};
  if (build_first) {
    st.to_build.push_back(id);
    dispatch_builds(self);
  } else {
    admit(self, id);
  }
  return promise;
}

void on_built(manager_actor* self, int32_t builder, uint64_t id, bool ok, bool infra,
              std::string& log, int64_t build_us) {
  auto& st = self->state;
  st.builder_busy.at(static_cast<size_t>(builder)) = false;
  st.builds += 1;
  st.build_us_total += static_cast<double>(build_us);
  auto it = st.jobs.find(id);
  if (it != st.jobs.end()) {
    auto& e = it->second;
    e.build_us = build_us;
    if (infra) {
      st.build_infra += 1;
      log_error(st.opts.name, "builder" + std::to_string(builder) + " failed on job " + std::to_string(id) +
                                  " (" + log.substr(0, 500) + "); its slot builds it instead");
      admit(self, id);
    } else if (!ok) {
      st.build_failures += 1;
      auto r = gpu_pool::result_of(gpu_pool::judge({gpu_pool::outcome::build_failed, e.req.mode, {}, log}), id);
      r.build_us = build_us;
      r.queue_us = now_us() - e.enqueued_us - build_us;
      r.slot = "builder" + std::to_string(builder);
      e.promise.deliver(std::move(r));
      st.jobs.erase(it);
    } else {
      admit(self, id);
    }
  }
  dispatch_builds(self);
}

void on_done(manager_actor* self, int32_t slot, eval_result& res, bool infra, bool retry) {
  auto& st = self->state;
  account(self);
  auto it = st.jobs.find(res.job_id);
  if (st.sched->finish(static_cast<size_t>(slot), infra))
    log_error(st.opts.name, "slot" + std::to_string(slot) + " quarantined after repeated failures");
  st.jobs_done += 1;
  st.infra_failures += infra;
  st.run_us_total += static_cast<double>(res.run_us);
  if (infra) observe::metrics_registry::process().note_restart("gpu_slot", "slot" + std::to_string(slot) + ": " + res.reason);
  // gpu_pool/judgement says whether the job runs again, and how often (max_infra_retries).
  if (retry && it != st.jobs.end() && it->second.attempts++ < gpu_pool::max_infra_retries) {
    log_error(st.opts.name, "job " + std::to_string(res.job_id) + " hit an infrastructure failure on slot" +
                                std::to_string(slot) + " (" + res.reason + "); retrying");
    st.parked.push_front(res.job_id);
    dispatch(self);
    return;
  }
  if (it != st.jobs.end()) {
    res.build_us = it->second.build_us;
    res.queue_us = now_us() - it->second.enqueued_us - res.run_us - res.build_us;
    it->second.promise.deliver(std::move(res));
    st.jobs.erase(it);
  }
  dispatch(self);
}

caf::behavior manager(manager_actor* self, gpu_pool_options opts, size_t slot_count) {
  auto& st = self->state;
  st.opts = opts;
  st.sched = std::make_unique<gpu_pool::slot_scheduler>(slot_count, opts.queue_capacity,
                                                        opts.quarantine_after);
  st.started_us = st.last_event_us = now_us();
  publish_credits(self);  // nobody subscribed yet: this only shows the idle pool in the node's metrics
  return {
      [=](eval_request& req) -> caf::response_promise { return on_request(self, req); },
      [=](atoms::done, int32_t slot, eval_result& res, bool infra, bool retry) {
        on_done(self, slot, res, infra, retry);
      },
      [=](std::vector<caf::actor>& slots) { self->state.slots = std::move(slots); },
      [=](atoms::build, std::vector<caf::actor>& builders) {
        self->state.builder_busy.assign(builders.size(), false);
        self->state.builders = std::move(builders);
      },
      [=](atoms::built, int32_t builder, uint64_t id, bool ok, bool infra, std::string& log,
          int64_t build_us) { on_built(self, builder, id, ok, infra, log, build_us); },
      [=](atoms::subscribe) {
        auto s = caf::actor_cast<caf::actor>(self->current_sender());
        if (!s) return;
        self->state.subscribers.push_back(s);
        auto& st = self->state;
        self->send(s, pool_credits{static_cast<int32_t>(st.sched->credits()),
                                   static_cast<int32_t>(st.sched->queued()),
                                   static_cast<int32_t>(st.sched->busy()),
                                   static_cast<int32_t>(st.sched->healthy())});
      },
      [=](atoms::stats) -> std::map<std::string, double> {
        account(self);
        auto& st = self->state;
        return {{"slots", double(st.sched->slots())},      {"healthy", double(st.sched->healthy())},
                {"busy", double(st.sched->busy())},        {"queued", double(st.sched->queued())},
                {"parked", double(st.parked.size())},      {"jobs_done", st.jobs_done},
                {"infra_failures", st.infra_failures},    {"busy_integral_us", st.busy_integral_us},
                {"queue_us_total", st.queue_us_total},
                {"saturated_busy_us", st.saturated_busy_us},
                {"saturated_slot_us", st.saturated_slot_us},
                {"run_us_total", st.run_us_total},
                {"builders", double(st.builders.size())},
                {"building", double(st.to_build.size() + std::count(st.builder_busy.begin(),
                                                                     st.builder_busy.end(), true))},
                {"builds", st.builds},                    {"build_failures", st.build_failures},
                {"build_infra", st.build_infra},          {"build_us_total", st.build_us_total},
                {"uptime_us", double(now_us() - st.started_us)}};
      },
      [=](atoms::ping, int32_t slot) -> caf::response_promise {
        auto rp = self->make_response_promise();
        auto& slots = self->state.slots;
        if (slot < 0 || static_cast<size_t>(slot) >= slots.size())
          rp.deliver(caf::make_error(caf::sec::invalid_argument, "no such slot"));
        else
          rp.delegate(slots[slot], atoms::ping::value);
        return rp;
      },
  };
}

}  // namespace

caf::actor spawn_gpu_pool(caf::actor_system& sys, gpu_pool_options opts,
                          std::vector<std::unique_ptr<gpu_pool::slot_backend>> backends,
                          std::vector<std::unique_ptr<gpu_pool::build_backend>> builders) {
  auto mgr = sys.spawn(manager, opts, backends.size());
  // The builders' list is in the manager's mailbox before this returns, so before any job.
  std::vector<caf::actor> build_actors;
  int32_t b = 0;
  for (auto& be : builders) {
    std::shared_ptr<gpu_pool::build_backend> shared{std::move(be)};
    mgr->attach_functor([shared](const caf::error&) { shared->abort(); });
    auto actor = sys.spawn<caf::detached>(builder_actor, shared, mgr, b++);
    mgr->attach_functor([actor](const caf::error&) {
      caf::anon_send_exit(actor, caf::exit_reason::user_shutdown);
    });
    build_actors.push_back(actor);
  }
  caf::anon_send(mgr, atoms::build::value, std::move(build_actors));
  std::vector<caf::actor> slots;
  int32_t i = 0;
  for (auto& b : backends) {
    std::shared_ptr<gpu_pool::slot_backend> shared{std::move(b)};
    // On shutdown a slot may be blocked in a job for minutes: abort it so the
    // node exits promptly (the job's episode is shutting down too).
    mgr->attach_functor([shared](const caf::error&) { shared->abort(); });
    auto slot = shared->blocking() ? sys.spawn<caf::detached>(slot_actor, shared, mgr, i)
                                   : sys.spawn(slot_actor, shared, mgr, i);
    // Slots live and die with their manager.
    mgr->attach_functor([slot](const caf::error&) {
      caf::anon_send_exit(slot, caf::exit_reason::user_shutdown);
    });
    slots.push_back(slot);
    ++i;
  }
  caf::anon_send(mgr, std::move(slots));
  return mgr;
}

}  // namespace caf_agent
