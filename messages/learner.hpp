#pragma once
/// messages/learner.hpp: batches to learner shards and weight publication.

#include <cstdint>
#include <string>
#include <vector>

#include "messages/fields.hpp"

namespace caf_agent::messages {

/// Coordinator -> learner shard: train on these trajectories (by store index).
struct train_batch {
  uint64_t batch_id = 0;
  std::string stage;  ///< single_turn_ppo, rft, value_pretrain, agentic_ppo
  std::vector<uint64_t> episode_ids;
  std::string store_path;
  CAF_AGENT_FIELDS(train_batch, batch_id, stage, episode_ids, store_path)
};

/// Learner -> coordinator: a batch's step is done.
struct train_step_done {
  uint64_t batch_id = 0;
  uint64_t policy_version = 0;
  double loss = 0;
  std::string error;
  CAF_AGENT_FIELDS(train_step_done, batch_id, policy_version, loss, error)
};

/// Learner -> policy backends: new weights are on disk.
struct weights_published {
  uint64_t version = 0;
  std::string path;
  CAF_AGENT_FIELDS(weights_published, version, path)
};

}  // namespace caf_agent::messages
