#pragma once
/// rollout/policy_backend.hpp: the interface every policy backend implements.
///
/// A backend turns a generate_request into a completion, in one of three ways (its mode(),
/// which decides where the policy server actor runs it):
/// - immediate (sim, replay): generate() returns at once, with a simulated latency the actor
///   waits out with a timer, so thousands of episodes cost no threads;
/// - asynchronous (the in-process LibTorch engine): submit() hands the request on and returns;
///   the backend calls `done` later, from its own thread;
/// - blocking (openai): generate() blocks on real work; the actor runs it on detached workers.

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "messages/policy.hpp"
#include "policy/text/json.hpp"
#include "policy/text/tokenizer.hpp"

namespace caf_agent::rollout {

/// A completion plus how long the backend asks the caller to wait before
/// delivering it (simulated latency; zero for real backends).
struct backend_reply {
  messages::completion completion;
  std::chrono::microseconds delay{0};
};

/// How a backend answers (see the file comment): where the policy server runs it.
enum class backend_mode {
  immediate,     ///< generate() returns at once; backend_reply::delay is waited out by a timer
  asynchronous,  ///< submit() returns at once and calls `done` later, maybe on another thread
  blocking,      ///< generate() blocks on real work: run on a detached worker
};

/// Called once per submitted request with its reply; may run on any thread.
using reply_callback = std::function<void(backend_reply)>;

/// One policy backend.
class policy_backend {
 public:
  virtual ~policy_backend() = default;
  /// Answers one request. Never throws: failures are completions with
  /// finish_reason "error" and the error text.
  virtual backend_reply generate(const messages::generate_request& req) = 0;
  /// Answers one request through `done`, called exactly once (failures too, as error
  /// completions). The default runs generate() and calls `done` before it returns, filling a
  /// policy_version of 0 with weights_version(). Asynchronous backends override it; their
  /// `done` may run on another thread, so it must only hand the reply on.
  virtual void submit(messages::generate_request req, reply_callback done) {
    auto reply = generate(req);
    if (reply.completion.policy_version == 0) reply.completion.policy_version = weights_version();
    done(std::move(reply));
  }
  /// How this backend answers.
  virtual backend_mode mode() const = 0;
  /// A short name for logs ("sim", "replay", ...).
  virtual std::string name() const = 0;
  /// New weights were published: backends that hold a model switch to them
  /// (an external server reloads); backends without weights only note the
  /// version. Returns an error text, empty on success. May block (a blocking
  /// backend's runs where its generate() runs).
  virtual std::string publish_weights(const std::string& path, uint64_t version) {
    (void)path;
    version_ = version;
    return {};
  }
  /// The weights version completions report.
  uint64_t weights_version() const { return version_; }
  /// Counters for the policy server's stats answer (empty: none). Called on the server's
  /// thread while requests may be running, so a backend that counts keeps them thread-safe.
  virtual std::map<std::string, double> stats() const { return {}; }

 protected:
  uint64_t version_ = 0;
};

/// Settings of the sim backend.
struct sim_policy_options {
  double latency_ms_mean = 200;  ///< lognormal policy latency per turn
  double latency_sigma = 0.5;    ///< lognormal shape
  int verify_every = 10;         ///< a `verify` command every N turns
  int profile_every = 25;        ///< a `profile` command every N turns
  int finish_after = 150;        ///< final answer at this turn (the episode's limit cuts earlier)
  double malformed_rate = 0.01;  ///< share of turns with a malformed tool call
  uint64_t seed = 1;
};

/// Scripted tool calls with realistic latency; for load tests.
std::unique_ptr<policy_backend> make_sim_policy(sim_policy_options opts);

/// Token mode of the replay backend: the checkpoint's tokenizer and its end-of-turn id.
struct replay_tokens {
  std::shared_ptr<const policy::tokenizer> tok;  ///< null: text mode
  int32_t im_end = -1;                           ///< appended to every turn's tokens
};

/// Replays recorded assistant turns. The file is JSONL, one object per line:
/// {"task_id": "add_relu" | "*", "turns": ["<assistant text>", ...]}.
/// An episode of task T replays the entry for T (else "*"); past the recorded
/// turns it answers with a final answer. With `tokens` (token mode) every
/// completion also carries the turn's text encoded with that tokenizer plus the
/// end-of-turn token, and logprob 0 per token (nothing was sampled), so the
/// episode records token-level demonstrations for rejection fine-tuning.
/// Returns an error message instead of a backend when the file is missing or
/// malformed (names the line).
std::unique_ptr<policy_backend> make_replay_policy(const std::string& path, double latency_ms, std::string& error,
                                                   replay_tokens tokens = {});

/// Settings of the openai backend.
struct openai_policy_options {
  std::string base_url;         ///< http://HOST:PORT/v1
  std::string api_key;          ///< "" = none
  std::string model;            ///< sent as the request's model
  int64_t timeout_ms = 120000;  ///< per attempt
  int32_t max_retries = 2;      ///< connection errors, 429 and 5xx
  policy::json_array tools;     ///< the tool schemas sent with every request
};

/// A client of any OpenAI-compatible chat server (vLLM, SGLang, the inference
/// role). Needs generate_request::messages_json. The completion's text is the
/// assistant turn in the chat format (content and <tool_call> blocks), its
/// tokens and logprobs what the server returned (our server and vLLM with
/// return_token_ids). publish_weights calls the server's update_weights_from_disk.
/// Thread-safe: every call opens its own connection.
std::unique_ptr<policy_backend> make_openai_policy(const openai_policy_options& opts, std::string& error);

}  // namespace caf_agent::rollout
