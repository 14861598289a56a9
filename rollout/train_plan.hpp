#pragma once
/// rollout/train_plan.hpp: the trainer's stage state, kept in its run directory so a killed
/// trainer or learner resumes without consuming an episode twice or skipping one.
///
/// `train_state.json` holds the stage (index into the configured stages, its step), the policy
/// version and its checkpoint, the data cursor (the next episode id to plan; for a stage that
/// reads a store, the index of its next record), the episodes of the iteration in progress
/// (planned: re-running it plays only those without a record), those of the iteration an
/// asynchronous run plays ahead (the same rule: planned before they are played, re-played by id
/// on resume) and every consumed episode id by iteration. It is written atomically after each
/// committed step; an iteration's episodes are consumed exactly when its step is committed. The
/// settings that shape the run (stages and their rules, the batch, the model, the tasks) are
/// kept beside it: a directory of another config is refused naming the first setting that
/// differs.

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "messages/enums.hpp"
#include "rollout/train_config.hpp"

namespace caf_agent::rollout {

/// On-disk format version of train_state.json; bump on any field change.
/// 2: `stage_data` (version 1 files are read with it empty). 3: `ahead` (older files are read
/// with it empty).
inline constexpr uint32_t train_state_format_version = 3;

/// The state file's name inside the trainer's run directory.
inline constexpr const char* train_state_file = "train_state.json";

/// One committed iteration: what it consumed.
struct consumed_batch {
  uint64_t iteration = 0;
  std::string stage;
  uint64_t policy_version = 0;             ///< the version the step produced (unchanged: no step)
  std::vector<uint64_t> episode_ids;       ///< every episode of the iteration (kept or dropped)
  int64_t kept = 0;                        ///< of them, training data
  std::map<std::string, int64_t> dropped;  ///< why the others were not
};

/// Why a stage ended (train_state.json `stages_done[].outcome` holds its name): its iterations
/// were reached, value pretraining's explained variance reached the gate, or its step cap came
/// first (the gate never opened).
enum class stage_end : uint8_t { iterations, gate, cap };
CAF_AGENT_ENUM_NAMES(stage_end, "iterations", "gate", "cap")

/// How a finished stage ended.
struct stage_outcome {
  std::string stage;
  int64_t steps = 0;
  stage_end outcome = stage_end::iterations;
  double explained_variance = 0;
};

/// The whole state.
struct train_state {
  uint32_t format_version = train_state_format_version;
  nlohmann::json settings;        ///< the run-shaping settings (see settings_mismatch)
  size_t stage_index = 0;         ///< into the configured stages; == their count: finished
  int64_t stage_step = 0;         ///< committed steps of the current stage
  uint64_t iteration = 0;         ///< committed iterations overall
  uint64_t policy_version = 0;    ///< 0: the base model
  std::string checkpoint;         ///< the checkpoint of policy_version ("" for 0)
  uint64_t next_episode_id = 1;   ///< data cursor of fresh episodes
  int64_t store_cursor = 0;       ///< data cursor of a stage that reads a store (its next record)
  std::vector<uint64_t> pending;  ///< the iteration in progress (planned, not yet consumed)
  /// The next iteration, planned while `pending`'s step runs (train.async); it becomes
  /// `pending` when that one is committed (plan_iteration).
  std::vector<uint64_t> ahead;
  /// The current stage's own data set, when it has one (train.rft.demonstrations: the episodes
  /// that played the recordings, consumed by the stage's first iteration and trained on by
  /// every later one); cleared when the stage ends.
  std::vector<uint64_t> stage_data;
  int64_t empty_iterations = 0;  ///< consecutive iterations without training data
  std::vector<consumed_batch> consumed;
  std::vector<stage_outcome> stages_done;
};

/// The state as JSON and back (from_json names a missing or mistyped field).
nlohmann::json to_json(const train_state& s);
std::optional<std::string> from_json(const nlohmann::json& j, train_state& out);

/// Reads `dir`/train_state.json; nullopt in `out` when there is none. Errors name the file.
std::optional<std::string> read_train_state(const std::filesystem::path& dir, std::optional<train_state>& out);

/// Writes `dir`/train_state.json atomically (temporary name, fsync, rename, fsync of the directory).
std::optional<std::string> write_train_state(const std::filesystem::path& dir, const train_state& s);

/// The first setting that differs between a run directory's `saved` settings and `current`,
/// as "KEY: DIR's VALUE, this config's VALUE"; "" when they agree.
std::string settings_mismatch(const nlohmann::json& saved, const nlohmann::json& current);

/// The episodes of the iteration in progress: `pending` when a resumed iteration has them, else
/// the iteration played ahead (`ahead`, moved to `pending`), else the next `count` ids (the
/// cursor moves past them; the caller writes the state before playing).
const std::vector<uint64_t>& plan_iteration(train_state& s, int32_t count);

/// The episodes of the iteration after `pending`, played while its step runs: `ahead` when a
/// resumed run has them, else the next `count` ids (the caller writes the state before playing).
const std::vector<uint64_t>& plan_ahead(train_state& s, int32_t count);

/// Every episode id consumed so far, in order.
std::vector<uint64_t> consumed_ids(const train_state& s);

/// Commits the iteration in progress: its episodes are consumed (recorded in `batch`), the
/// pending list is cleared (`ahead` stays: the next plan_iteration takes it); a step that was
/// taken (`stepped`) counts toward the stage and moves the version to `batch.policy_version`
/// with `checkpoint`.
void commit_iteration(train_state& s, consumed_batch batch, bool stepped, const std::string& checkpoint);

/// The stopping rule of a stage after its latest step: nullopt (go on), or why it ends.
/// `iterations` applies to every stage but value_pretrain, which stops when `explained_variance`
/// reaches `min_explained_variance` (gate) or after `max_steps` steps (cap).
std::optional<stage_end> stage_stop_reason(stage_kind stage, int64_t steps, int32_t iterations,
                                           double explained_variance, double min_explained_variance, int32_t max_steps);

/// Moves to the next stage, recording how the current one ended.
void advance_stage(train_state& s, stage_kind stage, stage_end outcome, double explained_variance);

/// The learner's stage of a trainer stage: ppo (single_turn_ppo, agentic_ppo), rft, vp (value_pretrain).
messages::learner_stage learner_stage(stage_kind stage);

}  // namespace caf_agent::rollout
