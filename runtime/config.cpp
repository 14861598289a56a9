// runtime/config.cpp: see config.hpp.
#include "runtime/config.hpp"

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "runtime/embedded_config.hpp"

namespace caf_agent::runtime {

namespace {

void require_positive(section_reader& r, std::string_view key, int64_t v) {
  if (v <= 0) r.error(key, "must be > 0, got " + std::to_string(v));
}

void require_range(section_reader& r, std::string_view key, double v, double lo, double hi) {
  if (v < lo || v > hi)
    r.error(key, "must be in [" + std::to_string(lo) + ", " + std::to_string(hi) + "], got " + std::to_string(v));
}

void require_one_of(section_reader& r, std::string_view key, const std::string& v,
                    std::initializer_list<const char*> allowed) {
  std::string list;
  for (auto* a : allowed) {
    if (v == a) return;
    list += list.empty() ? a : std::string{", "} + a;
  }
  r.error(key, "'" + v + "' is not one of: " + list);
}

}  // namespace

void cluster_config::read(section_reader& r) {
  r.read("listen_host", listen_host);
  r.read("port", port);
  r.read("coordinator", coordinator);
  r.read("heartbeat_interval_ms", heartbeat_interval_ms);
  r.read("node_timeout_ms", node_timeout_ms);
  r.read("connect_timeout_ms", connect_timeout_ms);
  r.read("rejoin_timeout_ms", rejoin_timeout_ms);
  r.read("tls_cert", tls_cert);
  r.read("tls_key", tls_key);
  r.read("tls_ca", tls_ca);
}

void cluster_config::validate(section_reader& r) const {
  if (port < 0 || port > 65535) r.error("port", "must be in 0..65535");
  require_positive(r, "heartbeat_interval_ms", heartbeat_interval_ms);
  require_positive(r, "connect_timeout_ms", connect_timeout_ms);
  if (node_timeout_ms < 2 * heartbeat_interval_ms)
    r.error("node_timeout_ms", "must be at least twice heartbeat_interval_ms");
  // Rationale: beyond an hour a hung node would hold its episodes for longer than an
  // episode's default wall limit; such values are typos (seconds given as ms * 1000).
  require_range(r, "heartbeat_interval_ms", static_cast<double>(heartbeat_interval_ms), 1, 600000);
  require_range(r, "node_timeout_ms", static_cast<double>(node_timeout_ms), 1, 3600000);
  require_range(r, "connect_timeout_ms", static_cast<double>(connect_timeout_ms), 1, 3600000);
  if (listen_host.empty()) r.error("listen_host", "must not be empty");
  require_range(r, "rejoin_timeout_ms", static_cast<double>(rejoin_timeout_ms), 0, 86400000);
  if (coordinator.find(':') == std::string::npos)
    r.error("coordinator", "must be HOST:PORT, got '" + coordinator + "'");
  const int tls_set = !tls_cert.empty() + !tls_key.empty() + !tls_ca.empty();
  if (tls_set != 0 && tls_set != 3)
    r.error(tls_cert.empty() ? "tls_cert" : tls_key.empty() ? "tls_key" : "tls_ca",
            "must be set: TLS needs tls_cert, tls_key and tls_ca together");
}

void process_config::read(section_reader& r) {
  r.read("scheduler_threads", scheduler_threads);
  r.read("run_dir", run_dir);
  r.read("log_level", log_level);
  r.read("scheduler_idle", scheduler_idle);
}

void process_config::validate(section_reader& r) const {
  if (scheduler_threads < 0) r.error("scheduler_threads", "must be >= 0");
  if (run_dir.empty()) r.error("run_dir", "must not be empty");
  require_one_of(r, "log_level", log_level, {"quiet", "info", "debug"});
  require_one_of(r, "scheduler_idle", scheduler_idle, {"spin", "sleep"});
}

void rollout_config::read(section_reader& r) {
  r.read("max_concurrent_episodes", max_concurrent_episodes);
  r.read("tool_executors", tool_executors);
  r.read("max_turns_train", max_turns_train);
  r.read("max_turns_eval", max_turns_eval);
  r.read("context_limit_tokens", context_limit_tokens);
  r.read("wall_limit_s", wall_limit_s);
  r.read("observation_limit_bytes", observation_limit_bytes);
  r.read("tasks_dir", tasks_dir);
  r.read("skills_dir", skills_dir);
  r.read("skill_file", skill_file);
  r.read("prompt_tools", prompt_tools);
  r.read("episodes", episodes);
  r.read("attempts", attempts);
  r.read("mode", mode);
  r.read("retry_aborted", retry_aborted);
}

void rollout_config::validate(section_reader& r) const {
  require_positive(r, "max_concurrent_episodes", max_concurrent_episodes);
  require_positive(r, "tool_executors", tool_executors);
  require_positive(r, "max_turns_train", max_turns_train);
  require_positive(r, "max_turns_eval", max_turns_eval);
  require_positive(r, "context_limit_tokens", context_limit_tokens);
  require_positive(r, "wall_limit_s", wall_limit_s);
  require_positive(r, "observation_limit_bytes", observation_limit_bytes);
  require_positive(r, "attempts", attempts);
  if (episodes < 0) r.error("episodes", "must be >= 0");
  require_one_of(r, "mode", mode, {"train", "eval"});
  // Rationale: upper bounds well above any real node (a node of 8 GPUs runs hundreds of
  // episodes), low enough to catch a stray digit before it allocates or spawns.
  require_range(r, "max_concurrent_episodes", max_concurrent_episodes, 1, 100000);
  require_range(r, "tool_executors", tool_executors, 1, 4096);
  require_range(r, "max_turns_train", max_turns_train, 1, 100000);
  require_range(r, "max_turns_eval", max_turns_eval, 1, 100000);
  if (skills_dir.empty()) r.error("skills_dir", "must not be empty");
  if (tasks_dir.empty()) r.error("tasks_dir", "must not be empty");
}

void gpu_pool_config::read(section_reader& r) {
  r.read("slots", slots);
  r.read("device", device);
  r.read("queue_capacity", queue_capacity);
  r.read("job_deadline_s", job_deadline_s);
  r.read("quarantine_after_failures", quarantine_after_failures);
  r.read("cpu_threads_per_slot", cpu_threads_per_slot);
  r.read("build_workers", build_workers);
  r.read("worker_python", worker_python);
  r.read("backend", backend);
}

void gpu_pool_config::validate(section_reader& r) const {
  require_positive(r, "slots", slots);
  require_positive(r, "queue_capacity", queue_capacity);
  require_positive(r, "job_deadline_s", job_deadline_s);
  require_positive(r, "quarantine_after_failures", quarantine_after_failures);
  require_positive(r, "cpu_threads_per_slot", cpu_threads_per_slot);
  // Rationale: a node has at most a few dozen GPUs; 4096 CPU slots is already absurd.
  require_range(r, "slots", slots, 1, 4096);
  require_range(r, "queue_capacity", queue_capacity, 1, 1000000);
  require_range(r, "cpu_threads_per_slot", cpu_threads_per_slot, 1, 1024);
  if (build_workers < -1) r.error("build_workers", "must be >= -1 (-1: one per slot on cuda, none on cpu), got " +
                                                       std::to_string(build_workers));
  require_one_of(r, "device", device, {"cpu", "cuda"});
  require_one_of(r, "backend", backend, {"worker", "sim"});
}

void sandbox_section::read(section_reader& r) {
  r.read("isolation", isolation);
  r.read("workspace_root", workspace_root);
  r.read("bash_timeout_s", bash_timeout_s);
  r.read("max_output_bytes", max_output_bytes);
  r.read("keep_workspaces", keep_workspaces);
}

void sandbox_section::validate(section_reader& r) const {
  require_one_of(r, "isolation", isolation, {"bwrap", "none"});
  require_positive(r, "bash_timeout_s", bash_timeout_s);
  require_positive(r, "max_output_bytes", max_output_bytes);
  if (workspace_root.empty()) r.error("workspace_root", "must not be empty");
}

void policy_config::read(section_reader& r) {
  r.read("backend", backend);
  r.read("replay_path", replay_path);
  r.read("model_dir", model_dir);
  r.read("base_url", base_url);
  r.read("model_name", model_name);
  r.read("temperature", temperature);
  r.read("top_p", top_p);
  r.read("max_new_tokens", max_new_tokens);
  r.read("top_k", top_k);
  r.read("seed", seed);
  r.read("max_batch", max_batch);
  r.read("max_context", max_context);
  r.read("device", device);
  r.read("dtype", dtype);
  r.read("prefix_cache", prefix_cache);
  r.read("prefill_chunk", prefill_chunk);
  r.read("cache_attention", cache_attention);
  r.read("request_timeout_ms", request_timeout_ms);
  r.read("max_retries", max_retries);
  r.read("concurrency", concurrency);
  r.read("api_key_env", api_key_env);
  r.read("serve_host", serve_host);
  r.read("serve_port", serve_port);
  r.read("sim_latency_ms_mean", sim_latency_ms_mean);
  r.read("sim_eval_ms_mean", sim_eval_ms_mean);
}

void policy_config::validate(section_reader& r) const {
  require_one_of(r, "backend", backend, {"replay", "sim", "libtorch", "openai"});
  if (backend == "libtorch" && model_dir.empty())
    r.error("model_dir", "is required when backend = \"libtorch\"");
  if (backend == "openai" && base_url.empty())
    r.error("base_url", "is required when backend = \"openai\"");
  if (backend == "replay" && replay_path.empty())
    r.error("replay_path", "is required when backend = \"replay\"");
  // Rationale: temperatures above 10 sample noise; a larger value is a mistake.
  require_range(r, "temperature", temperature, 0, 10);
  require_range(r, "sim_latency_ms_mean", sim_latency_ms_mean, 0, 3600000);
  require_range(r, "sim_eval_ms_mean", sim_eval_ms_mean, 0, 3600000);
  if (top_p <= 0 || top_p > 1) r.error("top_p", "must be in (0, 1]");
  require_positive(r, "max_new_tokens", max_new_tokens);
  require_positive(r, "max_batch", max_batch);
  require_positive(r, "request_timeout_ms", request_timeout_ms);
  require_positive(r, "concurrency", concurrency);
  if (top_k < 0) r.error("top_k", "must be >= 0");
  if (max_context < 0) r.error("max_context", "must be >= 0 (0: from the model)");
  if (max_retries < 0) r.error("max_retries", "must be >= 0");
  if (serve_port < 0 || serve_port > 65535) r.error("serve_port", "must be in [0, 65535]");
  require_one_of(r, "dtype", dtype, {"float32", "bfloat16", "float16"});
  if (prefill_chunk < 0) r.error("prefill_chunk", "must be >= 0 (0: whole prompts)");
  require_one_of(r, "cache_attention", cache_attention, {"auto", "sdpa", "matmul", "flash"});
  if (device != "cpu" && device != "cuda" && device.rfind("cuda:", 0) != 0)
    r.error("device", "must be cpu, cuda or cuda:N, got '" + device + "'");
}

void observe_config::read(section_reader& r) {
  r.read("instrument", instrument);
  r.read("prometheus_host", prometheus_host);
  r.read("prometheus_port", prometheus_port);
  r.read("metrics_interval_ms", metrics_interval_ms);
  r.read("stuck_no_progress_s", stuck_no_progress_s);
  r.read("stuck_repeat_calls", stuck_repeat_calls);
  r.read("stuck_turn_factor", stuck_turn_factor);
  r.read("stuck_min_turn_s", stuck_min_turn_s);
}

void observe_config::validate(section_reader& r) const {
  if (prometheus_port < -1 || prometheus_port > 65535) r.error("prometheus_port", "must be -1 (off) or in 0..65535");
  if (prometheus_host.empty()) r.error("prometheus_host", "must not be empty");
  // Rationale: below 100 ms the JSONL grows faster than anyone reads it; 0 turns it off.
  if (metrics_interval_ms != 0 && metrics_interval_ms < 100) r.error("metrics_interval_ms", "must be 0 (off) or >= 100");
  require_positive(r, "stuck_no_progress_s", stuck_no_progress_s);
  if (stuck_repeat_calls < 2) r.error("stuck_repeat_calls", "must be >= 2 (one call is no repetition)");
  if (stuck_turn_factor <= 1) r.error("stuck_turn_factor", "must be > 1");
  if (stuck_min_turn_s < 0) r.error("stuck_min_turn_s", "must be >= 0");
}

void learner_config::read(section_reader& r) {
  r.read("model_dir", model_dir);
  r.read("shards", shards);
  r.read("backend", backend);
  r.read("device", device);
  r.read("master_addr", master_addr);
  r.read("master_port", master_port);
  r.read("cpu_threads", cpu_threads);
  r.read("timeout_ms", timeout_ms);
  r.read("actor_lr", actor_lr);
  r.read("critic_lr", critic_lr);
  r.read("clip_low", clip_low);
  r.read("clip_high", clip_high);
  r.read("gamma", gamma);
  r.read("gae_lambda", gae_lambda);
  r.read("ppo_epochs", ppo_epochs);
  r.read("max_tokens_per_microbatch", max_tokens_per_microbatch);
  r.read("entropy_coef", entropy_coef);
  r.read("normalize_advantages", normalize_advantages);
  r.read("max_grad_norm", max_grad_norm);
  r.read("compute_dtype", compute_dtype);
  r.read("checkpoint_layers", checkpoint_layers);
  r.read("weight_sync", weight_sync);
  r.read("weight_sync_bucket_mb", weight_sync_bucket_mb);
}

void learner_config::validate(section_reader& r) const {
  require_positive(r, "shards", shards);
  // Rationale: one shard per GPU; 4096 is far beyond any cluster this runs on.
  require_range(r, "shards", shards, 1, 4096);
  require_one_of(r, "backend", backend, {"gloo", "nccl"});
  if (device != "cpu" && device != "cuda" && device.rfind("cuda:", 0) != 0)
    r.error("device", "must be cpu, cuda or cuda:N, got '" + device + "'");
  if (backend == "gloo" && device != "cpu") r.error("backend", "gloo trains CPU tensors: set device = \"cpu\" or backend = \"nccl\"");
  if (backend == "nccl" && device == "cpu") r.error("backend", "nccl needs device = \"cuda\"");
  if (master_addr.empty()) r.error("master_addr", "must not be empty");
  if (master_port < 1 || master_port > 65535 - 15) r.error("master_port", "must be in 1..65520 (it uses 16 ports)");
  if (cpu_threads < 0) r.error("cpu_threads", "must be >= 0 (0: cores / shards)");
  require_positive(r, "timeout_ms", timeout_ms);
  if (actor_lr <= 0) r.error("actor_lr", "must be > 0");
  if (critic_lr <= 0) r.error("critic_lr", "must be > 0");
  if (clip_low <= 0 || clip_high < clip_low) r.error("clip_high", "must be >= clip_low > 0");
  if (gamma < 0 || gamma > 1) r.error("gamma", "must be in [0, 1]");
  if (gae_lambda < 0 || gae_lambda > 1) r.error("gae_lambda", "must be in [0, 1]");
  require_positive(r, "ppo_epochs", ppo_epochs);
  if (max_tokens_per_microbatch < 0) r.error("max_tokens_per_microbatch", "must be >= 0 (0: the whole batch)");
  if (entropy_coef < 0) r.error("entropy_coef", "must be >= 0");
  require_one_of(r, "compute_dtype", compute_dtype, {"float32", "bfloat16"});
  require_one_of(r, "weight_sync", weight_sync, {"auto", "disk"});
  require_positive(r, "weight_sync_bucket_mb", weight_sync_bucket_mb);
}

void train_stage_config::read(section_reader& r) {
  r.read("iterations", iterations);
  r.read("max_turns", max_turns);
  if (name == "rft") {
    r.read("min_reward", min_reward);
    r.read("max_repeats", max_repeats);
  }
  if (name == "rft" || name == "value_pretrain") r.read("store", store);
  if (name == "value_pretrain") {
    r.read("min_explained_variance", min_explained_variance);
    r.read("max_steps", max_steps);
    r.read("stop_at_cap", stop_at_cap);
  }
  if (name == "rft") r.read("demonstrations", demonstrations);
  r.read("steps_per_iteration", steps_per_iteration);
  r.read("batch_sequences", batch_sequences);
  r.read("actor_lr", actor_lr);
  r.read("lr_schedule", lr_schedule);
  r.read("lr_phases", lr_phases);
  r.read("warmup_steps", warmup_steps);
  r.read("min_lr", min_lr);
  r.read("temperature", temperature);
}

void train_stage_config::validate(section_reader& r) const {
  require_positive(r, "iterations", iterations);
  if (max_turns < 0) r.error("max_turns", "must be >= 0 (0: rollout.max_turns_train)");
  if (max_repeats < 1) r.error("max_repeats", "must be >= 1");
  // Rationale: explained variance is at most 1; a gate above it could never open.
  require_range(r, "min_explained_variance", min_explained_variance, -1e9, 1);
  require_positive(r, "max_steps", max_steps);
  require_positive(r, "steps_per_iteration", steps_per_iteration);
  if (batch_sequences < 0) r.error("batch_sequences", "must be >= 0 (0: the whole batch a step)");
  if (!(actor_lr >= 0)) r.error("actor_lr", "must be >= 0 (0: learner.actor_lr)");
  if (!demonstrations.empty() && !store.empty())
    r.error("demonstrations", "and store both name the stage's data; set one");
  if (lr_schedule == "phases") {
    if (lr_phases.empty()) r.error("lr_phases", "is empty; lr_schedule = \"phases\" needs [[steps, lr], ...]");
    int64_t sum = 0;
    for (size_t i = 0; i < lr_phases.size(); ++i) {
      if (lr_phases[i].first < 1) r.error("lr_phases", "phase " + std::to_string(i + 1) + " has steps < 1");
      if (!(lr_phases[i].second >= 0)) r.error("lr_phases", "phase " + std::to_string(i + 1) + " has an lr < 0");
      sum += lr_phases[i].first;
    }
    // Rationale: a schedule longer or shorter than the stage is a mistake in one of the two;
    // naming both numbers beats a silent last-phase hold or a cut.
    if (name != "value_pretrain" && !lr_phases.empty() && sum != optimizer_steps())
      r.error("lr_phases", "the phases hold " + std::to_string(sum) + " optimizer steps, the stage takes iterations x "
                               "steps_per_iteration = " + std::to_string(optimizer_steps()));
  } else if (lr_schedule == "cosine") {
    if (warmup_steps < 0 || warmup_steps > optimizer_steps())
      r.error("warmup_steps", "must lie in [0, iterations x steps_per_iteration = " +
                                  std::to_string(optimizer_steps()) + "]");
    if (!(min_lr >= 0)) r.error("min_lr", "must be >= 0");
  } else if (lr_schedule != "constant") {
    r.error("lr_schedule", "'" + lr_schedule + "' is not one of: constant, phases, cosine");
  }
  if (!lr_phases.empty() && lr_schedule != "phases")
    r.error("lr_phases", "is set but lr_schedule is \"" + lr_schedule + "\" (set lr_schedule = \"phases\")");
  // Rationale: PPO recomputes the sampler's log-probabilities under its temperature; greedy
  // decoding (0) has none.
  if (temperature == 0 && name != "rft" && name != "value_pretrain")
    r.error("temperature", "must be > 0 for a PPO stage (< 0: policy.temperature); greedy episodes have no log-probabilities to train on");
}

void train_eval_config::read(section_reader& r) {
  r.read("episodes", episodes);
  r.read("temperature", temperature);
  r.read("max_turns", max_turns);
}

void train_eval_config::validate(section_reader& r) const {
  if (episodes < 0) r.error("episodes", "must be >= 0 (0: no evaluation rounds)");
  if (!(temperature >= 0)) r.error("temperature", "must be >= 0 (0: greedy)");
  if (max_turns < 0) r.error("max_turns", "must be >= 0 (0: rollout.max_turns_eval)");
}

const train_stage_config& train_config::stage(const std::string& name) const {
  if (name == "single_turn_ppo") return single_turn_ppo;
  if (name == "rft") return rft;
  if (name == "value_pretrain") return value_pretrain;
  return agentic_ppo;
}

void train_config::read(section_reader& r) {
  r.read("enabled", enabled);
  r.read("stages", stages);
  r.read("episodes_per_iteration", episodes_per_iteration);
  r.read("run_dir", run_dir);
  r.read("max_step_attempts", max_step_attempts);
  r.read("max_empty_iterations", max_empty_iterations);
  for (auto* s : {&single_turn_ppo, &rft, &value_pretrain, &agentic_ppo}) {
    auto* table = r.subtable(s->name);
    // Errors go to the same list (the reader's), qualified as train.<stage>.<key>.
    r.read_nested(table, s->name, *s);
  }
  r.read_nested(r.subtable("eval"), "eval", eval);
}

void train_config::validate(section_reader& r) const {
  if (stages.empty()) r.error("stages", "must name at least one stage");
  for (auto& s : stages)
    if (s != "single_turn_ppo" && s != "rft" && s != "value_pretrain" && s != "agentic_ppo")
      r.error("stages", "'" + s + "' is not one of: single_turn_ppo, rft, value_pretrain, agentic_ppo");
  require_positive(r, "episodes_per_iteration", episodes_per_iteration);
  require_range(r, "episodes_per_iteration", episodes_per_iteration, 1, 10000000);
  require_positive(r, "max_step_attempts", max_step_attempts);
  require_positive(r, "max_empty_iterations", max_empty_iterations);
}

namespace {

template <class Section>
void read_section(const toml::table& root, const char* name, Section& s,
                  std::vector<std::string>& errors) {
  const toml::table* table = nullptr;
  if (auto* node = root.get(name)) {
    table = node->as_table();
    if (!table) {
      errors.push_back(std::string{"config key '"} + name + "' must be a table");
      return;
    }
  }
  section_reader r{table, name, errors};
  auto before = errors.size();
  s.read(r);
  r.finish();
  if (errors.size() == before) s.validate(r);  // validate only what was read cleanly
}

}  // namespace

config_result parse_config(std::string_view toml_text, std::string_view origin) {
  config_result out;
  toml::table root;
  try {
    root = toml::parse(toml_text, origin);
  } catch (const toml::parse_error& e) {
    std::ostringstream msg;
    msg << origin << ":" << e.source().begin.line << ":" << e.source().begin.column
        << ": malformed TOML: " << e.description();
    out.errors.push_back(msg.str());
    return out;
  }
  static const std::set<std::string, std::less<>> known{
      "cluster", "runtime", "rollout", "gpu_pool", "sandbox", "policy", "learner", "train", "observe"};
  for (auto& [k, v] : root)
    if (!known.contains(k.str()))
      out.errors.push_back("unknown config section or key '" + std::string{k.str()} + "'");
  auto& c = out.config;
  read_section(root, "cluster", c.cluster, out.errors);
  read_section(root, "runtime", c.runtime, out.errors);
  read_section(root, "rollout", c.rollout, out.errors);
  read_section(root, "gpu_pool", c.gpu_pool, out.errors);
  read_section(root, "sandbox", c.sandbox, out.errors);
  read_section(root, "policy", c.policy, out.errors);
  read_section(root, "learner", c.learner, out.errors);
  read_section(root, "train", c.train, out.errors);
  read_section(root, "observe", c.observe, out.errors);
  for (auto& e : out.errors)
    if (e.rfind(std::string{origin}, 0) != 0) e = std::string{origin} + ": " + e;
  return out;
}

config_result load_config_file(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    config_result out;
    out.errors.push_back("config file '" + path + "' is a directory, not a TOML file");
    return out;
  }
  std::ifstream in{path};
  if (!in) {
    config_result out;
    out.errors.push_back("cannot read config file '" + path + "'");
    return out;
  }
  std::stringstream text;
  text << in.rdbuf();
  return parse_config(text.str(), path);
}

