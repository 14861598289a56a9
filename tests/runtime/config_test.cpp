// tests/runtime/config_test.cpp: strict TOML config loading.
#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include <unistd.h>

#include <gtest/gtest.h>
#include <toml++/toml.h>

#include "runtime/config.hpp"

using namespace caf_agent::runtime;
using caf_agent::messages::node_role;

namespace {

std::string source_dir() {
  auto* dir = std::getenv("CAF_AGENT_SOURCE_DIR");
  return dir ? dir : ".";
}

bool has_error(const config_result& r, const std::string& needle) {
  for (auto& e : r.errors)
    if (e.find(needle) != std::string::npos) return true;
  return false;
}

}  // namespace

TEST(config, embedded_default_is_valid_and_is_local_toml) {
  auto r = parse_config(embedded_default_config(), "embedded");
  ASSERT_TRUE(r.ok()) << r.errors.front();
  auto file = load_config_file(source_dir() + "/config/local.toml");
  ASSERT_TRUE(file.ok()) << file.errors.front();
  EXPECT_EQ(r.config.gpu_pool.device, caf_agent::gpu_pool::pool_device::cpu);
  EXPECT_EQ(r.config.cluster.port, file.config.cluster.port);
  EXPECT_EQ(r.config.rollout.max_turns_eval, 200);
  EXPECT_EQ(r.config.rollout.max_turns_train, 150);
  EXPECT_DOUBLE_EQ(r.config.learner.clip_high, 0.28);
}

TEST(config, cluster_example_is_valid) {
  auto r = load_config_file(source_dir() + "/config/cluster.toml");
  ASSERT_TRUE(r.ok()) << r.errors.front();
  EXPECT_EQ(r.config.gpu_pool.device, caf_agent::gpu_pool::pool_device::cuda);
  EXPECT_EQ(r.config.cluster.port, 4242);
}

TEST(config, policy_engine_keys_are_read_and_checked) {
  namespace pl = caf_agent::policy;
  auto r = parse_config("[policy]\nprefix_cache = false\nprefill_chunk = 512\ncache_attention = \"flash\"\n", "t.toml");
  ASSERT_TRUE(r.ok()) << r.errors.front();
  EXPECT_FALSE(r.config.policy.prefix_cache);
  EXPECT_EQ(r.config.policy.prefill_chunk, 512);
  EXPECT_EQ(r.config.policy.cache_attention, pl::cache_attention_choice::flash);
  auto defaults = parse_config("", "empty");
  EXPECT_TRUE(defaults.config.policy.prefix_cache);
  EXPECT_EQ(defaults.config.policy.cache_attention, pl::cache_attention_choice::automatic);
  // A name that reads as no value is a read error; the checks run on a section read cleanly.
  EXPECT_TRUE(has_error(parse_config("[policy]\nprefill_chunk = -1\n", "t.toml"), "policy.prefill_chunk"));
  EXPECT_TRUE(has_error(parse_config("[policy]\ncache_attention = \"fastest\"\n", "t.toml"), "policy.cache_attention"));
}

TEST(config, policy_kv_layout_keys_are_read_and_checked) {
  namespace pl = caf_agent::policy;
  auto r = parse_config("[policy]\nkv_layout = \"paged\"\nkv_block_size = 16\nkv_cache_tokens = 100000\n", "t.toml");
  ASSERT_TRUE(r.ok()) << r.errors.front();
  EXPECT_EQ(r.config.policy.kv_layout, pl::kv_layout_kind::paged);
  EXPECT_EQ(r.config.policy.kv_block_size, 16);
  EXPECT_EQ(r.config.policy.kv_cache_tokens, 100000);
  EXPECT_EQ(parse_config("", "empty").config.policy.kv_layout, pl::kv_layout_kind::slots);
  EXPECT_TRUE(has_error(parse_config("[policy]\nkv_layout = \"pages\"\n", "t.toml"), "policy.kv_layout"));
  EXPECT_TRUE(has_error(parse_config("[policy]\nkv_block_size = 0\n", "t.toml"), "policy.kv_block_size"));
  // Rules between keys: a cache size only for paged; flash reads pages too.
  EXPECT_TRUE(has_error(parse_config("[policy]\nkv_cache_tokens = 4096\n", "t.toml"), "policy.kv_cache_tokens"));
  EXPECT_TRUE(parse_config("[policy]\nkv_layout = \"paged\"\ncache_attention = \"flash\"\n", "t.toml").ok());
}

