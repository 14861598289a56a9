#pragma once
/// rollout/engine_policy.hpp: the `libtorch` policy backend, over the in-process engine.
///
/// generate_request (prompt_tokens) -> completion with the sampled tokens, their logprobs and
/// the decoded text. submit() hands each request to a policy::engine_service at once, so
/// requests from many episodes decode together in the engine's continuous batch; the reply
/// comes on the engine's thread (backend_mode::asynchronous). publish_weights stages the new
/// version in the engine, which switches between steps.
///
/// Built only with LibTorch (target caf_agent_rollout_engine); the header has no torch types.

#include <cstdint>
#include <memory>

#include "policy/model/engine_service.hpp"
#include "policy/text/tokenizer.hpp"
#include "rollout/policy_backend.hpp"

namespace caf_agent::rollout {

/// The backend over `engine`. `stop_token` ends a turn (<|im_end|>). With `script` (a
/// token-level replay backend, [policy] script), every reply is the script's turn for the
/// request's task and turn, teacher-forced through the engine (generation_request::
/// forced_tokens): the engine runs its passes over those tokens and the completion carries the
/// model's own log-probs, so a random model does the real generation work for honest kernels.
std::unique_ptr<policy_backend> make_engine_policy(std::shared_ptr<policy::engine_service> engine,
                                                   std::shared_ptr<const policy::tokenizer> tok, int32_t stop_token,
                                                   std::shared_ptr<policy_backend> script = nullptr);

}  // namespace caf_agent::rollout
