#pragma once
/// actors/gpu_slot.hpp: the GPU pool's workers: a slot actor per GPU (or CPU slot) over a
/// `gpu_pool::slot_backend`, and a build-stage actor per builder over a
/// `gpu_pool::build_backend`. Only their pool manager (actors/gpu_pool.cpp) talks to them.
///
/// Protocol (typed handles: a message outside it is a compile error):
///   slot_actor:    (atoms::run, eval_request)    -> later (atoms::done, slot, eval_result,
///                                                   infra, retry) to its manager
///                  (atoms::ping)                 -> int32 pid of its worker (0 for sim)
///   builder_actor: (atoms::build, eval_request)  -> later (atoms::built, builder, job id, ok,
///                                                   infra, compiler log, build_us) to its manager
/// `slot_manager_actor` is what both report to; the pool manager's own type extends it.

#include <cstdint>
#include <memory>
#include <string>

#include <caf/fwd.hpp>
#include <caf/replies_to.hpp>
#include <caf/typed_actor.hpp>

#include "gpu_pool/slot_backend.hpp"
#include "messages/eval.hpp"
#include "messages/type_ids.hpp"

namespace caf_agent {

/// What slots and builders report to: a job's result (slot index, result, infrastructure
/// failure?, retry?) and a build's end (builder index, job id, ok, infrastructure failure?,
/// log, build_us).
using slot_manager_actor =
    caf::typed_actor<caf::reacts_to<atoms::done, int32_t, messages::eval_result, bool, bool>,
                     caf::reacts_to<atoms::built, int32_t, uint64_t, bool, bool, std::string, int64_t>>;

/// A slot: runs one job at a time on its backend and reports it to its manager.
using slot_actor =
    caf::typed_actor<caf::reacts_to<atoms::run, messages::eval_request>, caf::replies_to<atoms::ping>::with<int32_t>>;

/// A build-stage actor: builds a job's kernel library on its backend and reports it.
using builder_actor = caf::typed_actor<caf::reacts_to<atoms::build, messages::eval_request>>;

/// Spawns slot `index` over `backend` (detached when the backend blocks), reporting to `manager`.
slot_actor spawn_slot(caf::actor_system& sys, std::shared_ptr<gpu_pool::slot_backend> backend,
                      slot_manager_actor manager, int32_t index);

/// Spawns builder `index` over `backend` (detached: a build blocks), reporting to `manager`.
builder_actor spawn_builder(caf::actor_system& sys, std::shared_ptr<gpu_pool::build_backend> backend,
                            slot_manager_actor manager, int32_t index);

}  // namespace caf_agent