// [policy] dtype, cache_attention and kv_layout were strings checked by a list; they are named
// enums now: the names older files hold read as the enums, print back as the same names, and an
// unknown name is an error naming the allowed ones.
TEST(config, policy_engine_closed_sets_read_their_old_names_as_enums) {
  namespace pl = caf_agent::policy;
  auto r =
      parse_config("[policy]\ndtype = \"bfloat16\"\ncache_attention = \"matmul\"\nkv_layout = \"paged\"\n", "t.toml");
  ASSERT_TRUE(r.ok()) << r.errors.front();
  EXPECT_EQ(r.config.policy.dtype, pl::model_dtype::bfloat16);
  EXPECT_EQ(r.config.policy.cache_attention, pl::cache_attention_choice::matmul);
  EXPECT_EQ(r.config.policy.kv_layout, pl::kv_layout_kind::paged);
  const auto printed = print_config(r.config);
  EXPECT_NE(printed.find("dtype = \"bfloat16\""), std::string::npos);
  EXPECT_NE(printed.find("cache_attention = \"matmul\""), std::string::npos);
  EXPECT_NE(printed.find("kv_layout = \"paged\""), std::string::npos);
  auto again = parse_config(printed, "printed");  // the round trip
  ASSERT_TRUE(again.ok()) << again.errors.front();
  EXPECT_EQ(again.config.policy.dtype, pl::model_dtype::bfloat16);
  EXPECT_EQ(again.config.policy.cache_attention, pl::cache_attention_choice::matmul);
  EXPECT_EQ(again.config.policy.kv_layout, pl::kv_layout_kind::paged);
  const app_config defaults;
  EXPECT_EQ(defaults.policy.dtype, pl::model_dtype::float32);
  EXPECT_NE(print_config(defaults).find("cache_attention = \"auto\""), std::string::npos);

  auto dtype = parse_config("[policy]\ndtype = \"float64\"\n", "t.toml");
  EXPECT_TRUE(has_error(dtype, "config key 'policy.dtype': 'float64' is not one of: float32, bfloat16, float16"))
      << dtype.errors.front();
  auto attention = parse_config("[policy]\ncache_attention = \"fastest\"\n", "t.toml");
  EXPECT_TRUE(
      has_error(attention, "config key 'policy.cache_attention': 'fastest' is not one of: auto, sdpa, matmul, flash"))
      << attention.errors.front();
  auto layout = parse_config("[policy]\nkv_layout = \"pages\"\n", "t.toml");
  EXPECT_TRUE(has_error(layout, "config key 'policy.kv_layout': 'pages' is not one of: slots, paged"))
      << layout.errors.front();
}

TEST(config, empty_text_gives_defaults) {
  auto r = parse_config("", "empty");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r.config.rollout.context_limit_tokens, 131072);
}

TEST(config, unknown_key_is_named) {
  auto r = parse_config("[rollout]\nmax_turnz = 3\n", "t.toml");
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(has_error(r, "unknown config key 'rollout.max_turnz'"));
  EXPECT_TRUE(has_error(r, "t.toml"));
}

TEST(config, unknown_section_is_named) {
  auto r = parse_config("[rollouts]\nx = 1\n", "t.toml");
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(has_error(r, "'rollouts'"));
}

TEST(config, wrong_type_names_key_and_types) {
  auto r = parse_config("[gpu_pool]\nslots = \"eight\"\n", "t.toml");
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(has_error(r, "'gpu_pool.slots' must be an integer, got string"));
}

TEST(config, section_that_is_not_a_table) {
  auto r = parse_config("sandbox = 3\n", "t.toml");
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(has_error(r, "'sandbox' must be a table"));
}

TEST(config, invalid_values_are_rejected_by_validate) {
  auto r = parse_config("[policy]\nbackend = \"gpt\"\n[cluster]\nport = 70000\n", "t.toml");
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(has_error(r, "policy.backend"));
  EXPECT_TRUE(has_error(r, "cluster.port"));
}

TEST(config, dependent_requirements) {
  auto r = parse_config("[policy]\nbackend = \"libtorch\"\n", "t.toml");
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(has_error(r, "policy.model_dir"));
}

TEST(config, out_of_range_int32) {
  auto r = parse_config("[rollout]\nmax_turns_eval = 99999999999\n", "t.toml");
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(has_error(r, "out of range"));
}

TEST(config, malformed_toml_gives_line) {
  auto r = parse_config("[rollout\n", "t.toml");
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(has_error(r, "t.toml:1:"));
  EXPECT_TRUE(has_error(r, "malformed TOML"));
}

