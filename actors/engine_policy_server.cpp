// actors/engine_policy_server.cpp: see engine_policy_server.hpp.
#include "actors/engine_policy_server.hpp"

#include <chrono>
#include <unordered_map>

#include <caf/all.hpp>

#include "actors/observed_actor.hpp"
#include "base/log.hpp"
#include "messages/type_ids.hpp"

namespace caf_agent {

namespace {

using namespace messages;

struct engine_server_state {
  std::shared_ptr<policy::engine_service> engine;
  std::shared_ptr<const policy::tokenizer> tok;
  int32_t stop_token = -1;
  std::shared_ptr<rollout::policy_backend> script;  ///< teacher-forced replies; null: sample
  std::unordered_map<uint64_t, std::pair<caf::response_promise, std::chrono::steady_clock::time_point>> waiting;
  uint64_t seq = 0;
  static inline const char* name = "engine_policy_server";
};

using engine_server = observed_actor<engine_server_state>;

completion_finish finish_name(policy::finish_reason r) {
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

completion error_completion(uint64_t request_id, std::string why) {
  completion c;
  c.request_id = request_id;
  c.finish_reason = completion_finish::error;
  c.error = std::move(why);
  return c;
}

// A stop-string check over the decoded tail (stop lists are short and rare).
policy::stop_predicate stop_strings(std::shared_ptr<const policy::tokenizer> tok, std::vector<std::string> stops) {
  if (stops.empty()) return nullptr;
  size_t longest = 0;
  for (auto& s : stops) longest = std::max(longest, s.size());
  return [tok, stops = std::move(stops), longest](const std::vector<int32_t>& generated) {
    // Each token decodes to >= 1 byte, so the last `longest` tokens cover any stop string.
    const size_t from = generated.size() > longest ? generated.size() - longest : 0;
    auto tail = tok->decode_bytes(std::span<const int32_t>(generated).subspan(from));
    for (auto& s : stops)
      if (!s.empty() && tail.size() >= s.size() && tail.compare(tail.size() - s.size(), s.size(), s) == 0) return true;
    return false;
  };
}

caf::behavior engine_server_fn(engine_server* self, std::shared_ptr<policy::engine_service> engine,
                               std::shared_ptr<const policy::tokenizer> tok, int32_t stop_token,
                               std::shared_ptr<rollout::policy_backend> script) {
  auto& st = self->state;
  st.engine = std::move(engine);
  st.tok = std::move(tok);
  st.stop_token = stop_token;
  st.script = std::move(script);
  return {
      [=](generate_request& req) -> caf::response_promise {
        auto& s = self->state;
        auto rp = self->make_response_promise();
        if (req.prompt_tokens.empty()) {
          rp.deliver(error_completion(req.request_id,
                                      "the libtorch backend needs prompt_tokens (the episode must run in token mode)"));
          return rp;
        }
        policy::generation_request g;
        if (s.script) {  // the replay answers at once (no model): its tokens are the forced reply
          auto scripted = s.script->generate(req).completion;
          if (scripted.finish_reason == completion_finish::error || scripted.tokens.empty()) {
            rp.deliver(error_completion(
                req.request_id,
                "policy.script: " + (scripted.error.empty() ? std::string("no tokens for the turn") : scripted.error)));
            return rp;
          }
          g.forced_tokens = std::move(scripted.tokens);
        }
        g.prompt = std::move(req.prompt_tokens);
        g.max_new_tokens = std::max<int32_t>(1, req.sampling.max_new_tokens);
        g.sampling.temperature = req.sampling.temperature;
        g.sampling.top_p = req.sampling.top_p;
        g.sampling.top_k = req.sampling.top_k;
        g.stop_token_ids = {s.stop_token};
        g.stop_check = stop_strings(s.tok, req.sampling.stop);
        // Rationale: a fixed per-request seed makes a run reproducible while every
        // episode and turn still draws differently.
        g.seed = req.sampling.seed * 0x9E3779B97F4A7C15ull + req.request_id;
        const auto id = ++s.seq;
        auto hdl = caf::actor_cast<caf::actor>(self);
        const auto request_id = req.request_id;
        auto submitted =
            s.engine->submit(std::move(g), [hdl, id, request_id](policy::generation_result r, std::string error) {
              completion c;
              c.request_id = request_id;
              if (!error.empty()) {
                c = error_completion(request_id, "libtorch engine: " + error);
              } else {
                c.tokens = std::move(r.tokens);
                c.logprobs = std::move(r.logprobs);
                c.finish_reason = finish_name(r.reason);
                c.policy_version = r.policy_version;
              }
              caf::anon_send(hdl, atoms::done::value, id, std::move(c));
            });
        if (!submitted) {
          rp.deliver(error_completion(req.request_id, "libtorch engine: " + submitted.error().message));
          return rp;
        }
        s.waiting.emplace(id, std::make_pair(rp, std::chrono::steady_clock::now()));
        return rp;
      },
      [=](atoms::done, uint64_t id, completion& c) {
        auto it = self->state.waiting.find(id);
        if (it == self->state.waiting.end()) return;
        c.latency_us =
            std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - it->second.second)
                .count();
        if (c.finish_reason != completion_finish::error && !c.tokens.empty())
          c.text = self->state.tok->decode(c.tokens);
        it->second.first.deliver(std::move(c));
        self->state.waiting.erase(it);
      },
      [=](weights_published& w) -> std::string {
        auto st2 = self->state.engine->load_weights(w.path, w.version);
        if (!st2) {
          log_error("policy", "weights version " + std::to_string(w.version) + " from " + w.path +
                                  " rejected: " + st2.error().message);
          return st2.error().message;
        }
        log_info("policy", "weights version " + std::to_string(w.version) + " staged from " + w.path);
        return {};
      },
      [=](atoms::stats) -> std::map<std::string, double> {
        auto x = self->state.engine->stats();
        return {{"submitted", double(x.submitted)},
                {"completed", double(x.completed)},
                {"failed", double(x.failed)},
                {"rejected", double(x.rejected)},
                {"steps", double(x.steps)},
                {"generated_tokens", double(x.generated_tokens)},
                {"batch_rows_total", double(x.batch_rows_total)},
                {"outstanding", double(x.outstanding)},
                {"policy_version", double(self->state.engine->policy_version())}};
      },
  };
}

}  // namespace

caf::actor spawn_engine_policy_server(caf::actor_system& sys, std::shared_ptr<policy::engine_service> engine,
                                      std::shared_ptr<const policy::tokenizer> tok, int32_t stop_token,
                                      std::shared_ptr<rollout::policy_backend> script) {
  return sys.spawn(engine_server_fn, std::move(engine), std::move(tok), stop_token, std::move(script));
}

}  // namespace caf_agent
