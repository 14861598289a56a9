#pragma once
/// actors/run_driver.hpp: the coordinator's episode driver and trajectory store.
///
/// Plans `episodes` start_episode messages over the tasks, hands them to rollout
/// managers as they report free capacity, stores each trajectory record once
/// (the store refuses duplicates), and records the in-flight episodes of a lost
/// rollout node as aborted. When every planned episode has its record it calls
/// `on_finished` with the summary.

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
  std::string store_dir;
};

/// Settings of the driver.
struct run_driver_options {
  std::vector<messages::task_spec> tasks;
  int episodes = 0;  ///< total; tasks are cycled
  std::string mode = "eval";
  int max_turns = 200;
  int64_t wall_limit_ms = 0;
  std::string store_dir;
  uint64_t seed = 1;
  caf::actor coordinator;  ///< subscribed to for rollout services and node losses
  std::function<void(const run_summary&)> on_finished;
};

/// Spawns the driver. Returns nullptr and sets `error` when the store cannot open.
caf::actor spawn_run_driver(caf::actor_system& sys, run_driver_options opts, std::string& error);

}  // namespace caf_agent
