#pragma once
/// actors/gpu_pool.hpp: the GPU pool: a manager with credits and a bounded queue,
/// and one slot actor per GPU (or CPU slot), each owning one eval backend.
///
/// Build stage (when builders are given): a job whose files hold kernel sources goes to a
/// builder first (CPU cores, the slots' build root), so the slot's job finds its library
/// built and compiles nothing on slot time. A build that fails on the sources ends the job
/// there (correct = false, the compiler's words; reward -1 for a final evaluation) without
/// taking a slot; a builder that fails itself passes the job on (its slot builds it).
/// Jobs waiting for a builder are bounded by the episodes (one outstanding job each).
///
/// Protocol:
///   eval_request            -> eval_result   (the reply may wait: back-pressure)
///   (atoms::subscribe)      -> the sender gets pool_credits whenever admission opens/closes
///   (atoms::stats)          -> std::map<std::string, double> (jobs, busy integral, queue,
///                              builds)
///   (atoms::ping, int32 i)  -> int32 pid of slot i's worker (0 for sim)

#include <functional>
#include <memory>
#include <vector>

#include <caf/fwd.hpp>

#include "gpu_pool/pool_config.hpp"
#include "gpu_pool/scheduler.hpp"
#include "gpu_pool/slot_backend.hpp"

namespace caf_agent {

/// Settings of a pool (defaults: [gpu_pool]'s, gpu_pool/pool_config.hpp).
struct gpu_pool_options {
  size_t queue_capacity = static_cast<size_t>(gpu_pool::pool_config{}.queue_capacity);
  int quarantine_after = gpu_pool::pool_config{}.quarantine_after_failures;
  std::string name = "gpu_pool";
};

/// Spawns the manager, one slot per backend (detached slots for blocking backends) and one
/// detached build-stage actor per builder (none: jobs build on their slot).
caf::actor spawn_gpu_pool(caf::actor_system& sys, gpu_pool_options opts,
                          std::vector<std::unique_ptr<gpu_pool::slot_backend>> backends,
                          std::vector<std::unique_ptr<gpu_pool::build_backend>> builders = {});

}  // namespace caf_agent
