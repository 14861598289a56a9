#pragma once
/// runtime/train_job.hpp: a training run (`--role coordinator --train`, or `--role local` with
/// [train] enabled): the trainer actor over the cluster's rollout nodes, learner shards and
/// policy services; returns the run's exit code (see actors/trainer.hpp).

#include <caf/actor.hpp>
#include <caf/fwd.hpp>

#include "actors/trainer.hpp"
#include "runtime/config.hpp"
#include "runtime/process.hpp"

namespace caf_agent::runtime {

/// The trainer's settings from the config. `in_process`: the local role (one shard; the
/// engines share the process, so weights go to them as tensors when learner.weight_sync = auto).
trainer_options trainer_options_of(const app_config& cfg, bool in_process);

/// Runs the trainer until its stages are done, it stops, or `latch` fires (then it stops cleanly:
/// started episodes end in one record, the state stays resumable).
int run_training(caf::actor_system& sys, const app_config& cfg, caf::actor coordinator, exit_latch& latch,
                 bool in_process);

}  // namespace caf_agent::runtime
