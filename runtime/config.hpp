#pragma once
/// runtime/config.hpp: the whole node configuration, read from TOML.
///
/// Each component owns its section's struct in its library (rollout/config.hpp,
/// gpu_pool/pool_config.hpp, sandbox/settings.hpp, policy/config.hpp, learner/config.hpp,
/// rollout/train_config.hpp, observe/config.hpp; [cluster] and [runtime] are runtime's own, here):
/// defaults, one field list (key, member, comment, checks: base/config_fields.hpp) and
/// validate() for rules between fields. runtime/config.cpp reads TOML through the field lists
/// (strict: unknown keys and wrong types are errors naming the key) and prints the commented
/// example from them (`caf-agent-config`, config/defaults.toml). `config/` holds complete
/// commented examples; the embedded default is config/local.toml.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/config_fields.hpp"
#include "base/log.hpp"
#include "gpu_pool/pool_config.hpp"
#include "learner/config.hpp"
#include "messages/enums.hpp"
#include "observe/config.hpp"
#include "policy/config.hpp"
#include "rollout/config.hpp"
#include "rollout/train_config.hpp"
#include "sandbox/settings.hpp"

namespace caf_agent::runtime {

/// [cluster]: how nodes find and watch each other; what each member means is said in fields().
struct cluster_config {
  std::string listen_host = "127.0.0.1";
  int32_t port = 4242;
  std::string coordinator = "127.0.0.1:4242";
  // Rationale: 500 ms heartbeats and a 3 s timeout notice a hung node within a few
  // seconds while costing a few messages per second per node.
  int64_t heartbeat_interval_ms = 500;
  int64_t node_timeout_ms = 3000;
  int64_t connect_timeout_ms = 5000;
  int64_t rejoin_timeout_ms = 60000;
  std::string tls_cert;
  std::string tls_key;
  std::string tls_ca;

  /// The field list (base/config_fields.hpp).
  template <class F, class Self>
  static void fields(F& f, Self& c) {
    using namespace base;
    f("listen_host", c.listen_host, "where the coordinator publishes its actor", not_empty());
    f("port", c.port, "coordinator port; 0: any free port", within(0, 65535, "must be in 0..65535"));
    f("coordinator", c.coordinator, "HOST:PORT that non-coordinator nodes join");
    // Rationale for the upper bounds: beyond an hour a hung node would hold its episodes for
    // longer than an episode's default wall limit; such values are typos (seconds given as ms * 1000).
    f("heartbeat_interval_ms", c.heartbeat_interval_ms, "node -> coordinator liveness reports", positive(),
      range(1, 600000));
    f("node_timeout_ms", c.node_timeout_ms, "no heartbeat for this long: the node is stale", range(1, 3600000));
    f("connect_timeout_ms", c.connect_timeout_ms, "a first join retries a coordinator not listening yet this long",
      positive(), range(1, 3600000));
    f("rejoin_timeout_ms", c.rejoin_timeout_ms,
      "a member that lost the coordinator (a restart, or it was frozen and dropped) retries this long, then "
      "exits with code 3; 0: at once",
      range(0, 86400000));
    f("tls_cert", c.tls_cert,
      "mutual TLS between nodes (runtime/tls.hpp): this node's PEM certificate (chain); all three tls_* or none "
      "(plaintext, loopback only)");
    f("tls_key", c.tls_key, "this node's unencrypted PEM key");
    f("tls_ca", c.tls_ca, "the cluster CA's certificate");
  }

  /// Rules between fields.
  void validate(base::config_errors& e) const {
    if (node_timeout_ms < 2 * heartbeat_interval_ms)
      e.error("node_timeout_ms", "must be at least twice heartbeat_interval_ms");
    if (coordinator.find(':') == std::string::npos)
      e.error("coordinator", "must be HOST:PORT, got '" + coordinator + "'");
    const int tls_set = !tls_cert.empty() + !tls_key.empty() + !tls_ca.empty();
    if (tls_set != 0 && tls_set != 3)
      e.error(tls_cert.empty()  ? "tls_cert"
              : tls_key.empty() ? "tls_key"
                                : "tls_ca",
              "must be set: TLS needs tls_cert, tls_key and tls_ca together");
  }
};

}  // namespace caf_agent::runtime

namespace caf_agent {
/// The names of the log's levels, as [runtime] log_level holds them (beside the one reader of
/// them: base/log.hpp stays a header of the log alone).
CAF_AGENT_ENUM_NAMES(log_level, "quiet", "info", "debug")
}  // namespace caf_agent

