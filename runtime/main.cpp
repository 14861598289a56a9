// runtime/main.cpp: `caf-agent --role <role>`, one binary for every machine.
#include <cstdio>
#include <iostream>
#include <sstream>

#include <CLI/CLI.hpp>

#include "base/log.hpp"
#include "observe/registry.hpp"
#include "runtime/config.hpp"
#include "runtime/node.hpp"
#include "runtime/options.hpp"
#include "runtime/report_cmd.hpp"

using namespace caf_agent;
using namespace caf_agent::runtime;
using caf_agent::messages::node_role;

namespace {

int fail(const std::string& message) {
  std::fprintf(stderr, "caf-agent: error: %s\n", message.c_str());
  return 2;
}

/// "1,2,3" -> {1, 2, 3}; an error naming the bad part otherwise ("" -> none: every level).
std::string parse_levels(const std::string& text, std::vector<int>& out) {
  std::stringstream in{text};
  std::string part;
  while (std::getline(in, part, ',')) {
    if (part.empty() || part.size() > 3 || part.find_first_not_of("0123456789") != std::string::npos)
      return "--levels '" + text + "': '" + part + "' is not a level number (expected e.g. 1,2,3)";
    out.push_back(std::stoi(part));
  }
  if (!text.empty() && out.empty()) return "--levels '" + text + "' names no level";
  return {};
}

void add_options(CLI::App& app, cli_options& o) {
  app.add_option("--role", o.role_name, "what this process runs: " + messages::names_list<node_role>())->required();
  app.add_option("--config", o.config_path, "TOML config file (default: the embedded config/local.toml)");
  app.add_option("--coordinator", o.coordinator, "HOST:PORT of the coordinator to join");
  app.add_option("--port", o.port, "port the coordinator listens on");
  app.add_flag("--eval", o.eval, "local role: evaluation mode (report per level)");
  app.add_option("--tasks", o.tasks,
                 "the task set instead of rollout.tasks_dir: a directory of *.py or a KernelBench checkout "
                 "(level1..levelN folders, task ids level<N>/<name>)");
  app.add_option("--levels", o.levels, "only these levels of the task set, e.g. 1,2,3");
  app.add_flag("--baselines", o.baselines,
               "with --eval (local role): the judge times every task's reference in eager mode and under "
               "torch.compile on the GPU pool's slots (baseline jobs), no episodes; prints the table per level");
  app.add_option("--episodes", o.episodes, "local role: number of episodes to run");
  app.add_flag("--exit-after-start", o.exit_after_start, "start every actor, register, report and exit");
  app.add_flag("--watch", o.watch,
               "inspector: the live full-screen view, refreshed every second (plain frames when not on a terminal)");
  app.add_option("view", o.inspect,
                 "inspector: one view and exit: nodes, actors, episodes, gpu, queues, train, run, episode ID, metrics, "
                 "prometheus");
  app.add_flag("--json", o.json, "inspector: print the view as JSON");
  app.add_option("--publish-weights", o.publish_weights,
                 "inspector: publish this checkpoint directory to every policy service, then exit");
  app.add_option("--weights-version", o.weights_version, "inspector: version number of --publish-weights");
  app.add_flag("--train", o.train,
               "coordinator or local role: train ([train] stages over [learner] shards; resumes its run directory)");
  app.add_option("--shard", o.shard, "learner role: this shard's rank, 0 .. learner.shards - 1");
  app.add_option("--checkpoint", o.checkpoint,
                 "local role: serve this checkpoint (a trainer step's directory with actor/, or a model directory); "
                 "with --eval the episodes follow [train.eval] (episodes, temperature, max_turns)");
  app.add_option("--resume", o.resume,
                 "coordinator or local role: continue the run in this directory (its plan.json and records): "
                 "the planned episodes without a record run, no other");
}

}  // namespace

int main(int argc, char** argv) {
  if (is_offline_command(argc, argv)) return run_offline_command(argc, argv);  // report, export
  CLI::App app{"caf-agent: agentic RL for CUDA kernel generation, one binary per machine"};
  cli_options opts;
  add_options(app, opts);
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    return fail(e.what());
  }
  if (auto role = messages::parse_name<node_role>(opts.role_name))
    opts.role = *role;
  else
    return fail("unknown role '" + opts.role_name + "' (expected one of: " + messages::names_list<node_role>() + ")");
  auto loaded = opts.config_path.empty() ? parse_config(embedded_default_config(), "config/local.toml (embedded)")
                                         : load_config_file(opts.config_path);
  if (!loaded.ok()) {
    for (size_t i = 1; i < loaded.errors.size(); ++i)
      std::fprintf(stderr, "caf-agent: error: %s\n", loaded.errors[i].c_str());
    return fail(loaded.errors.front());
  }
  auto& cfg = loaded.config;
  if (opts.coordinator) cfg.cluster.coordinator = *opts.coordinator;
  if (opts.port) {
    if (*opts.port < 0 || *opts.port > 65535) return fail("--port must be in 0..65535");
    cfg.cluster.port = *opts.port;
  }
  if (opts.episodes) {
    if (*opts.episodes < 0) return fail("--episodes must be >= 0");
    cfg.rollout.episodes = *opts.episodes;
  }
  if (auto err = parse_levels(opts.levels, opts.level_list); !err.empty()) return fail(err);
  if (opts.baselines && (!opts.eval || opts.role != node_role::local))
    return fail("--baselines is for the local role with --eval");
  if (opts.baselines && (opts.train || opts.resume)) return fail("--baselines runs no episodes: drop --train/--resume");
  if ((opts.tasks || !opts.level_list.empty()) && opts.resume)
    return fail("--resume runs the plan's tasks: drop --tasks/--levels");
  if (opts.tasks) cfg.rollout.tasks_dir = *opts.tasks;
  if (opts.resume && opts.role != node_role::coordinator && opts.role != node_role::local)
    return fail("--resume is for the coordinator or local role, not '" + opts.role_name + "'");
  if (opts.train && opts.role != node_role::coordinator && opts.role != node_role::local)
    return fail("--train is for the coordinator or local role, not '" + opts.role_name + "'");
  if (opts.train && opts.resume) return fail("--train resumes its own run directory (train.run_dir); drop --resume");
  if (opts.train) cfg.train.enabled = true;
  if (opts.checkpoint) {
    if (opts.role != node_role::local && opts.role != node_role::rollout && opts.role != node_role::inference)
      return fail("--checkpoint is for the local, rollout or inference role, not '" + opts.role_name + "'");
    if (opts.train) return fail("--checkpoint serves a checkpoint; training resumes its own (drop one of them)");
    if (auto err = use_checkpoint(*opts.checkpoint, opts.eval, opts.episodes.has_value(), cfg); !err.empty())
      return fail(err);
  }
  cfg.learner.rank = opts.shard;
  bool drives_run = opts.role == node_role::local ||
                    (opts.role == node_role::coordinator && (opts.episodes || opts.eval || opts.resume || opts.train));
  if (auto errors = check_paths(cfg, opts.role, drives_run && !opts.resume); !errors.empty()) {
    for (size_t i = 1; i < errors.size(); ++i) std::fprintf(stderr, "caf-agent: error: %s\n", errors[i].c_str());
    return fail(errors.front());
  }
  set_log_level(cfg.runtime.log_level);
  observe::metrics_registry::process().set_enabled(cfg.observe.instrument);
  if (opts.role == node_role::inspector) return run_inspector(opts, cfg);
  return run_node(opts, cfg);
}
