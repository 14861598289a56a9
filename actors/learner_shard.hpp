#pragma once
/// actors/learner_shard.hpp: one learner shard, the actor of `--role learner`.
///
/// train_batch -> train_step_done (to the sender). The shard runs learner::shard_session: it
/// joins the step's process group (gloo on CPU, NCCL on GPUs), loads the step's base version
/// when it holds another one (a restarted shard, a survivor of a failed step), trains its share
/// of the batch, and on rank 0 writes the new version's checkpoint. A step blocks its thread for
/// its whole length, so the actor is detached (its own thread, never the scheduler's). A failed
/// step (a peer died mid all-reduce) is answered with the error; the trainer retries it.
///
/// Built only with LibTorch (target caf_agent_learner_actors); the header has no torch types.

#include <cstdint>
#include <string>

#include <caf/fwd.hpp>

#include "learner/shard_session.hpp"

namespace caf_agent {

/// Spawns the shard (detached). `node_id` names it in its answers.
caf::actor spawn_learner_shard(caf::actor_system& sys, learner::shard_options options, std::string node_id);

}  // namespace caf_agent