TEST(config, missing_file_is_named) {
  auto r = load_config_file("/nonexistent/caf-agent.toml");
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(has_error(r, "/nonexistent/caf-agent.toml"));
}

TEST(config, string_arrays_type_checked) {
  auto r = parse_config("[policy]\ntemperature = true\n", "t.toml");
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(has_error(r, "'policy.temperature' must be a number, got boolean"));
}

TEST(config, build_workers_default_to_one_per_cuda_slot_and_none_on_cpu) {
  auto cpu = parse_config("[gpu_pool]\nslots = 2\n", "t.toml");
  ASSERT_TRUE(cpu.ok());
  EXPECT_EQ(cpu.config.gpu_pool.builders(), 0);
  auto cuda = parse_config("[gpu_pool]\nslots = 4\ndevice = \"cuda\"\n", "t.toml");
  ASSERT_TRUE(cuda.ok());
  EXPECT_EQ(cuda.config.gpu_pool.builders(), 4);
  auto off = parse_config("[gpu_pool]\ndevice = \"cuda\"\nbuild_workers = 0\n", "t.toml");
  EXPECT_EQ(off.config.gpu_pool.builders(), 0);
  auto two = parse_config("[gpu_pool]\nbuild_workers = 2\n", "t.toml");
  EXPECT_EQ(two.config.gpu_pool.builders(), 2);
  auto bad = parse_config("[gpu_pool]\nbuild_workers = -2\n", "t.toml");
  ASSERT_FALSE(bad.ok());
  EXPECT_TRUE(has_error(bad, "gpu_pool.build_workers"));
}

TEST(config, negative_latencies_are_named) {
  auto r = parse_config("[policy]\nsim_latency_ms_mean = -5.0\nsim_eval_ms_mean = -1.0\n", "t.toml");
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(has_error(r, "policy.sim_latency_ms_mean"));
  EXPECT_TRUE(has_error(r, "policy.sim_eval_ms_mean"));
}

TEST(config, out_of_range_values_are_named) {
  auto r = parse_config(
      "[gpu_pool]\nslots = 100000\n[rollout]\nmax_concurrent_episodes = 10000000\n"
      "[policy]\ntemperature = 1000.0\nrequest_timeout_ms = -1\n[cluster]\nnode_timeout_ms = 999999999\n",
      "t.toml");
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(has_error(r, "gpu_pool.slots"));
  EXPECT_TRUE(has_error(r, "rollout.max_concurrent_episodes"));
  EXPECT_TRUE(has_error(r, "policy.temperature"));
  EXPECT_TRUE(has_error(r, "policy.request_timeout_ms"));
  EXPECT_TRUE(has_error(r, "cluster.node_timeout_ms"));
}

TEST(config, a_directory_is_not_a_config_file) {
  auto dir = std::filesystem::temp_directory_path();
  auto r = load_config_file(dir.string());
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(has_error(r, "is a directory")) << r.errors.front();
  EXPECT_TRUE(has_error(r, dir.string()));
}

TEST(config, retry_aborted_is_a_rollout_key) {
  auto r = parse_config("[rollout]\nretry_aborted = true\n", "t.toml");
  ASSERT_TRUE(r.ok()) << r.errors.front();
  EXPECT_TRUE(r.config.rollout.retry_aborted);
}

TEST(config, referenced_paths_are_checked_for_the_role) {
  auto base = std::filesystem::temp_directory_path() / ("caf_agent_paths_" + std::to_string(::getpid()));
  std::filesystem::remove_all(base);
  auto r = parse_config("[rollout]\nskills_dir = \"" + (base / "no-skills").string() + "\"\ntasks_dir = \"" +
                            (base / "no-tasks").string() + "\"\n[policy]\nreplay_path = \"" +
                            (base / "none.jsonl").string() + "\"\n",
                        "t.toml");
  ASSERT_TRUE(r.ok()) << r.errors.front();
  auto rollout = check_paths(r.config, node_role::rollout, false);
  EXPECT_TRUE(std::any_of(rollout.begin(), rollout.end(),
                          [](auto& e) { return e.find("rollout.skills_dir") != std::string::npos; }));
  EXPECT_TRUE(std::any_of(rollout.begin(), rollout.end(),
                          [](auto& e) { return e.find("policy.replay_path") != std::string::npos; }));
  auto coord = check_paths(r.config, node_role::coordinator, true);
  ASSERT_EQ(coord.size(), 1u);
  EXPECT_NE(coord[0].find("rollout.tasks_dir"), std::string::npos);
  EXPECT_TRUE(check_paths(r.config, node_role::coordinator, false).empty());  // not driving a run
  EXPECT_TRUE(check_paths(r.config, node_role::learner, false).empty());
  // The repository's own paths are fine.
  auto good = parse_config("[rollout]\nskills_dir = \"" + source_dir() + "/skills\"\ntasks_dir = \"" + source_dir() +
                               "/skills/tasks\"\n[policy]\nreplay_path = \"" + source_dir() +
                               "/skills/replay/default.jsonl\"\n[gpu_pool]\nbackend = \"sim\"\n",
                           "t.toml");
  ASSERT_TRUE(good.ok());
  for (auto role : {node_role::rollout, node_role::gpu_pool, node_role::coordinator, node_role::local})
    EXPECT_TRUE(check_paths(good.config, role, true).empty())
        << to_string(role) << ": " << check_paths(good.config, role, true)[0];
}

