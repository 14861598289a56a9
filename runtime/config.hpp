#pragma once
/// runtime/config.hpp: the whole node configuration, read from TOML.
///
/// Each component owns a section struct with defaults, `read` (strict: unknown
/// keys and wrong types are errors naming the key) and `validate`. `config/`
/// holds complete commented examples; the embedded default is config/local.toml.

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "runtime/config_reader.hpp"

namespace caf_agent::runtime {

/// [cluster]: how nodes find and watch each other.
struct cluster_config {
  std::string listen_host = "127.0.0.1";  ///< where the coordinator publishes
  int32_t port = 4242;                    ///< coordinator port (0 = any free port)
  std::string coordinator = "127.0.0.1:4242";
  // Rationale: 500 ms heartbeats and a 3 s timeout notice a hung node within a few
  // seconds while costing a few messages per second per node.
  int64_t heartbeat_interval_ms = 500;
  int64_t node_timeout_ms = 3000;
  int64_t connect_timeout_ms = 5000;
  /// How long a member keeps trying to rejoin a coordinator it lost (a restart, or this
  /// node was frozen and dropped) before it exits with code 3; 0 = exit at once.
  int64_t rejoin_timeout_ms = 60000;
  /// Mutual TLS between nodes (runtime/tls.hpp): this node's PEM certificate (chain), its
  /// unencrypted PEM key and the cluster CA's certificate. All three or none; none means
  /// plaintext, which is allowed on loopback only.
  std::string tls_cert;
  std::string tls_key;
  std::string tls_ca;
  void read(section_reader& r);
  void validate(section_reader& r) const;
};

/// [runtime]: process-level settings.
struct process_config {
  int32_t scheduler_threads = 0;  ///< 0 = one per core
  std::string run_dir = "runs/local";  ///< trajectories, checkpoints, metrics (relative to cwd)
  std::string log_level = "info";      ///< quiet, info, debug
  /// What an idle CAF worker does: "spin" (CAF's default: poll, then 50 us naps, then wait) or
  /// "sleep" (wait at once; for hosts whose processes outnumber the cores).
  std::string scheduler_idle = "spin";
  void read(section_reader& r);
  void validate(section_reader& r) const;
};

/// [rollout]: episode actors and tool executors of a rollout node.
struct rollout_config {
  int32_t max_concurrent_episodes = 4;
  int32_t tool_executors = 2;
  int32_t max_turns_train = 150;
  int32_t max_turns_eval = 200;
  int64_t context_limit_tokens = 131072;
  int64_t wall_limit_s = 3600;
  int64_t observation_limit_bytes = 16384;
  std::string tasks_dir = "skills/tasks";
  std::string skills_dir = "skills";  ///< workspace template, SKILL.md, eval worker
  std::string skill_file;              ///< the system prompt; empty: skills_dir/workspace/SKILL.md
  std::vector<std::string> prompt_tools;  ///< the tools the prompt describes (all of them are served); empty: all
  int32_t episodes = 0;        ///< episodes the local main job runs (0 = one per task)
  int32_t attempts = 1;        ///< evaluation mode: attempts per task
  std::string mode = "eval";   ///< train or eval
  bool retry_aborted = false;  ///< re-run a lost node's started episodes instead of recording them aborted
  void read(section_reader& r);
  void validate(section_reader& r) const;
};

/// [gpu_pool]: evaluation slots and admission.
struct gpu_pool_config {
  int32_t slots = 1;
  std::string device = "cpu";       ///< cpu or cuda
  int32_t queue_capacity = 64;
  int64_t job_deadline_s = 300;
  int32_t quarantine_after_failures = 3;
  int32_t cpu_threads_per_slot = 1;
  /// Build-stage workers (compilers on CPU cores, ahead of the slots): -1 = one per slot
  /// when device = cuda (compiles stay off GPU time), none on cpu (a CPU slot's build and
  /// its cores are the same resource); 0 = none (each job builds on its slot).
  int32_t build_workers = -1;
  /// build_workers with -1 resolved.
  int32_t builders() const { return build_workers >= 0 ? build_workers : device == "cuda" ? slots : 0; }
  std::string worker_python = ".venv/bin/python";
  std::string backend = "worker";   ///< worker (real eval worker) or sim
  void read(section_reader& r);
  void validate(section_reader& r) const;
};

/// [sandbox]: per-episode isolation of the agent's tools.
struct sandbox_section {
  std::string isolation = "bwrap";  ///< bwrap or none (development only)
  std::string workspace_root = "runs/local/workspaces";
  int64_t bash_timeout_s = 120;
  int64_t max_output_bytes = 30000;
  bool keep_workspaces = false;
  void read(section_reader& r);
  void validate(section_reader& r) const;
};

/// [policy]: which backend answers Generate requests.
struct policy_config {
  std::string backend = "replay";   ///< replay, sim, libtorch, openai
  std::string replay_path = "skills/replay/default.jsonl";
  std::string model_dir;            ///< libtorch: a Hugging Face checkpoint directory
  std::string base_url;             ///< openai: e.g. http://127.0.0.1:8000/v1
  std::string model_name;
  double temperature = 1.0;
  double top_p = 1.0;
  int32_t max_new_tokens = 2048;
  int32_t top_k = 0;                ///< 0 = off
  uint64_t seed = 0;                ///< base seed of every request (reproducible runs)
  int32_t max_batch = 64;           ///< libtorch: sequences decoded together
  int32_t max_context = 0;          ///< libtorch: tokens per sequence; 0 = the model's (capped at 4096)
  std::string device = "cpu";       ///< libtorch: cpu, cuda, cuda:N
  std::string dtype = "float32";    ///< libtorch: float32, bfloat16, float16
  bool prefix_cache = true;         ///< libtorch: keep a finished sequence's keys for its next turn
  int32_t prefill_chunk = 2048;     ///< libtorch: prompt tokens prefilled per step; 0 = whole prompts
  std::string cache_attention = "auto";  ///< libtorch: auto, sdpa, matmul, flash (policy/model engine.hpp)
  int64_t request_timeout_ms = 120000;
  int32_t max_retries = 2;          ///< openai: retries of a failed request (connection, 429, 5xx)
  int32_t concurrency = 16;         ///< openai: requests in flight per node
  std::string api_key_env;          ///< openai: environment variable holding the API key ("" = none)
  std::string serve_host = "127.0.0.1"; ///< inference role: OpenAI-compatible HTTP endpoint
  int32_t serve_port = 8000;        ///< inference role: 0 = any free port
  double sim_latency_ms_mean = 200;   ///< sim: mean policy latency per turn
  double sim_eval_ms_mean = 2000;     ///< sim: mean eval latency
  void read(section_reader& r);
  void validate(section_reader& r) const;
};

/// [learner]: the learner shards (`--role learner`) and their hyperparameters.
struct learner_config {
  std::string model_dir;        ///< base model of actor and critic; empty: policy.model_dir
  int32_t shards = 1;           ///< data-parallel shards (learner processes) the trainer waits for
  std::string backend = "gloo"; ///< gloo (CPU tensors) or nccl (one GPU per shard)
  std::string device = "cpu";   ///< cpu, cuda, cuda:N (nccl: cuda:<rank % GPUs>)
  std::string master_addr = "127.0.0.1";  ///< where shard 0 serves the rendezvous store
  int32_t master_port = 29500;  ///< the rendezvous port (torchrun's default); + generation % 16 after a shard was lost
  int32_t cpu_threads = 0;      ///< torch threads of a CPU shard; 0: cores / shards
  /// Rendezvous and collective timeout. Rationale: a dead peer is seen at once by gloo; this
  /// bounds a hung one, and must exceed the slowest shard's step.
  int64_t timeout_ms = 600000;
  double actor_lr = 3e-6;       ///< the paper's actor learning rate
  double critic_lr = 6e-6;      ///< the paper's critic learning rate
  // Rationale: clip-higher (DAPO-style) keeps low-probability tokens explorable.
  double clip_low = 0.2;
  double clip_high = 0.28;
  double gamma = 1.0;
  double gae_lambda = 0.95;
  int32_t ppo_epochs = 1;       ///< updates per PPO step over the same batch
  int64_t max_tokens_per_microbatch = 0;  ///< token budget of a micro-batch; 0: the whole shard batch
  double entropy_coef = 0.0;
  bool normalize_advantages = false;
  double max_grad_norm = 1.0;   ///< global gradient-norm clip (<= 0: off)
  std::string compute_dtype = "float32";  ///< float32 or bfloat16 (over fp32 masters)
  bool checkpoint_layers = false;  ///< per-layer activation recomputation
  /// New weights to policy services: auto = the tensors themselves to an engine in this
  /// process (no disk), the checkpoint directory (reload from disk) to every other; disk = always the checkpoint.
  std::string weight_sync = "auto";
  int32_t rank = 0;             ///< this shard (`--shard R`; not a TOML key)
  int32_t weight_sync_bucket_mb = 64;  ///< in-process hand-off: tensors copied in buckets of this size
  void read(section_reader& r);
  void validate(section_reader& r) const;
};

/// One stage of [train] (its own table, e.g. [train.rft]) and its stopping rule.
struct train_stage_config {
  std::string name;             ///< single_turn_ppo, rft, value_pretrain, agentic_ppo
  int32_t iterations = 1;       ///< ppo stages and rft: training steps, then the next stage
  int32_t max_turns = 0;        ///< episode turn limit; 0: rollout.max_turns_train (single_turn_ppo: 1)
  int32_t min_reward = 1;       ///< rft: the least reward a trajectory needs (the paper: r > 0)
  // Rationale: an agent that re-runs an identical call more than 3 times is stuck, not working.
  int32_t max_repeats = 3;      ///< rft: the same tool call at most this often
  std::string store;            ///< rft, value_pretrain: train on this trajectory store's records instead of fresh episodes
  double min_explained_variance = 0.6;  ///< value_pretrain: the gate (the paper's critic needs it)
  int32_t max_steps = 20;       ///< value_pretrain: the step cap when the gate is never reached
  bool stop_at_cap = false;     ///< value_pretrain: stop the run (not go on) when the cap is hit first
  /// rft: play these recordings (replay backend, token-level with policy.model_dir's tokenizer,
  /// real sandbox and judge) once as the stage's data, then train every iteration on them.
  std::string demonstrations;
  int32_t steps_per_iteration = 1;  ///< optimizer steps an iteration takes on its batch (one checkpoint each iteration)
  int32_t batch_sequences = 0;  ///< trajectories per optimizer step, round robin over the batch; 0: all of it
  double actor_lr = 0;          ///< the stage's actor lr (constant, or the cosine's peak); 0: learner.actor_lr
  std::string lr_schedule = "constant";  ///< constant, phases (lr_phases), cosine (warm-up, then decay to min_lr)
  std::vector<std::pair<int64_t, double>> lr_phases;  ///< phases: [[optimizer steps, lr], ...] in order
  int64_t warmup_steps = 0;     ///< cosine: linear warm-up steps
  double min_lr = 0;            ///< cosine: the lr at the stage's last step
  double temperature = -1;      ///< sampling temperature of the stage's episodes; < 0: policy.temperature
  /// The stage's optimizer steps: iterations x steps_per_iteration.
  int64_t optimizer_steps() const { return int64_t{iterations} * steps_per_iteration; }
  /// A stage's defaults.
  explicit train_stage_config(std::string stage_name = {}, int32_t iters = 1, int32_t turns = 0)
      : name(std::move(stage_name)), iterations(iters), max_turns(turns) {}
  void read(section_reader& r);
  void validate(section_reader& r) const;
};

/// [train.eval]: evaluation rounds of the trainer (before training and after each stage): fresh
/// episodes of the tasks with the current weights, judged for real (run_dir/eval-<stage>.json).
struct train_eval_config {
  int32_t episodes = 0;         ///< episodes a round (task by episode id); 0: no rounds
  double temperature = 0;       ///< 0: greedy (the reward of what was learned, not of luck)
  int32_t max_turns = 0;        ///< 0: rollout.max_turns_eval
  void read(section_reader& r);
  void validate(section_reader& r) const;
};

/// [train]: the trainer (in the coordinator with --train, or in the local role).
struct train_config {
  bool enabled = false;         ///< the local role trains instead of one round of episodes
  std::vector<std::string> stages{"agentic_ppo"};  ///< in order
  int32_t episodes_per_iteration = 4;  ///< the global batch of one iteration
  std::string run_dir;          ///< stage state, checkpoints, trajectories; empty: runtime.run_dir + "/train"
  int32_t max_step_attempts = 5;  ///< a step that failed this often (shards lost, errors) stops the run
  int32_t max_empty_iterations = 3;  ///< consecutive iterations without training data stop the run
  train_stage_config single_turn_ppo{"single_turn_ppo", 1, 1};
  train_stage_config rft{"rft"};
  train_stage_config value_pretrain{"value_pretrain"};
  train_stage_config agentic_ppo{"agentic_ppo", 2};
  train_eval_config eval;
  /// The stage named `name` (one of the four).
  const train_stage_config& stage(const std::string& name) const;
  /// True when the stages include rft with demonstrations (rollout nodes then load their replay).
  bool plays_demonstrations() const {
    return !rft.demonstrations.empty() && std::find(stages.begin(), stages.end(), "rft") != stages.end();
  }
  void read(section_reader& r);
  void validate(section_reader& r) const;
};

/// All sections of one node's configuration.
/// [observe]: metrics, the Prometheus endpoint, stuck episodes (the coordinator's).
struct observe_config {
  bool instrument = true;               ///< count messages per actor (off: only for the cost benchmark)
  std::string prometheus_host = "127.0.0.1";
  int32_t prometheus_port = -1;         ///< the coordinator's /metrics endpoint; -1 = off, 0 = any free port
  int64_t metrics_interval_ms = 5000;   ///< a line of metrics.jsonl in the run directory this often; 0 = none
  int64_t stuck_no_progress_s = 600;    ///< no completion and no tool result for this long: stuck
  int32_t stuck_repeat_calls = 5;       ///< the same tool call this many times in a row: stuck
  double stuck_turn_factor = 10.0;      ///< a turn this many times the median turn: stuck
  int64_t stuck_min_turn_s = 30;        ///< ... and at least this long
  void read(section_reader& r);
  void validate(section_reader& r) const;
};

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
std::vector<std::string> check_paths(const app_config& cfg, const std::string& role, bool drives_run);

}  // namespace caf_agent::runtime
