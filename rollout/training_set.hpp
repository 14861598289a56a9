#pragma once
/// rollout/training_set.hpp: which stored trajectories a training stage may learn from, and
/// the packed batch the learner trains on, built from the records as they are (the sampled
/// token ids, the loss mask and the sampler's log-probabilities; never re-tokenised).
///
/// Infrastructure failures (an aborted episode, an evaluation the pool could not run) are
/// never training data: their reward says nothing about the policy. They are excluded and
/// counted, like every other record a filter drops, so a run can report why its batch is
/// smaller than the episodes it played.

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "messages/trajectory.hpp"

namespace caf_agent::rollout {

/// What a stage takes (the CUDA Agent recipe's filters).
struct training_filter {
  messages::learner_stage stage = messages::learner_stage::ppo;
  /// RFT: the same tool call (name and arguments) at most this many times per episode.
  // Rationale: the paper drops trajectories with redundant loops from RFT; an agent that
  // re-runs an identical command more than three times is stuck, not working.
  int32_t max_repeats = 3;
  /// RFT: the least reward a trajectory needs (the paper: r > 0).
  int32_t min_reward = 1;
  /// Asynchronous training (train.max_policy_lag): a record whose oldest policy version is
  /// below `base_version - max_policy_lag` is "stale"; < 0: no staleness check (synchronous
  /// training, whose records are all at the base version, and data not sampled by this run's
  /// policy: demonstrations, a stage's store).
  int32_t max_policy_lag = -1;
  /// The version the step starts from (it makes base_version + 1).
  uint64_t base_version = 0;
};

/// The kept records and why the others were dropped (reason -> count).
struct training_selection {
  std::vector<const messages::trajectory_record*> kept;
  std::map<std::string, int64_t> dropped;
};

/// Applies `filter` to `records` (in order). Every stage drops infrastructure failures, stale
/// records (when `filter.max_policy_lag` >= 0) and records without sampled tokens; RFT also
/// needs reward >= min_reward, a finished episode (no turn, context or wall limit), no
/// malformed tool call and no redundant loop.
training_selection select_for_training(const std::vector<messages::trajectory_record>& records,
                                       const training_filter& filter);

/// Why `record` is not training data for `filter`, or "" when it is.
std::string training_exclusion(const messages::trajectory_record& record, const training_filter& filter);

/// The largest number of times one tool call (same name and arguments) occurs in the
/// record's turns.
int32_t max_repeated_tool_call(const messages::trajectory_record& record);

/// The packed batch of `kept` as the learner reads it (learner_tool's batch file):
/// {"tokens", "seq_offsets", "loss_mask", "sampler_logp", "rewards", "episode_ids",
///  "policy_versions", "stage"}.
nlohmann::json packed_batch_json(const std::vector<const messages::trajectory_record*>& kept,
                                 messages::learner_stage stage);

}  // namespace caf_agent::rollout