TEST(config, scheduler_idle_is_spin_or_sleep) {
  EXPECT_EQ(parse_config("", "t.toml").config.runtime.scheduler_idle, idle_mode::spin);  // CAF's default polling
  auto r = parse_config("[runtime]\nscheduler_idle = \"sleep\"\n", "t.toml");
  ASSERT_TRUE(r.ok()) << r.errors.front();
  EXPECT_EQ(r.config.runtime.scheduler_idle, idle_mode::sleep);
  EXPECT_TRUE(has_error(parse_config("[runtime]\nscheduler_idle = \"nap\"\n", "t.toml"), "runtime.scheduler_idle"));
}

TEST(config, skill_file_and_prompt_tools) {
  auto r =
      parse_config("[rollout]\nskill_file = \"no/such/SKILL.md\"\nprompt_tools = [\"Read\", \"Bash\"]\n", "t.toml");
  ASSERT_TRUE(r.ok()) << r.errors.front();
  EXPECT_EQ(r.config.rollout.prompt_tools, (std::vector<std::string>{"Read", "Bash"}));
  auto errors = check_paths(r.config, node_role::rollout, false);
  EXPECT_TRUE(std::any_of(errors.begin(), errors.end(), [](auto& e) {
    return e.find("rollout.skill_file: 'no/such/SKILL.md'") != std::string::npos;
  }));
  EXPECT_TRUE(parse_config("", "t.toml").config.rollout.skill_file.empty());  // default: the workspace's SKILL.md
  EXPECT_TRUE(has_error(parse_config("[rollout]\nprompt_tools = \"Read\"\n", "t.toml"), "prompt_tools"));
}

TEST(config, train_and_learner_sections_are_strict) {
  auto r = parse_config(
      "[train]\nstages = [\"rft\", \"agentic_ppo\"]\n[train.rft]\nmin_reward = 2\n"
      "[train.value_pretrain]\nmin_explained_variance = 0.5\n",
      "t.toml");
  ASSERT_TRUE(r.ok()) << r.errors.front();
  EXPECT_EQ(r.config.train.stages.size(), 2U);
  EXPECT_EQ(r.config.train.rft.min_reward, 2);
  EXPECT_DOUBLE_EQ(r.config.train.stage(caf_agent::rollout::stage_kind::value_pretrain).min_explained_variance, 0.5);
  EXPECT_EQ(r.config.train.single_turn_ppo.max_turns, 1);

  auto unknown = parse_config("[train.rft]\nmin_rewardz = 2\n", "t.toml");
  EXPECT_TRUE(has_error(unknown, "unknown config key 'train.rft.min_rewardz'"));
  auto wrong_stage_key = parse_config("[train.agentic_ppo]\nmin_reward = 2\n", "t.toml");
  EXPECT_TRUE(has_error(wrong_stage_key, "unknown config key 'train.agentic_ppo.min_reward'"));
  auto bad_stage = parse_config("[train]\nstages = [\"ppo\"]\n", "t.toml");
  EXPECT_TRUE(has_error(bad_stage, "'ppo' is not one of"));
  auto not_table = parse_config("[train]\nrft = 3\n", "t.toml");
  EXPECT_TRUE(has_error(not_table, "'train.rft' must be a table"));
  auto gate = parse_config("[train.value_pretrain]\nmin_explained_variance = 1.5\n", "t.toml");
  EXPECT_TRUE(has_error(gate, "train.value_pretrain.min_explained_variance"));
  auto mismatch = parse_config("[learner]\nbackend = \"gloo\"\ndevice = \"cuda\"\n", "t.toml");
  EXPECT_TRUE(has_error(mismatch, "learner.backend"));
  auto old_key = parse_config("[learner]\nlearning_rate = 1e-6\n", "t.toml");
  EXPECT_TRUE(has_error(old_key, "unknown config key 'learner.learning_rate'"));
}

