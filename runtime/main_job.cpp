// runtime/main_job.cpp: see local_job.hpp (run_local_main_job).
#include <caf/all.hpp>

#include "actors/log.hpp"
#include "runtime/local_job.hpp"

namespace caf_agent::runtime {

int run_local_main_job(caf::actor_system& sys, const cli_options& opts, const app_config& cfg,
                       const std::map<std::string, caf::actor>& peers, exit_latch& latch) {
  (void) sys;
  (void) opts;
  (void) cfg;
  (void) latch;
  if (!peers.contains("rollout_manager")) {
    log_info("local", "no rollout manager in this build: nothing to run; exiting");
    return 0;
  }
  return 0;
}

}  // namespace caf_agent::runtime
