#pragma once
/// gpu_pool/pool_config.hpp: [gpu_pool], a node's evaluation slots and admission (defaults, the
/// field list that runtime/ reads TOML through and prints config/defaults.toml from, checks).

#include <cstdint>
#include <string>

#include "base/config_fields.hpp"
#include "base/named_enum.hpp"

namespace caf_agent::gpu_pool {

/// What runs a slot's evaluations ([gpu_pool] backend): the real eval worker, or simulated
/// latency (load tests, no worker).
enum class pool_backend : uint8_t { worker, sim };
CAF_AGENT_ENUM_NAMES(pool_backend, "worker", "sim")

/// What a node's slots evaluate on ([gpu_pool] device): CPU cores, or one GPU per slot.
enum class pool_device : uint8_t { cpu, cuda };
CAF_AGENT_ENUM_NAMES(pool_device, "cpu", "cuda")

/// [gpu_pool]: what each member means is said once, in fields().
struct pool_config {
  int32_t slots = 1;
  pool_device device = pool_device::cpu;
  int32_t queue_capacity = 64;
  int64_t job_deadline_s = 300;
  int32_t quarantine_after_failures = 3;
  int32_t cpu_threads_per_slot = 1;
  int32_t build_workers = -1;
  std::string worker_python = ".venv/bin/python";
  pool_backend backend = pool_backend::worker;

  /// build_workers with -1 resolved: one per slot on cuda (compiles stay off GPU time), none on
  /// cpu (a CPU slot's build and its cores are the same resource).
  int32_t builders() const { return build_workers >= 0 ? build_workers : device == pool_device::cuda ? slots : 0; }

  /// The field list (base/config_fields.hpp).
  template <class F, class Self>
  static void fields(F& f, Self& c) {
    using namespace base;
    // Rationale for the bounds: a node has at most a few dozen GPUs; 4096 CPU slots is already absurd.
    f("slots", c.slots, "evaluation slots (one per GPU; on cpu, CPU slots)", positive(), range(1, 4096));
    f("device", c.device, "cpu or cuda");
    f("queue_capacity", c.queue_capacity, "admission queue; full = episodes wait", positive(), range(1, 1000000));
    f("job_deadline_s", c.job_deadline_s, "a job running longer is killed and its worker restarted", positive());
    f("quarantine_after_failures", c.quarantine_after_failures,
      "consecutive infrastructure failures before a slot is quarantined", positive());
    f("cpu_threads_per_slot", c.cpu_threads_per_slot, "torch threads of a slot's eval worker", positive(),
      range(1, 1024));
    f("build_workers", c.build_workers,
      "compile ahead of the slots on CPU: -1 one per slot on cuda, none on cpu; 0 off");
    f("worker_python", c.worker_python, "the Python that runs the eval worker");
    f("backend", c.backend, "worker: the real eval worker; sim: simulated latency");
  }
  /// Rules the field list cannot say (their text names the value).
  void validate(base::config_errors& e) const {
    if (build_workers < -1)
      e.error("build_workers",
              "must be >= -1 (-1: one per slot on cuda, none on cpu), got " + std::to_string(build_workers));
  }
};

}  // namespace caf_agent::gpu_pool