TEST(config, train_async_and_its_policy_lag) {
  auto defaults = parse_config("", "t.toml");
  ASSERT_TRUE(defaults.ok()) << defaults.errors.front();
  EXPECT_FALSE(defaults.config.train.async);  // synchronous unless asked
  EXPECT_EQ(defaults.config.train.max_policy_lag, 1);
  auto r = parse_config("[train]\nasync = true\nmax_policy_lag = 2\n", "t.toml");
  ASSERT_TRUE(r.ok()) << r.errors.front();
  EXPECT_TRUE(r.config.train.async);
  EXPECT_EQ(r.config.train.max_policy_lag, 2);
  EXPECT_TRUE(parse_config("[train]\nmax_policy_lag = 0\n", "t.toml").ok());
  EXPECT_TRUE(
      has_error(parse_config("[train]\nmax_policy_lag = -1\n", "t.toml"), "'train.max_policy_lag': must be >= 0"));
  EXPECT_TRUE(has_error(parse_config("[train]\nmax_policy_lag = 1.5\n", "t.toml"), "train.max_policy_lag"));
  EXPECT_TRUE(has_error(parse_config("[train]\nasync = \"yes\"\n", "t.toml"), "'train.async' must be a boolean"));
  EXPECT_TRUE(
      has_error(parse_config("[train]\nasynchronous = true\n", "t.toml"), "unknown config key 'train.asynchronous'"));
}

TEST(config, train_stage_schedules_and_eval_rounds) {
  auto r = parse_config(
      "[train]\nstages = [\"rft\", \"agentic_ppo\"]\n"
      "[train.eval]\nepisodes = 6\n"
      "[train.rft]\ndemonstrations = \"skills/replay/default.jsonl\"\niterations = 3\nsteps_per_iteration = 10\n"
      "batch_sequences = 1\nlr_schedule = \"phases\"\nlr_phases = [[20, 1e-2], [10, 3e-3]]\n"
      "[train.agentic_ppo]\nactor_lr = 1e-4\ntemperature = 1.0\nlr_schedule = \"cosine\"\nwarmup_steps = 1\n",
      "t.toml");
  ASSERT_TRUE(r.ok()) << r.errors.front();
  EXPECT_EQ(r.config.train.rft.optimizer_steps(), 30);
  ASSERT_EQ(r.config.train.rft.lr_phases.size(), 2U);
  EXPECT_EQ(r.config.train.rft.lr_phases[0].first, 20);
  EXPECT_DOUBLE_EQ(r.config.train.rft.lr_phases[1].second, 3e-3);
  EXPECT_TRUE(r.config.train.plays_demonstrations());
  EXPECT_EQ(r.config.train.eval.episodes, 6);
  EXPECT_DOUBLE_EQ(r.config.train.eval.temperature, 0.0);  // greedy by default

  auto sum = parse_config("[train.rft]\niterations = 2\nlr_schedule = \"phases\"\nlr_phases = [[3, 1e-2]]\n", "t.toml");
  EXPECT_TRUE(has_error(sum, "train.rft.lr_phases': the phases hold 3 optimizer steps, the stage takes"));
  auto shape = parse_config("[train.rft]\nlr_schedule = \"phases\"\nlr_phases = [1, 2]\n", "t.toml");
  EXPECT_TRUE(has_error(shape, "'train.rft.lr_phases' must be an array of [integer, number] pairs"));
  auto unset = parse_config("[train.rft]\nlr_phases = [[1, 1e-2]]\n", "t.toml");
  EXPECT_TRUE(has_error(unset, "set lr_schedule = \"phases\""));
  auto kind = parse_config("[train.rft]\nlr_schedule = \"linear\"\n", "t.toml");
  EXPECT_TRUE(has_error(kind, "'linear' is not one of: constant, phases, cosine"));
  auto warm = parse_config("[train.agentic_ppo]\nlr_schedule = \"cosine\"\nwarmup_steps = 9\n", "t.toml");
  EXPECT_TRUE(has_error(warm, "train.agentic_ppo.warmup_steps"));
  auto greedy_ppo = parse_config("[train.agentic_ppo]\ntemperature = 0.0\n", "t.toml");
  EXPECT_TRUE(has_error(greedy_ppo, "train.agentic_ppo.temperature"));
  auto both = parse_config("[train.rft]\nstore = \"x\"\ndemonstrations = \"y\"\n", "t.toml");
  EXPECT_TRUE(has_error(both, "and store both name the stage's data"));
  auto demo_elsewhere = parse_config("[train.agentic_ppo]\ndemonstrations = \"y\"\n", "t.toml");
  EXPECT_TRUE(has_error(demo_elsewhere, "unknown config key 'train.agentic_ppo.demonstrations'"));
  auto eval = parse_config("[train.eval]\nepisodes = -1\ntemperature = -0.5\n", "t.toml");
  EXPECT_TRUE(has_error(eval, "train.eval.episodes"));
  EXPECT_TRUE(has_error(eval, "train.eval.temperature"));
}

