#pragma once
/// actors/engine_policy_server.hpp: the `libtorch` policy backend, in process.
///
/// generate_request (prompt_tokens) -> completion with the sampled tokens and
/// their logprobs. Each request is handed to a policy::engine_service at once,
/// so requests from many episodes decode together in the engine's continuous
/// batch; the actor itself never blocks. weights_published -> error text
/// (empty on success): the engine switches versions between steps.
///
/// Built only with LibTorch (target caf_agent_engine_actors); the header has
/// no torch types.

#include <cstdint>
#include <memory>

#include <caf/fwd.hpp>

#include "policy/model/engine_service.hpp"
#include "policy/text/tokenizer.hpp"
#include "rollout/policy_backend.hpp"

namespace caf_agent {

/// Spawns the server. `stop_token` ends a turn (<|im_end|>). With `script` (a token-level
/// replay backend, [policy] script), every reply is the script's turn for the request's task
/// and turn, teacher-forced through the engine (generation_request::forced_tokens): the engine
/// runs its passes over those tokens and the completion carries the model's own log-probs, so a
/// random model does the real generation work for honest kernels.
caf::actor spawn_engine_policy_server(caf::actor_system& sys, std::shared_ptr<policy::engine_service> engine,
                                      std::shared_ptr<const policy::tokenizer> tok, int32_t stop_token,
                                      std::shared_ptr<rollout::policy_backend> script = nullptr);

}  // namespace caf_agent
