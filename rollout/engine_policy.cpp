// rollout/engine_policy.cpp: see engine_policy.hpp.
#include "rollout/engine_policy.hpp"

#include <algorithm>
#include <chrono>
#include <future>
#include <map>
#include <span>

#include "base/log.hpp"
#include "policy/text/stop_strings.hpp"

namespace caf_agent::rollout {

namespace {

using messages::completion;
using messages::completion_finish;
using steady = std::chrono::steady_clock;

completion_finish finish_of(policy::finish_reason r) {
  switch (r) {
    case policy::finish_reason::stop_token:
    case policy::finish_reason::stop_string:
      return completion_finish::stop;
    case policy::finish_reason::max_new_tokens:
    case policy::finish_reason::context_limit:
      return completion_finish::length;
    case policy::finish_reason::aborted:
      return completion_finish::error;
  }
  return completion_finish::error;
}

backend_reply failed(uint64_t request_id, std::string why) {
  backend_reply r;
  r.completion.request_id = request_id;
  r.completion.finish_reason = completion_finish::error;
  r.completion.error = std::move(why);
  return r;
}

class engine_policy final : public policy_backend {
 public:
  engine_policy(std::shared_ptr<policy::engine_service> engine, std::shared_ptr<const policy::tokenizer> tok,
                int32_t stop_token, std::shared_ptr<policy_backend> script)
      : engine_(std::move(engine)), tok_(std::move(tok)), stop_token_(stop_token), script_(std::move(script)) {}

  void submit(messages::generate_request req, reply_callback done) override {
    if (req.prompt_tokens.empty())
      return done(
          failed(req.request_id, "the libtorch backend needs prompt_tokens (the episode must run in token mode)"));
    policy::generation_request g;
    if (script_) {  // the replay answers at once (no model): its tokens are the forced reply
      auto scripted = script_->generate(req).completion;
      if (scripted.finish_reason == completion_finish::error || scripted.tokens.empty())
        return done(failed(
            req.request_id,
            "policy.script: " + (scripted.error.empty() ? std::string("no tokens for the turn") : scripted.error)));
      g.forced_tokens = std::move(scripted.tokens);
    }
    g.prompt = std::move(req.prompt_tokens);
    g.max_new_tokens = std::max<int32_t>(1, req.sampling.max_new_tokens);
    g.sampling.temperature = req.sampling.temperature;
    g.sampling.top_p = req.sampling.top_p;
    g.sampling.top_k = req.sampling.top_k;
    g.stop_token_ids = {stop_token_};
    g.stop_check = policy::watch_stop_strings(*tok_, req.sampling.stop);
    // Rationale: a fixed per-request seed makes a run reproducible while every
    // episode and turn still draws differently.
    g.seed = req.sampling.seed * 0x9E3779B97F4A7C15ull + req.request_id;
    const auto request_id = req.request_id;
    const auto start = steady::now();
    // Rationale: the text is decoded here, on the engine's thread, so the callback hands on a
    // finished completion; a turn's decode is microseconds beside its generation.
    auto on_done = [tok = tok_, request_id, start, done](policy::generation_result r, std::string error) {
      if (!error.empty()) return done(failed(request_id, "libtorch engine: " + error));
      backend_reply out;
      auto& c = out.completion;
      c.request_id = request_id;
      c.tokens = std::move(r.tokens);
      c.logprobs = std::move(r.logprobs);
      c.finish_reason = finish_of(r.reason);
      c.policy_version = r.policy_version;
      if (c.finish_reason != completion_finish::error && !c.tokens.empty()) c.text = tok->decode(c.tokens);
      c.latency_us = std::chrono::duration_cast<std::chrono::microseconds>(steady::now() - start).count();
      done(std::move(out));
    };
    auto submitted = engine_->submit(std::move(g), std::move(on_done));
    if (!submitted) done(failed(request_id, "libtorch engine: " + submitted.error().message));
  }

  /// Submits and waits: for callers without an event loop (the policy server uses submit()).
  backend_reply generate(const messages::generate_request& req) override {
    auto answer = std::make_shared<std::promise<backend_reply>>();
    auto result = answer->get_future();
    submit(req, [answer](backend_reply r) { answer->set_value(std::move(r)); });
    return result.get();
  }

  backend_mode mode() const override { return backend_mode::asynchronous; }
  std::string name() const override { return "libtorch"; }

  std::string publish_weights(const std::string& path, uint64_t version) override {
    auto st = engine_->load_weights(path, version);
    if (!st) {
      log_error("policy",
                "weights version " + std::to_string(version) + " from " + path + " rejected: " + st.error().message);
      return st.error().message;
    }
    log_info("policy", "weights version " + std::to_string(version) + " staged from " + path);
    version_ = version;
    return {};
  }

  std::map<std::string, double> stats() const override {
    auto x = engine_->stats();
    std::map<std::string, double> out = {{"submitted", double(x.submitted)},
                                         {"completed", double(x.completed)},
                                         {"failed", double(x.failed)},
                                         {"rejected", double(x.rejected)},
                                         {"steps", double(x.steps)},
                                         {"generated_tokens", double(x.generated_tokens)},
                                         {"batch_rows_total", double(x.batch_rows_total)},
                                         {"outstanding", double(x.outstanding)},
                                         {"policy_version", double(engine_->policy_version())}};
    // Every engine counter under its field's name (decode_steps, prefilled_tokens, prefill_host_seconds, ...).
    policy::for_each_stat(
        [&](const char* name, auto member, policy::stat_kind) { out[name] = double(x.engine.*member); });
    return out;
  }

 private:
  std::shared_ptr<policy::engine_service> engine_;
  std::shared_ptr<const policy::tokenizer> tok_;
  int32_t stop_token_;
  std::shared_ptr<policy_backend> script_;
};

}  // namespace

std::unique_ptr<policy_backend> make_engine_policy(std::shared_ptr<policy::engine_service> engine,
                                                   std::shared_ptr<const policy::tokenizer> tok, int32_t stop_token,
                                                   std::shared_ptr<policy_backend> script) {
  return std::make_unique<engine_policy>(std::move(engine), std::move(tok), stop_token, std::move(script));
}

}  // namespace caf_agent::rollout
