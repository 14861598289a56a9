#pragma once
/// actors/gpu_pool.hpp: the GPU pool: a manager with credits and a bounded queue,
/// and one slot actor per GPU (or CPU slot), each owning one eval backend.
///
/// Protocol:
///   eval_request            -> eval_result   (the reply may wait: back-pressure)
///   (atoms::subscribe)      -> the sender gets pool_credits whenever admission opens/closes
///   (atoms::stats)          -> std::map<std::string, double> (jobs, busy integral, queue)
///   (atoms::ping, int32 i)  -> int32 pid of slot i's worker (0 for sim)

#include <functional>
#include <memory>
#include <vector>

#include <caf/fwd.hpp>

#include "actors/slot_backend.hpp"
#include "gpu_pool/scheduler.hpp"

namespace caf_agent {

/// Settings of a pool.
struct gpu_pool_options {
  size_t queue_capacity = 64;
  int quarantine_after = 3;
  std::string name = "gpu_pool";
};

/// Spawns the manager and one slot per backend (detached slots for blocking backends).
caf::actor spawn_gpu_pool(caf::actor_system& sys, gpu_pool_options opts,
                          std::vector<std::unique_ptr<slot_backend>> backends);

}  // namespace caf_agent