TEST(config, policy_cuda_graphs_is_a_boolean_defaulting_to_true) {
  EXPECT_TRUE(parse_config("", "t.toml").config.policy.cuda_graphs);
  auto off = parse_config("[policy]\ncuda_graphs = false\n", "t.toml");
  ASSERT_TRUE(off.ok()) << off.errors.front();
  EXPECT_FALSE(off.config.policy.cuda_graphs);
  EXPECT_TRUE(
      has_error(parse_config("[policy]\ncuda_graphs = 3\n", "t.toml"), "'policy.cuda_graphs' must be a boolean"));
}

// The backends are named enums: read from their names, printed as them, and a name not in the
// list is an error naming the key and every name.
TEST(config, backends_are_enums_read_by_name) {
  auto r = parse_config("[policy]\nbackend = \"sim\"\n[gpu_pool]\nbackend = \"sim\"\n", "t.toml");
  ASSERT_TRUE(r.ok()) << r.errors.front();
  EXPECT_EQ(r.config.policy.backend, caf_agent::policy::backend_kind::sim);
  EXPECT_EQ(r.config.gpu_pool.backend, caf_agent::gpu_pool::pool_backend::sim);
  EXPECT_NE(print_config(r.config).find("backend = \"sim\""), std::string::npos);
  EXPECT_EQ(app_config{}.policy.backend, caf_agent::policy::backend_kind::replay);
  EXPECT_EQ(app_config{}.gpu_pool.backend, caf_agent::gpu_pool::pool_backend::worker);

  auto policy = parse_config("[policy]\nbackend = \"gpt\"\n", "t.toml");
  EXPECT_TRUE(has_error(policy, "config key 'policy.backend': 'gpt' is not one of: replay, sim, libtorch, openai"))
      << policy.errors.front();
  auto pool = parse_config("[gpu_pool]\nbackend = \"docker\"\n", "t.toml");
  EXPECT_TRUE(has_error(pool, "config key 'gpu_pool.backend': 'docker' is not one of: worker, sim"))
      << pool.errors.front();
  auto typed = parse_config("[policy]\nbackend = 3\n", "t.toml");
  EXPECT_TRUE(has_error(typed, "'policy.backend' must be a string, got integer"));
}

// [train] stages are names in TOML and the enum rollout::stage_kind once read: in order, printed
// back as their names, and a name not in the list is an error naming every stage.
TEST(config, train_stages_are_read_once_as_stage_kinds) {
  using caf_agent::rollout::stage_kind;
  auto r = parse_config("[train]\nstages = [\"value_pretrain\", \"agentic_ppo\"]\n", "t.toml");
  ASSERT_TRUE(r.ok()) << r.errors.front();
  EXPECT_EQ(r.config.train.stages, (std::vector<stage_kind>{stage_kind::value_pretrain, stage_kind::agentic_ppo}));
  EXPECT_NE(print_config(r.config).find("stages = [\"value_pretrain\", \"agentic_ppo\"]"), std::string::npos);
  EXPECT_EQ(r.config.train.stage(stage_kind::value_pretrain).kind, stage_kind::value_pretrain);
  auto bad = parse_config("[train]\nstages = [\"rft\", \"sft\"]\n", "t.toml");
  EXPECT_TRUE(has_error(
      bad, "config key 'train.stages': 'sft' is not one of: single_turn_ppo, rft, value_pretrain, agentic_ppo"))
      << bad.errors.front();
  auto typed = parse_config("[train]\nstages = \"rft\"\n", "t.toml");
  EXPECT_TRUE(has_error(typed, "'train.stages' must be an array of strings"));
}

