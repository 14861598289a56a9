#pragma once
/// actors/gpu_pool.hpp: the GPU pool: a manager with credits and a bounded queue,
/// and one slot actor per GPU (or CPU slot), each owning one eval backend
/// (actors/gpu_slot.hpp).
///
/// Build stage (when builders are given): a job whose files hold kernel sources goes to a
/// builder first (CPU cores, the slots' build root), so the slot's job finds its library
/// built and compiles nothing on slot time. A build that fails on the sources ends the job
/// there (correct = false, the compiler's words; reward -1 for a final evaluation) without
/// taking a slot; a builder that fails itself passes the job on (its slot builds it).
/// Jobs waiting for a builder are bounded by the episodes (one outstanding job each).
///
/// Protocol (`pool_actor`, typed: a message outside it is a compile error):
///   eval_request            -> eval_result   (the reply may wait: back-pressure)
///   (atoms::subscribe)      -> the sender (a `pool_listener_actor`) gets pool_credits
///                              whenever admission opens/closes
///   (atoms::stats)          -> std::map<std::string, double> (jobs, busy integral, queue,
///                              builds)
///   (atoms::ping, int32 i)  -> int32 pid of slot i's worker (0 for sim)
/// An episode needs only the first line: `evaluator_actor` (the rollout manager serves it
/// too, routing each job to one of its pools).

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <caf/actor.hpp>
#include <caf/fwd.hpp>
#include <caf/replies_to.hpp>
#include <caf/typed_actor.hpp>

#include "gpu_pool/pool_config.hpp"
#include "gpu_pool/scheduler.hpp"
#include "gpu_pool/slot_backend.hpp"
#include "messages/eval.hpp"
#include "messages/type_ids.hpp"

namespace caf_agent {

/// Evaluates one job per request: what an episode holds.
using evaluator_actor = caf::typed_actor<caf::replies_to<messages::eval_request>::with<messages::eval_result>>;

/// The pool manager's protocol (see the file comment).
using pool_actor = evaluator_actor::extend<caf::reacts_to<atoms::subscribe>,
                                           caf::replies_to<atoms::stats>::with<std::map<std::string, double>>,
                                           caf::replies_to<atoms::ping, int32_t>::with<int32_t>>;

/// What a subscriber of a pool receives: its credit reports.
using pool_listener_actor = caf::typed_actor<caf::reacts_to<messages::pool_credits>>;

/// The pool behind a handle that arrives untyped: the coordinator's service registry, its
/// service announcements and a node's role peers hold every service as `caf::actor`, by
/// name, since they carry handles of every protocol (over the network too).
/// Rationale: this is the one conversion from such a handle to `pool_actor`; the service
/// name "gpu_pool" is what vouches for the protocol (CAF checks none at run time).
inline pool_actor pool_of(const caf::actor& service) {
  return caf::actor_cast<pool_actor>(service);
}

/// Spawns the manager over [gpu_pool] as read (`cfg`: its queue_capacity and
/// quarantine_after_failures; the backends stand for its slots), one slot per backend
/// (detached slots for blocking backends) and one detached build-stage actor per builder
/// (none: jobs build on their slot).
pool_actor spawn_gpu_pool(caf::actor_system& sys, const gpu_pool::pool_config& cfg,
                          std::vector<std::unique_ptr<gpu_pool::slot_backend>> backends,
                          std::vector<std::unique_ptr<gpu_pool::build_backend>> builders = {});

}  // namespace caf_agent
