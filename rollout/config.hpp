#pragma once
/// rollout/config.hpp: [rollout], the episodes and tool executors of a rollout node (defaults,
/// the field list that runtime/ reads TOML through and prints config/defaults.toml from, checks).

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "base/config_fields.hpp"
#include "messages/enums.hpp"
#include "sandbox/settings.hpp"

namespace caf_agent::rollout {

/// [rollout]: what each member means is said once, in fields().
struct rollout_config {
  int32_t max_concurrent_episodes = 4;
  int32_t tool_executors = 2;
  int32_t max_turns_train = 150;
  int32_t max_turns_eval = 200;
  int64_t context_limit_tokens = 131072;
  int64_t wall_limit_s = 3600;
  int64_t observation_limit_bytes = 16384;
  std::string tasks_dir = "skills/tasks";
  std::string skills_dir = "skills";
  std::string skill_file;
  std::vector<std::string> prompt_tools;
  int32_t episodes = 0;
  int32_t attempts = 1;
  messages::episode_mode mode = messages::episode_mode::eval;
  bool retry_aborted = false;
  bool kv_admission = false;

  /// The field list (base/config_fields.hpp).
  template <class F, class Self>
  static void fields(F& f, Self& c) {
    using namespace base;
    // Rationale for the upper bounds: well above any real node (a node of 8 GPUs runs hundreds
    // of episodes), low enough to catch a stray digit before it allocates or spawns.
    f("max_concurrent_episodes", c.max_concurrent_episodes, "episodes in flight on this node", positive(),
      range(1, 100000));
    f("tool_executors", c.tool_executors, "tool executor actors (each runs one tool call at a time)", positive(),
      range(1, 4096));
    f("max_turns_train", c.max_turns_train, "turn limit of a training episode", positive(), range(1, 100000));
    f("max_turns_eval", c.max_turns_eval, "turn limit of an evaluation episode", positive(), range(1, 100000));
    f("context_limit_tokens", c.context_limit_tokens, "an episode ends when its context reaches this", positive());
    f("wall_limit_s", c.wall_limit_s, "an episode ends after this long", positive());
    // Rationale: 1024 is the sandbox's smallest output cut (sandbox_config: below it not even
    // one compiler error fits), and tool output is cut by the sandbox at this limit.
    f("observation_limit_bytes", c.observation_limit_bytes, "a tool observation longer than this is truncated",
      at_least(1024, "must be >= 1024 (the sandbox's smallest output cut)"));
    f("tasks_dir", c.tasks_dir, "KernelBench-format problems", not_empty());
    f("skills_dir", c.skills_dir, "workspace template, SKILL.md, eval worker", not_empty());
    f("skill_file", c.skill_file, "the system prompt; empty: skills_dir/workspace/SKILL.md");
    f("prompt_tools", c.prompt_tools, "the tools the prompt describes (the sandbox serves all); empty: all");
    f("episodes", c.episodes, "episodes the local main job runs; 0: one per task and attempt",
      at_least(0, "must be >= 0"));
    f("attempts", c.attempts, "evaluation mode: attempts per task", positive());
    f("mode", c.mode, "train or eval");
    f("retry_aborted", c.retry_aborted,
      "re-run a lost node's started episodes as the next attempt instead of recording them aborted");
    // Rationale: off by default: past the cache, kept prefixes are recomputed, which may still
    // beat idling the engine while episodes wait on tools (measure before turning it on).
    f("kv_admission", c.kv_admission,
      "libtorch: also bound episodes at once by the engine's KV cache over the mean context episodes reach");
  }
  /// Rules between fields: none.
  void validate(base::config_errors&) const {}

  /// The sandbox settings the tool executors get: `s` with its output cut at no more than
  /// observation_limit_bytes, so the sandbox's one cut is the one the agent sees (the
  /// conversation adds tool output uncut: conversation::add_tool_output).
  sandbox::sandbox_settings tool_sandbox(sandbox::sandbox_settings s) const {
    s.max_output_bytes = std::min(s.max_output_bytes, observation_limit_bytes);
    return s;
  }
};

}  // namespace caf_agent::rollout
