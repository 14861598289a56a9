#pragma once
/// actors/run_driver.hpp: the coordinator's episode driver and trajectory store.
///
/// Plans `episodes` start_episode messages over the tasks (or takes `planned`), skips
/// those the store already holds (a resumed run), and hands the rest to rollout managers
/// through a `rollout::dispatch_ledger`: a node's load is what the driver sent it minus
/// what it recorded, so no node ever holds more than its limit (the limit comes from
/// the node's capacity reports; until the first, room for one). Each trajectory record
/// is stored once. A lost node's episodes that never started go back to the queue;
/// started ones are recorded as aborted with the reason (or re-run with the next
/// attempt when `retry_aborted`). A storage fault closes admission and ends the run at
/// once (`run_summary::storage_error`, what was kept). When every planned episode has
/// its record it calls `on_finished` with the summary.

#include <functional>
#include <map>
#include <string>
#include <vector>

#include <caf/actor.hpp>
#include <caf/fwd.hpp>

#include "messages/episode.hpp"

namespace caf_agent {

/// Summary of a finished run.
struct run_summary {
  int planned = 0;
  int recorded = 0;
  int aborted = 0;
  int duplicates = 0;
  int store_errors = 0;
  int requeued = 0;  ///< unstarted episodes of lost nodes sent again
  int resumed = 0;   ///< planned episodes the store already held at start
  std::string store_dir;
  std::string storage_error;  ///< set when the store failed: the run stopped there
  std::string kept;           ///< what the store holds, e.g. "12 records (episodes 1-12)"
  /// Evaluations per GPU-pool node, from the rollout managers that routed them.
  std::map<std::string, int64_t> evaluations_per_pool;
};

/// Settings of the driver.
struct run_driver_options {
  std::vector<messages::task_spec> tasks;
  int episodes = 0;  ///< total; tasks are cycled
  messages::episode_mode mode = messages::episode_mode::eval;
  int max_turns = 200;
  int64_t wall_limit_ms = 0;
  std::string store_dir;
  uint64_t seed = 1;
  /// The run's episodes, when given (a resumed run's plan); else made from the fields above.
  std::vector<messages::start_episode> planned;
  bool retry_aborted = false;  ///< re-run a lost node's started episodes (next attempt)
  caf::actor coordinator;      ///< subscribed to for rollout services and node losses
  std::function<void(const run_summary&)> on_finished;
};

/// The run's episodes as the driver plans them from `opts` (tasks cycled, seeds derived).
std::vector<messages::start_episode> plan_episodes(const run_driver_options& opts);

/// "1-5,7,9-10": episode ids as ranges (for logs and the storage-failure message).
std::string format_id_ranges(std::vector<uint64_t> ids);

/// Spawns the driver. Returns nullptr and sets `error` when the store cannot open.
caf::actor spawn_run_driver(caf::actor_system& sys, run_driver_options opts, std::string& error);

}  // namespace caf_agent
