#pragma once
/// messages/eval.hpp: evaluation jobs for the GPU pool and their verdicts.

#include <cstdint>
#include <map>
#include <string>

#include "messages/episode.hpp"
#include "messages/fields.hpp"

namespace caf_agent::messages {

/// Episode -> GPU pool: evaluate the workspace's submission files on a slot.
struct eval_request {
  uint64_t job_id = 0;
  uint64_t episode_id = 0;
  eval_mode mode = eval_mode::verify;
  task_spec task;
  std::map<std::string, std::string> files;  ///< model_new.py and kernels/** only
  uint64_t seed = 0;                         ///< never shown to the agent
  int64_t deadline_ms = 0;                   ///< relative; 0 = slot default
  CAF_AGENT_FIELDS(eval_request, job_id, episode_id, mode, task, files, seed, deadline_ms)
};

/// GPU pool -> episode: the verdict of one job.
struct eval_result {
  uint64_t job_id = 0;
  eval_status status = eval_status::ok;  ///< gpu_pool/judgement decides it
  bool correct = false;
  std::string reason;  ///< agent-readable text
  double candidate_ms = 0;
  double eager_ms = 0;
  double compile_ms = 0;
  int32_t reward = 0;         ///< judged only for final evaluations
  std::string slot;           ///< which slot ran it
  std::string verdict_json;   ///< the worker's full verdict
  int64_t queue_us = 0;       ///< waiting for a builder or a slot
  int64_t run_us = 0;         ///< on the slot
  int64_t build_us = 0;       ///< in the pool's build stage, off the slot (0: no build stage)
  bool cached_build = false;  ///< the slot's job found its library built (compiled off the slot)
  CAF_AGENT_FIELDS(eval_result, job_id, status, correct, reason, candidate_ms, eager_ms, compile_ms, reward, slot,
                   verdict_json, queue_us, run_us, build_us, cached_build)
};

/// GPU pool -> rollout managers: current admission state (credits).
struct pool_credits {
  int32_t free_credits = 0;
  int32_t queued = 0;
  int32_t busy_slots = 0;
  int32_t healthy_slots = 0;
  CAF_AGENT_FIELDS(pool_credits, free_credits, queued, busy_slots, healthy_slots)
};

}  // namespace caf_agent::messages
