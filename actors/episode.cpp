// actors/episode.cpp: see episode.hpp.
#include "actors/episode.hpp"

#include <algorithm>
#include <chrono>
#include <deque>

#include <caf/all.hpp>
#include <nlohmann/json.hpp>

#include "actors/observed_actor.hpp"
#include "base/log.hpp"
#include "gpu_pool/slot_backend.hpp"
#include "messages/type_ids.hpp"
#include "rollout/conversation.hpp"
#include "rollout/tasks.hpp"

namespace caf_agent {

namespace {

using namespace messages;
using steady = std::chrono::steady_clock;
using ms = std::chrono::milliseconds;

struct episode_state {
  start_episode start;
  episode_env env;
  std::unique_ptr<rollout::conversation> conv;
  std::deque<rollout::action> actions;  // of the current turn
  trajectory_record rec;
  steady::time_point t0;
  /// When the wall limit's time began, on the actor clock (a test coordinator's clock is
  /// simulated, so tests drive the wall limit without sleeping).
  caf::actor_clock::time_point wall_t0;
  uint64_t evals = 0;
  bool workspace_open = false;
  double policy_ms = 0, tools_ms = 0, eval_ms = 0;
  /// Per-turn orchestration overhead: turn wall time minus time spent waiting
  /// on the policy, tools and evaluations (microseconds).
  std::vector<uint32_t> overhead_us;
  steady::time_point turn_start;
  double turn_wait_ms = 0;
  /// The continuation of the evaluation in flight (if any) and its sequence
  /// number: a lost GPU pool fails it early, and its late answer is ignored.
  std::function<void(eval_result&)> pending_eval;
  uint64_t eval_seq = 0;
  static inline const char* name = "episode";
};

/// The episode itself: its state behind its typed protocol.
using episode_self = observed_actor<episode_state, episode_actor::base>;

double since_ms(steady::time_point t) {
  return std::chrono::duration<double, std::milli>(steady::now() - t).count();
}

/// Posts the episode's progress to the node's registry (the inspector's episodes view).
void progress(episode_self* self, const std::function<void(episode_progress&)>& f) {
  observe::metrics_registry::process().episode_update(self->state.start.episode_id, f);
}

/// A tool call or evaluation starts: its phase, and whether it repeats the last call.
void progress_call(episode_self* self, const rollout::action& a, const std::string& phase) {
  // Rationale: 200 characters tell two calls apart for a human and bound the heartbeat.
  auto call = (a.name + " " + a.arguments_json).substr(0, 200);
  progress(self, [&](episode_progress& e) {
    e.phase = phase;
    ++e.tool_calls;
    e.repeats = e.last_call == call ? e.repeats + 1 : 1;
    e.last_call = call;
  });
}

/// A completion, tool result or verdict arrived.
void progress_made(episode_self* self, double waited_ms, bool tool) {
  progress(self, [&](episode_progress& e) {
    e.last_progress_ms = unix_ms();
    if (tool) e.tool_ms += waited_ms;
  });
}

void next_turn(episode_self* self);
void next_action(episode_self* self);
void final_eval(episode_self* self, episode_end termination);

void send_record(episode_self* self) {
  auto& st = self->state;
  auto& r = st.rec;
  r.turns = st.conv ? st.conv->turns() : 0;
  if (st.conv && st.conv->token_mode()) {
    st.conv->close_tokens();
    r.tokens = st.conv->tokens();
    r.loss_mask = st.conv->loss_mask();
    r.logprobs = st.conv->token_logprobs();
    r.turn_starts = st.conv->assistant_turn_starts();
  }
  if (st.conv) {
    r.turn_texts = st.conv->assistant_texts();
    r.observations = st.conv->observations();
    r.malformed_tool_calls = st.conv->malformed_calls();
  }
  r.timings_ms = {{"policy", st.policy_ms}, {"tools", st.tools_ms}, {"eval", st.eval_ms}, {"total", since_ms(st.t0)}};
  r.ended_at_ms = unix_ms();
  r.turn_overhead_us = std::move(st.overhead_us);
  observe::metrics_registry::process().episode_done(st.start.episode_id);
  self->send(st.env.sink, std::move(r));
  self->quit();
}

void close_and_record(episode_self* self) {
  auto& st = self->state;
  if (!st.workspace_open) return send_record(self);
  self->request(st.env.tools, ms(60000), atoms::close::value, st.start.episode_id)
      .then([=](bool) { send_record(self); }, [=](caf::error&) { send_record(self); });
}

void abort_episode(episode_self* self, const std::string& reason) {
  self->state.rec.termination = episode_end::aborted;
  self->state.rec.abort_reason = reason;
  close_and_record(self);
}

void end_turn(episode_self* self) {
  auto& st = self->state;
  double overhead_ms = since_ms(st.turn_start) - st.turn_wait_ms;
  st.overhead_us.push_back(static_cast<uint32_t>(std::max(0.0, overhead_ms) * 1000));
  observe::metrics_registry::process().turn_finished(static_cast<int64_t>(since_ms(st.turn_start) * 1000));
  next_turn(self);
}

/// Adds an observation and goes on: a tool's output as it is (the sandbox cut it, at most at the
/// observation limit: rollout_config::tool_sandbox), the episode's own texts cut to that limit.
void observe(episode_self* self, const std::string& call_id, const std::string& text, bool tool_output = false) {
  if (tool_output)
    self->state.conv->add_tool_output(call_id, text);
  else
    self->state.conv->add_observation(call_id, text);
  next_action(self);
}

/// Asks the tool router for the workspace's submission, then the pool for a verdict.
void evaluate(episode_self* self, eval_mode mode, std::function<void(eval_result&)> callback) {
  auto& st = self->state;
  auto started = steady::now();
  auto seq = ++st.eval_seq;
  st.pending_eval = std::move(callback);
  auto failed = [mode](gpu_pool::outcome what, std::string detail) {
    return gpu_pool::result_of(gpu_pool::judge({what, mode, {}, std::move(detail)}), 0);
  };
  auto on_result = [=](eval_result& r) {
    auto& s = self->state;
    if (s.eval_seq != seq || !s.pending_eval) return;  // already failed by a pool loss
    progress_made(self, since_ms(started), false);
    auto cb = std::move(s.pending_eval);
    s.pending_eval = nullptr;
    cb(r);
  };
  self->request(st.env.tools, ms(60000), atoms::lookup::value, st.start.episode_id)
      .then(
          [=](std::string& error, std::map<std::string, std::string>& files) {
            auto& s = self->state;
            if (!error.empty()) {
              auto r = failed(gpu_pool::outcome::submission_unreadable, error);
              return on_result(r);
            }
            eval_request req;
            req.job_id = s.start.episode_id * 1000 + (++s.evals);
            req.episode_id = s.start.episode_id;
            req.mode = mode;
            req.task = s.start.task;
            req.files = std::move(files);
            req.seed = s.start.seed;
            self->request(s.env.pool, ms(s.env.eval_timeout_ms), std::move(req))
                .then(
                    [=](eval_result& r) {
                      double waited = since_ms(started);
                      self->state.eval_ms += waited;
                      self->state.turn_wait_ms += waited;
                      on_result(r);
                    },
                    [=](caf::error& err) {
                      auto r =
                          failed(gpu_pool::outcome::unreachable, "GPU pool unavailable: " + self->system().render(err));
                      on_result(r);
                    });
          },
          [=](caf::error& err) {
            auto r = failed(gpu_pool::outcome::unreachable, "tool executor unavailable: " + self->system().render(err));
            on_result(r);
          });
}

std::string verdict_text(eval_mode mode, const eval_result& r) {
  if (r.status != eval_status::ok)
    return to_string(mode) + ": not evaluated (infrastructure problem, not your fault): " + r.reason;
  std::string out = to_string(mode) + ": " + (r.correct ? "PASS" : "FAIL") + (r.reason.empty() ? "" : " - " + r.reason);
  if (mode == eval_mode::profile && r.correct && r.candidate_ms > 0)
    out += "\nyour kernel: " + std::to_string(r.candidate_ms) + " ms, eager: " + std::to_string(r.eager_ms) +
           " ms, torch.compile: " + std::to_string(r.compile_ms) + " ms";
  return out;
}

void run_tool(episode_self* self, rollout::action a) {
  auto& st = self->state;
  auto started = steady::now();
  tool_request req{st.start.episode_id, a.call_id, a.name, a.arguments_json};
  progress_call(self, a, "tool:" + a.name);
  self->request(st.env.tools, ms(15 * 60 * 1000), std::move(req))
      .then(
          [=](tool_response& r) {
            auto& s = self->state;
            double waited = since_ms(started);
            s.tools_ms += waited;
            s.turn_wait_ms += waited;
            progress_made(self, waited, true);
            auto& t = s.rec.tools[a.name];
            ++t.calls;
            t.total_ms += r.elapsed_ms;
            t.errors += r.status == tool_status::error || r.status == tool_status::internal;
            t.timeouts += r.status == tool_status::timeout;
            observe(self, a.call_id, r.output, true);
          },
          [=](caf::error& err) { abort_episode(self, "tool executor failed: " + self->system().render(err)); });
}

void next_action(episode_self* self) {
  auto& st = self->state;
  if (st.actions.empty()) return end_turn(self);
  auto a = std::move(st.actions.front());
  st.actions.pop_front();
  if (a.kind == rollout::action::invalid) return observe(self, a.call_id, a.error);
  if (a.kind == rollout::action::tool) return run_tool(self, std::move(a));
  ++st.rec.tools[a.name].calls;
  progress_call(self, a, "eval:" + a.name);
  // rollout::conversation makes eval actions of the verify and profile commands only.
  const auto mode = parse_name<eval_mode>(a.name).value_or(eval_mode::verify);
  evaluate(self, mode, [=](eval_result& r) { observe(self, a.call_id, verdict_text(mode, r)); });
}

void on_completion(episode_self* self, completion& c) {
  auto& st = self->state;
  if (c.finish_reason == completion_finish::error) return abort_episode(self, "policy backend failed: " + c.error);
  st.rec.policy_versions.push_back(c.policy_version);
  progress(self, [&](episode_progress& e) {
    e.last_progress_ms = unix_ms();
    e.policy_version = c.policy_version;
  });
  std::vector<rollout::action> actions;
  if (st.conv->token_mode()) {
    if (c.tokens.empty()) return abort_episode(self, "policy backend returned no tokens");
    actions = st.conv->on_sampled(c.tokens, c.logprobs);
    if (!st.conv->token_error().empty()) return abort_episode(self, "tokens: " + st.conv->token_error());
  } else {
    // Text backends: the record keeps whatever tokens the backend reported, sampled only.
    st.rec.turn_starts.push_back(static_cast<uint32_t>(st.rec.tokens.size()));
    st.rec.tokens.insert(st.rec.tokens.end(), c.tokens.begin(), c.tokens.end());
    st.rec.logprobs.insert(st.rec.logprobs.end(), c.logprobs.begin(), c.logprobs.end());
    st.rec.loss_mask.insert(st.rec.loss_mask.end(), c.tokens.size(), 1);
    actions = st.conv->on_assistant(c.text);
  }
  if (actions.empty()) return final_eval(self, episode_end::finished);
  st.actions.assign(std::make_move_iterator(actions.begin()), std::make_move_iterator(actions.end()));
  next_action(self);
}

void next_turn(episode_self* self) {
  auto& st = self->state;
  if (st.conv->turns() >= st.start.max_turns) return final_eval(self, episode_end::turn_limit);
  if (st.conv->context_exhausted()) return final_eval(self, episode_end::context_limit);
  if (st.start.wall_limit_ms > 0 && self->clock().now() - st.wall_t0 > ms(st.start.wall_limit_ms))
    return final_eval(self, episode_end::wall_limit);
  st.turn_start = steady::now();
  st.turn_wait_ms = 0;
  progress(self, [&](episode_progress& e) {
    e.phase = "generating";
    e.turn = st.conv->turns();
    e.tokens = st.conv->context_tokens();
    e.turn_started_ms = unix_ms();
  });
  generate_request req;
  req.episode_id = st.start.episode_id;
  req.request_id = st.start.episode_id * 1000 + st.conv->turns();
  req.task_id = st.start.task.task_id;
  req.turn = st.conv->turns();
  if (st.env.render_prompt) req.prompt_text = st.conv->prompt_text();
  if (st.env.render_messages) req.messages_json = st.conv->messages_json();
  req.sampling = st.env.sampling;
  if (st.conv->token_mode()) {
    req.prompt_tokens = st.conv->prompt_tokens();
    if (!st.conv->token_error().empty()) return abort_episode(self, "tokens: " + st.conv->token_error());
    const auto room = st.env.context_limit_tokens - static_cast<int64_t>(req.prompt_tokens.size());
    if (room <= 0) return final_eval(self, episode_end::context_limit);
    req.sampling.max_new_tokens = static_cast<int32_t>(std::min<int64_t>(req.sampling.max_new_tokens, room));
  }
  auto started = steady::now();
  self->request(st.env.policy, ms(st.env.policy_timeout_ms), std::move(req))
      .then(
          [=](completion& c) {
            double waited = since_ms(started);
            self->state.policy_ms += waited;
            self->state.turn_wait_ms += waited;
            on_completion(self, c);
          },
          [=](caf::error& err) { abort_episode(self, "policy backend failed: " + self->system().render(err)); });
}

void final_eval(episode_self* self, episode_end termination) {
  auto& st = self->state;
  st.rec.termination = termination;
  progress(self, [&](episode_progress& e) {
    e.phase = "eval:final";
    e.turn_started_ms = 0;  // no turn runs now
  });
  evaluate(self, eval_mode::final, [=](eval_result& r) {
    auto& rec = self->state.rec;
    if (r.status != eval_status::ok) {
      rec.termination = episode_end::aborted;
      rec.abort_reason = "final evaluation: " + r.reason;
    } else {
      rec.reward = r.reward;
      rec.correct = r.correct;
      rec.verdict = r.reason;
      if (r.candidate_ms > 0) {
        rec.speedup_eager = r.eager_ms / r.candidate_ms;
        rec.speedup_compile = r.compile_ms / r.candidate_ms;
      }
    }
    close_and_record(self);
  });
}

episode_actor::behavior_type episode(episode_self* self, start_episode start, episode_env env) {
  auto& st = self->state;
  st.t0 = steady::now();
  st.wall_t0 = self->clock().now();
  st.rec.episode_id = start.episode_id;
  st.rec.attempt = start.attempt;
  st.rec.task_id = start.task.task_id;
  st.rec.mode = start.mode;
  st.rec.node_id = env.node_id;
  st.rec.started_at_ms = unix_ms();
  rollout::conversation_limits limits{env.context_limit_tokens, env.observation_limit_bytes};
  st.conv = std::make_unique<rollout::conversation>(env.system_text, rollout::task_prompt(start.task), env.tool_schemas,
                                                    limits, env.tokenizer.get(), env.chat_format);
  st.start = std::move(start);
  st.env = std::move(env);
  progress(self, [&](episode_progress& e) {
    e.task_id = st.start.task.task_id;
    e.node_id = st.env.node_id;
    e.max_turns = st.start.max_turns;
    e.phase = "opening";
    e.started_at_ms = e.last_progress_ms = unix_ms();
  });
  self->request(st.env.tools, ms(120000), atoms::open::value, st.start.episode_id, st.start.task)
      .then(
          [=](std::string& error) {
            if (!error.empty()) return abort_episode(self, "workspace: " + error);
            self->state.workspace_open = true;
            if (!self->state.conv->token_error().empty())
              return abort_episode(self, "tokens: " + self->state.conv->token_error());
            next_turn(self);
          },
          [=](caf::error& err) { abort_episode(self, "tool executor failed: " + self->system().render(err)); });
  return {
      // The inspector's `episode ID`: the transcript so far as JSON.
      [=](atoms::transcript) -> std::string {
        auto& s = self->state;
        nlohmann::json j{{"episode_id", s.start.episode_id},
                         {"task_id", s.start.task.task_id},
                         {"node_id", s.env.node_id},
                         {"turns", s.conv->turns()},
                         {"assistant", s.conv->assistant_texts()},
                         {"observations", s.conv->observations()}};
        return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);  // agent text may be invalid UTF-8
      },
      [=](atoms::drain) {  // the GPU pool's node was lost
        auto& s = self->state;
        if (!s.pending_eval) return;
        auto cb = std::move(s.pending_eval);
        s.pending_eval = nullptr;
        ++s.eval_seq;
        auto r = gpu_pool::result_of(gpu_pool::judge({gpu_pool::outcome::unreachable,
                                                      eval_mode::verify,
                                                      {},
                                                      "the GPU pool's node was lost during the evaluation"}),
                                     0);
        cb(r);
      },
  };
}

}  // namespace

episode_actor spawn_episode(caf::actor_system& sys, start_episode start, episode_env env) {
  return sys.spawn(episode, std::move(start), std::move(env));
}

}  // namespace caf_agent
