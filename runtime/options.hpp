#pragma once
/// runtime/options.hpp: command-line options of `caf-agent`.

#include <optional>
#include <string>
#include <vector>

#include "messages/enums.hpp"

namespace caf_agent::runtime {

/// What the command line asked for.
struct cli_options {
  std::string role_name;                                  ///< --role as given
  messages::node_role role = messages::node_role::local;  ///< --role parsed
  std::string config_path;                                ///< empty: the embedded default
  std::optional<std::string> coordinator;                 ///< overrides [cluster].coordinator
  std::optional<int> port;                                ///< overrides [cluster].port
  bool eval = false;                                      ///< local role: evaluation mode report
  std::optional<std::string> tasks;  ///< overrides [rollout].tasks_dir: a task directory or a KernelBench checkout
  std::string levels;                ///< --levels as given ("1,2,3")
  std::vector<int> level_list;       ///< --levels parsed: only these levels of the task set (empty: all)
  bool baselines = false;            ///< local role with --eval: baseline jobs (reference eager + compile), no episodes
  std::optional<int> episodes;       ///< overrides [rollout].episodes
  bool exit_after_start = false;     ///< start every actor, report, exit
  bool watch = false;                ///< inspector: refresh until interrupted
  std::optional<std::string> publish_weights;  ///< inspector: checkpoint dir to publish
  uint64_t weights_version = 0;                ///< inspector: version of the published weights
  std::optional<std::string> resume;           ///< coordinator/local: run directory of a run to continue
  bool train = false;                          ///< coordinator/local: run the trainer ([train], [learner])
  std::optional<std::string>
      checkpoint;  ///< local/rollout/inference: serve this checkpoint (a trainer step's dir or a model dir)
  int shard = 0;   ///< learner: this shard's rank (0 .. learner.shards - 1)
  std::vector<std::string> inspect;  ///< inspector: VIEW [ARG] (nodes, actors, episodes, ...; episode ID)
  bool json = false;                 ///< inspector: print the view as JSON
};

}  // namespace caf_agent::runtime
