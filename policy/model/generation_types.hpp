#pragma once
// Plain request / result types of the generation engine (no torch types), so the rollout's
// actor translation units can build requests without including LibTorch.

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace caf_agent::policy {

/// How the next token is drawn.
struct sampling_params {
  /// Softmax temperature; 0 means greedy (argmax). Must be >= 0.
  float temperature = 1.0f;
  /// Nucleus sampling: keep the smallest set of most likely tokens whose mass reaches top_p
  /// (1 keeps all). Must be in (0, 1].
  float top_p = 1.0f;
  /// Keep only the top_k most likely tokens; 0 keeps all. Must be >= 0.
  int32_t top_k = 0;
};

/// Asked after every appended token with all generated tokens so far; returning true ends the
/// sequence with finish_reason::stop_string. The text layer supplies it to detect stop
/// strings; it runs on the thread that calls step() and must be cheap.
using stop_predicate = std::function<bool(const std::vector<int32_t>& generated)>;

/// One sequence to generate.
struct generation_request {
  std::vector<int32_t> prompt;          ///< Token ids; non-empty, shorter than the engine's context.
  int32_t max_new_tokens = 256;         ///< Upper bound on generated tokens (>= 1).
  sampling_params sampling;             ///< Temperature, top-p, top-k.
  std::vector<int32_t> stop_token_ids;  ///< Generation ends after emitting one of these.
  uint64_t seed = 0;                    ///< Seeds this request's own RNG: same seed, same tokens.
  stop_predicate stop_check;            ///< Optional stop-string hook (see stop_predicate).
  /// Teacher forcing: when non-empty, generated token i is forced_tokens[i] instead of a drawn
  /// one; the engine still runs its prefill and decode passes and reports the model's own
  /// log pi(forced token) (see generation_result::logprobs). The sequence ends after the last
  /// forced token at the latest (reason max_new_tokens, or stop_token when that token is one).
  /// For scripted policies: a random model's passes over a script's tokens cost what sampling
  /// would. Ids must lie inside the vocabulary.
  std::vector<int32_t> forced_tokens;
};

/// Why a sequence ended.
enum class finish_reason {
  stop_token,      ///< Emitted a stop token id (it is the last token of the result).
  stop_string,     ///< stop_check returned true.
  max_new_tokens,  ///< Generated max_new_tokens tokens.
  context_limit,   ///< Prompt plus generated tokens filled the engine's context.
  aborted,         ///< cancel() was called.
};

/// A finished sequence.
struct generation_result {
  uint64_t id = 0;              ///< The id submit() returned.
  std::vector<int32_t> tokens;  ///< Generated tokens (prompt excluded).
  /// log pi(token) per generated token under softmax(logits / temperature) over the full
  /// vocabulary (before top-k / top-p filtering; temperature 0 counts as 1). This is what
  /// decoder::token_logprobs recomputes in the learner, as PPO's ratio needs.
  std::vector<float> logprobs;
  /// The logit of each generated token (before the temperature, as the model computed it, in
  /// its dtype), when engine_options::report_logits is set; else empty.
  std::vector<float> logits;
  finish_reason reason = finish_reason::max_new_tokens;  ///< Why it ended.
  /// Weights version that produced the first generated token.
  uint64_t policy_version = 0;
  /// Weights version that produced the last token; differs from policy_version when a weight
  /// swap happened while the sequence was running.
  uint64_t last_policy_version = 0;
};

/// Name of a finish_reason ("stop_token", ...).
const char* finish_reason_name(finish_reason reason);

}  // namespace caf_agent::policy