std::string_view embedded_default_config() {
  return embedded_local_toml;
}

std::string train_run_dir(const app_config& cfg) {
  return cfg.train.run_dir.empty() ? cfg.runtime.run_dir + "/train" : cfg.train.run_dir;
}

std::string use_checkpoint(const std::string& dir, bool eval, bool keep_episodes, app_config& cfg) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path p{dir};
  const fs::path actor = fs::is_regular_file(p / "actor" / "config.json", ec) ? p / "actor" : p;
  if (!fs::is_regular_file(actor / "config.json", ec))
    return "--checkpoint " + dir + ": neither actor/config.json nor config.json is there (give a trainer step's "
           "directory, e.g. runs/local/train/checkpoints/step-00000003, or a model directory)";
  for (const char* name : {"tokenizer.json", "tokenizer_config.json"})
    if (!fs::is_regular_file(actor / name, ec))
      return "--checkpoint " + dir + ": " + (actor / name).string() +
             " is missing (copy it from the base model; the trainer copies it into every checkpoint it writes)";
  cfg.policy.backend = "libtorch";
  cfg.policy.model_dir = actor.string();
  if (eval) {
    if (!keep_episodes && cfg.train.eval.episodes > 0) cfg.rollout.episodes = cfg.train.eval.episodes;
    cfg.policy.temperature = cfg.train.eval.temperature;
    if (cfg.train.eval.max_turns > 0) cfg.rollout.max_turns_eval = cfg.train.eval.max_turns;
  }
  return {};
}