namespace caf_agent::runtime {

/// How idle CAF workers wait ([runtime] scheduler_idle): spin (poll, then nap: CAF's default)
/// or sleep (wait on their condition variable at once).
enum class idle_mode : uint8_t { spin, sleep };
CAF_AGENT_ENUM_NAMES(idle_mode, "spin", "sleep")

/// [runtime]: process-level settings; what each member means is said in fields().
struct process_config {
  int32_t scheduler_threads = 0;
  std::string run_dir = "runs/local";
  caf_agent::log_level log_level = caf_agent::log_level::info;
  idle_mode scheduler_idle = idle_mode::spin;

  /// The field list (base/config_fields.hpp).
  template <class F, class Self>
  static void fields(F& f, Self& c) {
    using namespace base;
    f("scheduler_threads", c.scheduler_threads, "CAF worker threads; 0 = one per core", at_least(0, "must be >= 0"));
    f("run_dir", c.run_dir, "trajectories, checkpoints, metrics, workspaces (relative to the working directory)",
      not_empty());
    f("log_level", c.log_level, "quiet, info, debug");
    f("scheduler_idle", c.scheduler_idle,
      "idle CAF workers: spin (poll, then nap; CAF's default) or sleep (wait at once: for hosts with more busy "
      "processes than cores)");
  }
  /// Rules between fields: none.
  void validate(base::config_errors&) const {}
};

/// The sections' structs under the names runtime/ has always used.
using rollout_config = rollout::rollout_config;
using gpu_pool_config = gpu_pool::pool_config;
using sandbox_section = sandbox::sandbox_settings;
using policy_config = policy::policy_config;
using learner_config = learner::learner_config;
using train_stage_config = rollout::train_stage_config;
using train_eval_config = rollout::train_eval_config;
using train_config = rollout::train_config;
using observe_config = observe::observe_config;

/// All sections of one node's configuration.
struct app_config {
  cluster_config cluster;
  process_config runtime;
  rollout_config rollout;
  gpu_pool_config gpu_pool;
  sandbox_section sandbox;
  policy_config policy;
  learner_config learner;
  train_config train;
  observe_config observe;

  /// The sections, in the order of the TOML files (each a table; nothing else at the top).
  template <class F, class Self>
  static void fields(F& f, Self& c) {
    f.section("cluster", c.cluster, "how nodes find and watch each other");
    f.section("runtime", c.runtime, "process-level settings");
    f.section("rollout", c.rollout, "episode actors and tool executors of a rollout node");
    f.section("gpu_pool", c.gpu_pool, "evaluation slots and admission");
    f.section("sandbox", c.sandbox, "per-episode isolation of the agent's tools");
    f.section("policy", c.policy, "which backend answers generate requests");
    f.section("learner", c.learner, "the learner shards (`--role learner`) and their hyperparameters");
    f.section("train", c.train,
              "the trainer: `caf-agent --role coordinator --train`, or `--role local` with enabled = true");
    f.section("observe", c.observe, "metrics, the Prometheus endpoint, stuck episodes (the coordinator's)");
  }
  /// Rules between sections: none yet.
  void validate(base::config_errors&) const {}
};

/// The result of loading a config: the values, or every error found.
struct config_result {
  app_config config;
  std::vector<std::string> errors;
  bool ok() const { return errors.empty(); }
};

/// Parses TOML text (`origin` names it in errors) strictly.
config_result parse_config(std::string_view toml_text, std::string_view origin);

/// Reads and parses a TOML file; a missing file is an error naming it.
config_result load_config_file(const std::string& path);

/// The commented TOML of every key of `cfg` (`caf-agent-config [FILE]`): each section's field
/// list in order, each key with its comment. Of the defaults it is config/defaults.toml; read
/// back it gives `cfg` again.
std::string print_config(const app_config& cfg);

/// The embedded default (the text of config/local.toml at build time).
std::string_view embedded_default_config();

/// The trainer's run directory: train.run_dir, or runtime.run_dir + "/train".
std::string train_run_dir(const app_config& cfg);

/// `--checkpoint DIR`: serve DIR/actor (a trainer step's directory) or DIR (a model directory)
/// with the libtorch backend; with `eval`, the episodes follow [train.eval] (its episodes when
/// `keep_episodes` is false, its temperature and max_turns), like the trainer's evaluation
/// rounds. Returns an error naming what is missing ("" on success).
std::string use_checkpoint(const std::string& dir, bool eval, bool keep_episodes, app_config& cfg);

/// Checks the paths `role` will use (skills_dir, tasks_dir when `drives_run`, the replay
/// file, model_dir, the eval worker); each error names its key and the path.
std::vector<std::string> check_paths(const app_config& cfg, messages::node_role role, bool drives_run);

}  // namespace caf_agent::runtime
