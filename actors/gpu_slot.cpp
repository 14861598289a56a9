// actors/gpu_slot.cpp: see gpu_slot.hpp.
#include "actors/gpu_slot.hpp"

#include <caf/all.hpp>

#include "actors/observed_actor.hpp"
#include "base/log.hpp"

namespace caf_agent {

namespace {

using namespace messages;

// -- slot ------------------------------------------------------------------

struct slot_state {
  std::shared_ptr<gpu_pool::slot_backend> backend;
  slot_manager_actor manager;
  int32_t index = 0;
  static inline const char* name = "gpu_slot";
};

slot_actor::behavior_type slot(observed_actor<slot_state, slot_actor::base>* self,
                               std::shared_ptr<gpu_pool::slot_backend> be, slot_manager_actor manager, int32_t index) {
  self->state.backend = std::move(be);
  self->state.manager = manager;
  self->state.index = index;
  self->attach_functor([b = self->state.backend] { b->stop(); });
  return {
      [=](atoms::run, eval_request& req) {
        auto& st = self->state;
        auto t0 = steady_us();
        auto reply = st.backend->run(req);
        reply.result.slot = "slot" + std::to_string(st.index);
        if (!reply.notice.empty()) {
          log_error("gpu-pool", reply.result.slot + ": " + reply.notice);
          observe::metrics_registry::process().note_restart("gpu_slot", reply.result.slot + ": " + reply.notice);
        }
        if (reply.delay.count() > 0) {
          reply.result.run_us = reply.delay.count();
          self->delayed_send(st.manager, reply.delay, atoms::done::value, st.index, reply.result, reply.infra_failure,
                             reply.retry);
        } else {
          reply.result.run_us = steady_us() - t0;
          self->send(st.manager, atoms::done::value, st.index, reply.result, reply.infra_failure, reply.retry);
        }
      },
      [=](atoms::ping) -> int32_t { return self->state.backend->worker_pid(); },
  };
}

// -- builder ---------------------------------------------------------------

struct builder_state {
  static inline const char* name = "eval_builder";
};

builder_actor::behavior_type builder(observed_actor<builder_state, builder_actor::base>* self,
                                     std::shared_ptr<gpu_pool::build_backend> be, slot_manager_actor manager,
                                     int32_t index) {
  self->attach_functor([be] { be->stop(); });
  return {
      [=](atoms::build, eval_request& req) {
        auto t0 = steady_us();
        auto r = be->build(req);
        if (!r.notice.empty()) {
          log_error("gpu-pool", "builder" + std::to_string(index) + ": " + r.notice);
          observe::metrics_registry::process().note_restart("eval_builder",
                                                            "builder" + std::to_string(index) + ": " + r.notice);
        }
        self->send(manager, atoms::built::value, index, req.job_id, r.ok, r.infra_failure, r.log, steady_us() - t0);
      },
  };
}

}  // namespace

slot_actor spawn_slot(caf::actor_system& sys, std::shared_ptr<gpu_pool::slot_backend> backend,
                      slot_manager_actor manager, int32_t index) {
  bool blocking = backend->blocking();
  return blocking ? sys.spawn<caf::detached>(slot, std::move(backend), std::move(manager), index)
                  : sys.spawn(slot, std::move(backend), std::move(manager), index);
}

builder_actor spawn_builder(caf::actor_system& sys, std::shared_ptr<gpu_pool::build_backend> backend,
                            slot_manager_actor manager, int32_t index) {
  return sys.spawn<caf::detached>(builder, std::move(backend), std::move(manager), index);
}

}  // namespace caf_agent
