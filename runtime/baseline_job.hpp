#pragma once
/// runtime/baseline_job.hpp: `caf-agent --role local --eval --baselines`: every task of the
/// task set is one baseline job (eval_mode::baseline: its reference timed in eager mode and
/// under torch.compile by the judge) on the GPU pool's slots; no episodes.

#include <map>
#include <string>

#include <caf/actor.hpp>
#include <caf/fwd.hpp>

#include "runtime/config.hpp"
#include "runtime/options.hpp"
#include "runtime/process.hpp"

namespace caf_agent::runtime {

/// Sends the baseline jobs to the pool (`peers["gpu_pool"]`, at most twice its slots at a
/// time), prints the per-level table and writes it as JSON to runtime.run_dir/baselines-<ms>.json.
/// An interruption prints what was answered (each other task as not answered). 0 when the
/// pool answered every job, 1 when the run was interrupted, 2 on bad input.
int run_baselines(caf::actor_system& sys, const cli_options& opts, const app_config& cfg,
                  const std::map<std::string, caf::actor>& peers, exit_latch& latch);

}  // namespace caf_agent::runtime