std::vector<std::string> check_paths(const app_config& cfg, const std::string& role, bool drives_run) {
  namespace fs = std::filesystem;
  std::vector<std::string> errors;
  std::error_code ec;
  auto need = [&](const std::string& key, const fs::path& p, bool dir, const std::string& what) {
    bool ok = dir ? fs::is_directory(p, ec) : fs::is_regular_file(p, ec);
    if (!ok) errors.push_back(key + ": '" + p.string() + "' " + (fs::exists(p, ec) ? "is not " : "does not exist; need ") + what);
  };
  bool rollout = role == "rollout" || role == "local";
  bool pool = role == "gpu-pool" || role == "local";
  auto& r = cfg.rollout;
  if (rollout || (pool && cfg.gpu_pool.backend == "worker")) need("rollout.skills_dir", r.skills_dir, true, "a directory");
  bool skills_ok = errors.empty();  // what lives under it is checked only when it exists
  if (rollout && skills_ok)
    need("rollout.skills_dir", fs::path{r.skills_dir} / "workspace" / "SKILL.md", false, "the workspace's SKILL.md");
  if (rollout && !r.skill_file.empty()) need("rollout.skill_file", r.skill_file, false, "a file (the system prompt)");
  if (pool && skills_ok && cfg.gpu_pool.backend == "worker")
    need("rollout.skills_dir", fs::path{r.skills_dir} / "eval_worker", true, "the eval worker's directory");
  if (drives_run && (role == "coordinator" || role == "local")) need("rollout.tasks_dir", r.tasks_dir, true, "a directory of tasks");
  if (rollout && cfg.policy.backend == "replay") need("policy.replay_path", cfg.policy.replay_path, false, "a file");
  if (rollout && cfg.train.plays_demonstrations())
    need("train.rft.demonstrations", cfg.train.rft.demonstrations, false, "a file of recorded episodes (JSON lines)");
  if (role == "learner" || (role == "local" && cfg.train.enabled)) {
    auto model = cfg.learner.model_dir.empty() ? cfg.policy.model_dir : cfg.learner.model_dir;
    if (!model.empty()) need(cfg.learner.model_dir.empty() ? "policy.model_dir" : "learner.model_dir",
                             fs::path{model} / "config.json", false, "the checkpoint's config.json");
    else if (role == "local") errors.push_back("learner.model_dir: no model to train (set it or policy.model_dir)");
  }
  if ((rollout || role == "inference") && cfg.policy.backend == "libtorch")
    need("policy.model_dir", fs::path{cfg.policy.model_dir} / "tokenizer.json", false, "the checkpoint's tokenizer.json");
  return errors;
}

}  // namespace caf_agent::runtime
