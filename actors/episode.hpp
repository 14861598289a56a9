#pragma once
/// actors/episode.hpp: one agent episode, the ReAct loop.
///
/// open workspace -> [ generate -> tool calls / evaluations -> observations ]*
/// -> final evaluation -> reward -> exactly one trajectory_record, sent to
/// `sink` as the episode's last act. Every path out (finish, limits, policy or
/// sandbox failure, lost GPU pool) produces that one record.
///
/// Protocol (`episode_actor`, typed: a message outside it is a compile error):
///   (atoms::transcript) -> std::string   the transcript so far as JSON (the inspector's view)
///   (atoms::drain)                       the GPU pool's node was lost: the evaluation in
///                                        flight ends as unreachable
/// Everything else an episode does it asks for (requests to the policy, tools and pool).

#include <cstdint>
#include <memory>
#include <string>

#include <caf/actor.hpp>
#include <caf/fwd.hpp>
#include <caf/replies_to.hpp>
#include <caf/typed_actor.hpp>

#include "actors/gpu_pool.hpp"
#include "actors/policy_server.hpp"
#include "actors/tool_executor.hpp"
#include "messages/episode.hpp"
#include "messages/policy.hpp"
#include "messages/type_ids.hpp"
#include "policy/text/chat_format.hpp"
#include "policy/text/json.hpp"
#include "policy/text/tokenizer.hpp"

namespace caf_agent {

/// Where an episode's record goes: its rollout manager (which takes much else; its handle is
/// cast to this one line).
using record_sink_actor = caf::typed_actor<caf::reacts_to<messages::trajectory_record>>;

/// What an episode talks to and its limits.
struct episode_env {
  policy_generator policy;
  tool_router_actor tools;  ///< tool router of this node
  evaluator_actor pool;     ///< evaluates submissions (the rollout manager, routing to its GPU pools)
  record_sink_actor sink;   ///< receives the trajectory_record
  std::string node_id;
  std::string system_text;  ///< SKILL.md
  policy::json_array tool_schemas;
  int64_t context_limit_tokens = 131072;
  int64_t observation_limit_bytes = 16384;
  int64_t policy_timeout_ms = 120000;
  int64_t eval_timeout_ms = 600000;
  bool render_prompt = false;    ///< text backends that need the whole prompt
  bool render_messages = false;  ///< chat backends (openai): send messages_json
  /// Token-level backends (libtorch): episodes keep the exact token sequence
  /// with this tokenizer and send it as prompt_tokens. Null: text mode.
  std::shared_ptr<const policy::tokenizer> tokenizer;
  /// The checkpoint's chat format (its own template), used with `tokenizer`.
  policy::chat_format chat_format;
  messages::sampling_params sampling;  ///< sent with every generate_request
};

/// An episode's protocol (see the file comment): what its rollout manager sends it.
using episode_actor =
    caf::typed_actor<caf::replies_to<atoms::transcript>::with<std::string>, caf::reacts_to<atoms::drain>>;

/// Spawns the episode; it starts at once.
episode_actor spawn_episode(caf::actor_system& sys, messages::start_episode start, episode_env env);

}  // namespace caf_agent