// Every key of every section, set to each value of a list of bad ones (the wrong type, the
// extremes of its type, empty, NaN): the config is read without a crash, and a refusal names
// the key it refuses. The keys come from print_config, so a new key is covered when it lands.
TEST(config, every_key_with_a_bad_value_is_refused_by_name_or_read) {
  const auto printed = print_config(app_config{});
  auto defaults = toml::parse(printed);
  const std::vector<std::string> bad = {"-1",
                                        "0",
                                        "9223372036854775807",
                                        "-9223372036854775808",
                                        "1e308",
                                        "-1e308",
                                        "nan",
                                        "inf",
                                        "0.5",
                                        "\"\"",
                                        "\"x\"",
                                        "true",
                                        "[]",
                                        "[1, 2]",
                                        "[\"a\", \"\"]",
                                        "{}",
                                        "{ a = 1 }",
                                        "\"../../../../etc/passwd\"",
                                        "\"" + std::string(5000, 'y') + "\""};
  size_t cases = 0, refused = 0;
  for (auto&& [section, table] : defaults) {
    if (!table.is_table()) continue;
    for (auto&& [key, value] : *table.as_table()) {
      if (value.is_table() || value.is_array_of_tables()) continue;  // sub-tables have their own tests
      const std::string name = std::string(section.str()) + "." + std::string(key.str());
      for (const auto& v : bad) {
        const std::string text = "[" + std::string(section.str()) + "]\n" + std::string(key.str()) + " = " + v + "\n";
        auto r = parse_config(text, "t.toml");
        ++cases;
        if (r.ok()) {
          EXPECT_TRUE(v != "nan" && v != "inf") << name << " accepted " << v;
          continue;
        }
        ++refused;
        // A key that goes with others (TLS's three files) may be refused as "the others must be set".
        EXPECT_TRUE(has_error(r, name) || has_error(r, "must be set"))
            << text << "refused without naming " << name << ": " << r.errors.front();
      }
    }
  }
  EXPECT_GT(cases, 1000u);
  EXPECT_GT(refused, cases / 2);  // wrong types at least
}

TEST(config, non_finite_numbers_and_an_inverted_clip_range_are_named) {
  auto r = parse_config("[policy]\ntemperature = nan\n[learner]\nactor_lr = inf\n", "t.toml");
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(has_error(r, "'policy.temperature': must be a finite number, got nan"));
  EXPECT_TRUE(has_error(r, "'learner.actor_lr': must be a finite number, got inf"));
  r = parse_config("[learner]\nclip_low = 1.5\nclip_high = 2\n", "t.toml");  // ppo_policy_loss would refuse it
  EXPECT_TRUE(has_error(r, "'learner.clip_low': must be in (0, 1)"));
  r = parse_config("[learner]\nclip_low = 0.3\nclip_high = 0.2\n", "t.toml");
  EXPECT_TRUE(has_error(r, "'learner.clip_high': must be >= learner.clip_low"));
  r = parse_config("[train.agentic_ppo]\nlr_schedule = \"phases\"\nlr_phases = [[1, 1e-3], [1, nan]]\n", "t.toml");
  EXPECT_TRUE(has_error(r, "'train.agentic_ppo.lr_phases': must be [integer, number] pairs of finite numbers"));
}

