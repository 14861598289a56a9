#pragma once
/// messages/type_ids.hpp: the single CAF type-id block of caf-agent.
///
/// Every message type is listed once in CAF_AGENT_MESSAGE_TYPES; the block, the
/// runtime registration and the round-trip test all expand that list. Add a new
/// type at the end (ids are positional; appending keeps existing ids stable).

#include <caf/type_id.hpp>

#include "messages/cluster.hpp"
#include "messages/episode.hpp"
#include "messages/eval.hpp"
#include "messages/learner.hpp"
#include "messages/policy.hpp"
#include "messages/tools.hpp"
#include "messages/trajectory.hpp"

#define CAF_AGENT_MESSAGE_TYPES(X) \
  X(node_info)                     \
  X(register_node)                 \
  X(register_ack)                  \
  X(node_heartbeat)                \
  X(node_status)                   \
  X(get_cluster)                   \
  X(cluster_snapshot)              \
  X(leave_cluster)                 \
  X(task_spec)                     \
  X(start_episode)                 \
  X(episode_done)                  \
  X(rollout_capacity)              \
  X(sampling_params)               \
  X(generate_request)              \
  X(completion)                    \
  X(tool_request)                  \
  X(tool_response)                 \
  X(eval_request)                  \
  X(eval_result)                   \
  X(pool_credits)                  \
  X(tool_stats)                    \
  X(trajectory_record)             \
  X(train_batch)                   \
  X(train_step_done)               \
  X(weights_published)             \
  X(service_announce)              \
  X(node_lost)                     \
  X(episode_started)               \
  X(actor_kind_metrics)            \
  X(actor_top)                     \
  X(episode_progress)              \
  X(pool_metrics)                  \
  X(node_metrics)                  \
  X(get_view)

#define CAF_AGENT_ADD_TYPE_ID(name) CAF_ADD_TYPE_ID(caf_agent, (caf_agent::messages::name))

CAF_BEGIN_TYPE_ID_BLOCK(caf_agent, caf::first_custom_type_id)
CAF_AGENT_MESSAGE_TYPES(CAF_AGENT_ADD_TYPE_ID)
CAF_END_TYPE_ID_BLOCK(caf_agent)

#undef CAF_AGENT_ADD_TYPE_ID

namespace caf_agent::atoms {
// Rationale: CAF 0.17 atoms are at most 10 characters.
using tick = caf::atom_constant<caf::atom("tick")>;
using stop = caf::atom_constant<caf::atom("stop")>;
using stats = caf::atom_constant<caf::atom("stats")>;
using drain = caf::atom_constant<caf::atom("drain")>;
using credits = caf::atom_constant<caf::atom("credits")>;
using ping = caf::atom_constant<caf::atom("ping")>;
using lookup = caf::atom_constant<caf::atom("lookup")>;
using subscribe = caf::atom_constant<caf::atom("subscribe")>;
using open = caf::atom_constant<caf::atom("open")>;
using close = caf::atom_constant<caf::atom("close")>;
using done = caf::atom_constant<caf::atom("done")>;
using run = caf::atom_constant<caf::atom("run")>;
using build = caf::atom_constant<caf::atom("build")>;
using built = caf::atom_constant<caf::atom("built")>;
using transcript = caf::atom_constant<caf::atom("transcript")>;
}  // namespace caf_agent::atoms
