#pragma once
/// actors/rollout_manager.hpp: a rollout node's episode admission.
///
/// Receives start_episode from the run driver, admits at most rollout.max_concurrent_episodes
/// episodes (fewer with rollout.kv_admission, when the policy engine's KV cache would not hold
/// their conversations: kv_capacity_tokens)
/// and only while some GPU pool admits work (back-pressure: no new episodes
/// while every pool's queue is full), spawns episode actors (telling the driver each
/// one started: episode_started), forwards their trajectory records to the driver and
/// reports its capacity and limit (rollout_capacity) after every change.
///
/// Every GPU pool the coordinator announces is used, as one logical pool: each
/// evaluation goes to the pool `rollout::choose_pool` picks from the pools' credit
/// reports and this manager's own sends since (a pool that joins gets work at once).
/// The evaluations of a lost pool go to another one (or wait for one to join); stats
/// count the evaluations each pool node answered (`evals@NODE`). A pool handle that dies while
/// its node stays in the cluster (its connection closed; a request to it came back
/// request_receiver_down) costs its jobs no attempt, and the coordinator is asked for its pools
/// again a second later, so the pool comes back through a new handle (the wait doubles, up to
/// 30 s, while the pools found keep dying).

#include <cstdint>
#include <functional>
#include <map>
#include <string>

#include <caf/actor.hpp>
#include <caf/fwd.hpp>
#include <caf/replies_to.hpp>
#include <caf/typed_actor.hpp>

#include "actors/episode.hpp"
#include "actors/gpu_pool.hpp"
#include "rollout/config.hpp"

namespace caf_agent {

/// Settings of a rollout manager: [rollout] as TOML gave it, and what the node adds.
struct rollout_manager_options {
  /// [rollout]: max_concurrent_episodes (episodes at once), kv_admission (also bound them by
  /// the engine's KV cache, below).
  rollout::rollout_config rollout;
  /// The policy engine's KV storage in tokens when it runs in this process (0: unknown): with
  /// rollout.kv_admission, episodes at once are also bounded by it over the expected context
  /// (rollout/kv_admission.hpp), starting from `kv_initial_context` tokens.
  int64_t kv_capacity_tokens = 0;
  int64_t kv_initial_context = 0;
  std::string node_id;
  caf::actor coordinator;  ///< for service lookups (gpu_pool)
  pool_actor pool;         ///< set when known up front (local role)
  episode_env env;         ///< policy, tools, limits; pool and sink are filled in
  /// The replay of train.rft.demonstrations (token-level), for episodes whose
  /// start_episode::policy is demonstrations; null: such episodes are recorded aborted.
  policy_generator demonstrations;
};

/// The rollout manager's protocol: episodes to start (from the run driver, the sender
/// being where records and capacity reports go), its episodes' records and evaluations
/// (it is their sink and their evaluator), GPU pools announced or lost (through the
/// coordinator's subscription), pools' credit reports, the inspector's transcript of a
/// running episode and its stats (as text over the network, as a map in-process), and its own
/// reminder to ask the coordinator for the pools again (atoms::subscribe).
using rollout_manager_actor =
    caf::typed_actor<caf::reacts_to<messages::start_episode>, caf::reacts_to<messages::trajectory_record>,
                     caf::replies_to<messages::eval_request>::with<messages::eval_result>,
                     caf::reacts_to<messages::service_announce, caf::actor>, caf::reacts_to<messages::node_lost>,
                     caf::reacts_to<messages::pool_credits>, caf::reacts_to<atoms::subscribe>,
                     caf::replies_to<atoms::transcript, uint64_t>::with<std::string>,
                     caf::replies_to<atoms::stats, std::string>::with<std::string>,
                     caf::replies_to<atoms::stats>::with<std::map<std::string, double>>>;

/// The manager behind a handle that arrives untyped (a `rollout` service announcement):
/// the service name vouches for the protocol, as pool_of does for a pool.
inline rollout_manager_actor rollout_manager_of(const caf::actor& service) {
  return caf::actor_cast<rollout_manager_actor>(service);
}

/// Spawns the manager; it announces itself as service "rollout" to the coordinator.
rollout_manager_actor spawn_rollout_manager(caf::actor_system& sys, rollout_manager_options opts);

}  // namespace caf_agent