// The config's other closed sets read as enums too ([rollout] mode, [gpu_pool] device,
// [runtime] log_level and scheduler_idle): the names TOML held when they were strings read the
// same, print back as themselves, and a name not in the list is an error naming every name.
TEST(config, closed_sets_read_their_old_names_as_enums) {
  using caf_agent::log_level;
  using caf_agent::gpu_pool::pool_device;
  using caf_agent::messages::episode_mode;
  auto r = parse_config(
      "[rollout]\nmode = \"train\"\n[gpu_pool]\ndevice = \"cuda\"\n[runtime]\nlog_level = \"debug\"\n"
      "scheduler_idle = \"sleep\"\n",
      "t.toml");
  ASSERT_TRUE(r.ok()) << r.errors.front();
  EXPECT_EQ(r.config.rollout.mode, episode_mode::train);
  EXPECT_EQ(r.config.gpu_pool.device, pool_device::cuda);
  EXPECT_EQ(r.config.runtime.log_level, log_level::debug);
  EXPECT_EQ(r.config.runtime.scheduler_idle, idle_mode::sleep);
  const auto printed = print_config(r.config);
  for (auto line : {"mode = \"train\"", "device = \"cuda\"", "log_level = \"debug\"", "scheduler_idle = \"sleep\""})
    EXPECT_NE(printed.find(line), std::string::npos) << line;
  auto back = parse_config(printed, "printed");
  ASSERT_TRUE(back.ok()) << back.errors.front();
  EXPECT_EQ(back.config.rollout.mode, episode_mode::train);
  EXPECT_EQ(back.config.gpu_pool.device, pool_device::cuda);
  EXPECT_EQ(back.config.runtime.log_level, log_level::debug);

  const app_config defaults;
  EXPECT_EQ(defaults.rollout.mode, episode_mode::eval);
  EXPECT_EQ(defaults.gpu_pool.device, pool_device::cpu);
  EXPECT_EQ(defaults.runtime.log_level, log_level::info);

  auto mode = parse_config("[rollout]\nmode = \"test\"\n", "t.toml");
  EXPECT_TRUE(has_error(mode, "config key 'rollout.mode': 'test' is not one of: train, eval")) << mode.errors.front();
  auto device = parse_config("[gpu_pool]\ndevice = \"tpu\"\n", "t.toml");
  EXPECT_TRUE(has_error(device, "config key 'gpu_pool.device': 'tpu' is not one of: cpu, cuda"))
      << device.errors.front();
  auto level = parse_config("[runtime]\nlog_level = \"warn\"\n", "t.toml");
  EXPECT_TRUE(has_error(level, "config key 'runtime.log_level': 'warn' is not one of: quiet, info, debug"))
      << level.errors.front();
  auto idle = parse_config("[runtime]\nscheduler_idle = \"nap\"\n", "t.toml");
  EXPECT_TRUE(has_error(idle, "config key 'runtime.scheduler_idle': 'nap' is not one of: spin, sleep"))
      << idle.errors.front();
}

// The same for [learner] and [sandbox]: backend, compute_dtype, weight_sync ("auto" is the
// enumerator `automatic`: the name, not the identifier, is what files hold), isolation.
TEST(config, learner_and_sandbox_closed_sets_read_their_old_names_as_enums) {
  namespace ln = caf_agent::learner;
  auto r = parse_config(
      "[learner]\nbackend = \"nccl\"\ndevice = \"cuda\"\ncompute_dtype = \"bfloat16\"\nweight_sync = \"disk\"\n"
      "[sandbox]\nisolation = \"none\"\n",
      "t.toml");
  ASSERT_TRUE(r.ok()) << r.errors.front();
  EXPECT_EQ(r.config.learner.backend, ln::dp_backend::nccl);
  EXPECT_EQ(r.config.learner.compute_dtype, ln::compute_dtype_kind::bfloat16);
  EXPECT_EQ(r.config.learner.weight_sync, ln::weight_sync_mode::disk);
  EXPECT_EQ(r.config.sandbox.isolation, caf_agent::sandbox::isolation_kind::none);
  const app_config defaults;
  EXPECT_EQ(defaults.learner.backend, ln::dp_backend::gloo);
  EXPECT_EQ(defaults.learner.weight_sync, ln::weight_sync_mode::automatic);
  EXPECT_NE(print_config(defaults).find("weight_sync = \"auto\""), std::string::npos);
  EXPECT_EQ(defaults.sandbox.isolation, caf_agent::sandbox::isolation_kind::bwrap);

  auto backend = parse_config("[learner]\nbackend = \"mpi\"\n", "t.toml");
  EXPECT_TRUE(has_error(backend, "config key 'learner.backend': 'mpi' is not one of: gloo, nccl"))
      << backend.errors.front();
  auto sync = parse_config("[learner]\nweight_sync = \"ipc\"\n", "t.toml");
  EXPECT_TRUE(has_error(sync, "config key 'learner.weight_sync': 'ipc' is not one of: auto, disk"))
      << sync.errors.front();
  auto gloo_gpu = parse_config("[learner]\ndevice = \"cuda\"\n", "t.toml");  // the rule between fields still holds
  EXPECT_TRUE(has_error(gloo_gpu, "learner.backend")) << gloo_gpu.errors.front();
  auto isolation = parse_config("[sandbox]\nisolation = \"docker\"\n", "t.toml");
  EXPECT_TRUE(has_error(isolation, "config key 'sandbox.isolation': 'docker' is not one of: bwrap, none"))
      << isolation.errors.front();
}
