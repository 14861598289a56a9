#pragma once
/// messages/enums.hpp: the closed sets of the protocol as enums with names (no CAF, no
/// msgpack: libraries such as gpu_pool/ include it too).
///
/// Each enum lists its names once (CAF_AGENT_ENUM_NAMES, base/named_enum.hpp); `name_of` and
/// `parse_name` convert, `to_string` serves CAF's to_string and log text. On disk (msgpack, messages/fields.hpp) and
/// in JSON an enum is written as its name, so the names are the strings the fields held before
/// they were enums: files written then read the same.

#include <cstdint>
#include <string>
#include <string_view>

#include "base/named_enum.hpp"

namespace caf_agent::messages {

// The vocabulary of base/named_enum.hpp under the names the protocol has always used.
using base::enum_names;
using base::name_of;
using base::names_list;
using base::parse_name;
/// An enum whose values have names (base::named_enum).
template <class E>
concept named_enum = base::named_enum<E>;

/// What an evaluation runs (eval_request.mode; the episode's verify/profile commands, the
/// final evaluation that gives the reward, and `baseline`: the task's reference timed in eager
/// mode and under torch.compile with no submission, skills/eval_worker's baseline.py).
enum class eval_mode : uint8_t { verify, profile, final, baseline };
CAF_AGENT_ENUM_NAMES(eval_mode, "verify", "profile", "final", "baseline")

/// How an evaluation ended (eval_result.status): `ok` carries a verdict (correct or not);
/// the others carry no verdict and never a reward (gpu_pool/judgement decides which).
enum class eval_status : uint8_t {
  ok,           ///< a verdict on the submission
  infra_error,  ///< the infrastructure failed (not the policy's fault)
  rejected,     ///< the pool refused the request (a duplicate, a second one of an episode)
  task_error,   ///< the judge refused the task itself (reason says why)
};
CAF_AGENT_ENUM_NAMES(eval_status, "ok", "infra_error", "rejected", "task_error")

/// How a tool call ended (tool_response.status; sandbox/tool_types uses this enum); says
/// whether a retry can help.
enum class tool_status : uint8_t {
  ok,        ///< the tool ran; its output is the observation (a non-zero shell exit is still ok)
  error,     ///< bad arguments or a tool failure the agent caused; other input helps
  timeout,   ///< ran past its wall-clock limit and was killed; a retry only helps if faster
  killed,    ///< killed (signal, resource limit, KillBash); the same call rarely helps
  internal,  ///< infrastructure (spawn failed, sandbox closed); not the agent's fault
};
CAF_AGENT_ENUM_NAMES(tool_status, "ok", "error", "timeout", "killed", "internal")

/// Why a completion ended (completion.finish_reason).
enum class completion_finish : uint8_t {
  stop,    ///< a stop token or string, or the end of the turn
  length,  ///< the token budget or the context ran out
  error,   ///< the backend failed; completion.error says why
};
CAF_AGENT_ENUM_NAMES(completion_finish, "stop", "length", "error")

/// How an episode ended (trajectory_record.termination, episode_done.termination): its final
/// answer, one of its limits, or `aborted` (an infrastructure failure or a policy error: no
/// reward, not trained on).
enum class episode_end : uint8_t { finished, turn_limit, context_limit, wall_limit, aborted };
CAF_AGENT_ENUM_NAMES(episode_end, "finished", "turn_limit", "context_limit", "wall_limit", "aborted")

/// What an episode is for (start_episode.mode, trajectory_record.mode, a run's plan): `train`
/// (150 turns, trained on) or `eval` (200 turns, reported only).
enum class episode_mode : uint8_t { train, eval };
CAF_AGENT_ENUM_NAMES(episode_mode, "train", "eval")

/// What a node runs (node_info.role, `caf-agent --role`; the names are the command line's).
enum class node_role : uint8_t { coordinator, rollout, gpu_pool, learner, inference, inspector, local };
CAF_AGENT_ENUM_NAMES(node_role, "coordinator", "rollout", "gpu-pool", "learner", "inference", "inspector", "local")

/// What a learner step trains (train_batch.stage; rollout::learner_stage maps a [train] stage to
/// it): `ppo` (actor and critic on rewards), `rft` (the actor's likelihood of kept trajectories),
/// `vp` (value pretraining: the critic alone).
enum class learner_stage : uint8_t { ppo, rft, vp };
CAF_AGENT_ENUM_NAMES(learner_stage, "ppo", "rft", "vp")

/// Whose policy plays an episode (start_episode.policy, the trainer's choice): `node`, the
/// rollout node's policy server; `demonstrations`, its replay of the recorded demonstrations
/// (train.rft.demonstrations).
enum class episode_policy : uint8_t { node, demonstrations };
CAF_AGENT_ENUM_NAMES(episode_policy, "node", "demonstrations")

/// A view of the cluster the coordinator renders (get_view.what; the inspector's VIEW argument
/// and the live view's sections): `episode` is one episode's transcript (get_view.arg: its id),
/// `metrics` the metrics JSONL's line, `prometheus` the text exposition format; the others JSON
/// from observe/cluster_view.
enum class view_kind : uint8_t { nodes, actors, episodes, gpu, queues, train, run, episode, metrics, prometheus };
CAF_AGENT_ENUM_NAMES(view_kind, "nodes", "actors", "episodes", "gpu", "queues", "train", "run", "episode", "metrics",
                     "prometheus")

/// What a service is: the GPU pool, a rollout manager, a policy server, a learner shard. A
/// service announces itself by its name (service_announce.name): the kind's name, and for a
/// learner shard its rank after it ("learner/3"; messages/cluster.hpp's service_name).
enum class service_kind : uint8_t { gpu_pool, rollout, policy, learner };
CAF_AGENT_ENUM_NAMES(service_kind, "gpu_pool", "rollout", "policy", "learner")

}  // namespace caf_agent::messages
