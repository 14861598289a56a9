#pragma once
/// runtime/local_job.hpp: `--role local`, every role in one process.

#include <map>
#include <string>

#include <caf/actor.hpp>
#include <caf/fwd.hpp>

#include "runtime/config.hpp"
#include "runtime/options.hpp"
#include "runtime/process.hpp"

namespace caf_agent::runtime {

/// Starts the coordinator and every role's actors in this process, registers
/// them, runs the main job (or exits after start when asked), and shuts down.
int run_local(const cli_options& opts, const app_config& cfg, exit_latch& latch);

/// The local main job once every actor runs: episodes over the bundled tasks,
/// progress while it runs, a summary at the end. Returns the exit code.
int run_local_main_job(caf::actor_system& sys, const cli_options& opts, const app_config& cfg,
                       const std::map<std::string, caf::actor>& peers, exit_latch& latch);

/// Drives the configured episodes through the rollout managers that announce
/// themselves to `coordinator`, stores the records, prints the report.
int run_episodes(caf::actor_system& sys, const cli_options& opts, const app_config& cfg, caf::actor coordinator,
                 exit_latch& latch);

}  // namespace caf_agent::runtime
