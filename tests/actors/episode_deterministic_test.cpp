// tests/actors/episode_deterministic_test.cpp: the episode actor on CAF's test coordinator
// against scripted policy, tool router, GPU pool and sink actors written here: the exact
// message sequence of a normal episode, and every failure path ending in one record.
#include <gtest/gtest.h>

#include <memory>

#include <caf/all.hpp>

#include "actors/episode.hpp"
#include "messages/type_ids.hpp"
#include "rollout/conversation.hpp"
#include "rollout/tasks.hpp"
#include "tests/actors/deterministic.hpp"

using namespace caf_agent;
using namespace caf_agent::messages;
using caf_agent::testing::name_of_field;
using namespace std::chrono_literals;

namespace {

using files_map = std::map<std::string, std::string>;

std::string tool_call(const std::string& name, const std::string& args_json) {
  return "<tool_call>\n{\"name\": \"" + name + "\", \"arguments\": " + args_json + "}\n</tool_call>";
}

const std::string read_call = tool_call("Read", R"({"file_path": "model.py"})");
const std::string verify_call = tool_call("Bash", R"({"command": "verify"})");

/// The policy's script: one completion per request, in order; past its end it holds the
/// request unanswered (the episode's timeout decides).
struct policy_script {
  std::vector<completion> replies;
  bool fail_request = false;  // answer every request with an error instead
  std::vector<generate_request> seen;
  std::vector<caf::typed_response_promise<completion>> held;  // kept: never answered, never broken
  size_t next = 0;
};

completion says(std::string text) {
  completion c;
  c.text = std::move(text);
  return c;
}

caf::behavior scripted_policy(caf::event_based_actor* self, std::shared_ptr<policy_script> s) {
  return {
      [=](generate_request& r) -> caf::result<completion> {
        s->seen.push_back(r);
        if (s->fail_request) return caf::make_error(caf::sec::runtime_error, "backend exploded");
        if (s->next >= s->replies.size()) return s->held.emplace_back(self->make_response_promise<completion>());
        auto c = s->replies[s->next++];
        c.request_id = r.request_id;
        return c;
      },
  };
}

struct tools_script {
  std::string open_error;
  files_map files{{"model_new.py", "# the submission"}};
  std::vector<tool_request> calls;
  int opened = 0, lookups = 0, closed = 0;
};

caf::behavior scripted_tools(caf::event_based_actor*, std::shared_ptr<tools_script> s) {
  return {
      [=](atoms::open, uint64_t, task_spec&) -> std::string {
        ++s->opened;
        return s->open_error;
      },
      [=](atoms::lookup, uint64_t) -> caf::message {
        ++s->lookups;
        return caf::make_message(std::string{}, s->files);
      },
      [=](tool_request& r) -> tool_response {
        s->calls.push_back(r);
        return {r.call_id, "output of " + r.name, tool_status::ok, 0, 1.0};
      },
      [=](atoms::close, uint64_t) -> bool {
        ++s->closed;
        return true;
      },
  };
}

struct pool_script {
  bool hold = false;  // never answer (the episode's eval timeout decides)
  std::vector<eval_request> seen;
  std::vector<caf::typed_response_promise<eval_result>> held;
};

caf::behavior scripted_pool(caf::event_based_actor* self, std::shared_ptr<pool_script> s) {
  return {
      [=](eval_request& r) -> caf::result<eval_result> {
        s->seen.push_back(r);
        if (s->hold) return s->held.emplace_back(self->make_response_promise<eval_result>());
        eval_result out;
        out.job_id = r.job_id;
        out.correct = true;
        out.reason = "all checks passed";
        out.reward = r.mode == eval_mode::final ? 2 : 0;
        return out;
      },
  };
}

caf::behavior record_sink(caf::event_based_actor*, std::shared_ptr<std::vector<trajectory_record>> out) {
  return {[=](trajectory_record& r) { out->push_back(std::move(r)); }};
}

struct episode_test : caf_agent::testing::deterministic {
  std::shared_ptr<policy_script> ps = std::make_shared<policy_script>();
  std::shared_ptr<tools_script> ts = std::make_shared<tools_script>();
  std::shared_ptr<pool_script> gs = std::make_shared<pool_script>();
  std::shared_ptr<std::vector<trajectory_record>> records = std::make_shared<std::vector<trajectory_record>>();
  caf::actor policy = sys().spawn(scripted_policy, ps);
  caf::actor tools = sys().spawn(scripted_tools, ts);
  caf::actor pool = sys().spawn(scripted_pool, gs);
  caf::actor sink = sys().spawn(record_sink, records);
  start_episode start;
  episode_env env;

  episode_test() {
    run();  // the fakes' initialisation
    start.episode_id = 7;
    start.task = task_spec{"level1/t", "t", 1, "class Model: pass\n"};
    start.max_turns = 10;
    env.policy = caf::actor_cast<policy_generator>(policy);
    env.tools = caf::actor_cast<tool_router_actor>(tools);
    env.pool = caf::actor_cast<evaluator_actor>(pool);
    env.sink = caf::actor_cast<record_sink_actor>(sink);
    env.node_id = "node";
    env.system_text = "SKILL";
    env.render_prompt = true;  // the prompt text shows what the episode observed
  }

  /// Spawns the episode and runs its initialisation (it sends its first message).
  caf::actor spawn_episode_now() {
    // The test's helpers take untyped handles; the typed one's protocol is the episode's.
    auto ep = caf::actor_cast<caf::actor>(spawn_episode(sys(), start, env));
    sched().prioritize(ep);
    sched().run_once();
    return ep;
  }

  /// Runs to the end: every leftover timer fires too. Exactly one record.
  const trajectory_record& the_record() {
    run();
    fire_timers();
    EXPECT_EQ(records->size(), 1u) << "every episode ends in exactly one record";
    static const trajectory_record none;
    return records->empty() ? none : records->front();
  }
};

TEST_F(episode_test, a_normal_episode_is_this_exact_message_sequence) {
  ps->replies = {says("I read first.\n" + read_call), says(verify_call), says("Done: the kernel is in place.")};
  auto ep = spawn_episode_now();
  self->monitor(ep);

  auto [open, open_id, open_task] = expect<caf::atom_value, uint64_t, task_spec>(tools, ep);
  EXPECT_EQ(open, atoms::open::value);
  EXPECT_EQ(open_id, 7u);
  EXPECT_EQ(open_task.task_id, "level1/t");
  EXPECT_EQ(expect_one<std::string>(ep, tools), "");
  // Turn 0: a Read call runs in the sandbox.
  auto g0 = expect_one<generate_request>(policy, ep);
  EXPECT_EQ(g0.turn, 0);
  EXPECT_EQ(g0.episode_id, 7u);
  expect<completion>(ep, policy);
  auto call = expect_one<tool_request>(tools, ep);
  EXPECT_EQ(call.name, "Read");
  EXPECT_EQ(call.episode_id, 7u);
  EXPECT_EQ(expect_one<tool_response>(ep, tools).output, "output of Read");
  // Turn 1: `verify` is not run in the sandbox: files from the router, a verdict from the pool.
  auto g1 = expect_one<generate_request>(policy, ep);
  EXPECT_EQ(g1.turn, 1);
  EXPECT_NE(g1.prompt_text.find("output of Read"), std::string::npos);
  expect<completion>(ep, policy);
  EXPECT_EQ(std::get<0>(expect<caf::atom_value, uint64_t>(tools, ep)), atoms::lookup::value);
  expect<std::string, files_map>(ep, tools);
  auto verify = expect_one<eval_request>(pool, ep);
  EXPECT_EQ(verify.mode, eval_mode::verify);
  EXPECT_EQ(verify.files, ts->files);
  expect<eval_result>(ep, pool);
  // Turn 2: the final answer; the final evaluation gives the reward.
  auto g2 = expect_one<generate_request>(policy, ep);
  EXPECT_EQ(g2.turn, 2);
  EXPECT_NE(g2.prompt_text.find("verify: PASS"), std::string::npos);
  expect<completion>(ep, policy);
  EXPECT_EQ(std::get<0>(expect<caf::atom_value, uint64_t>(tools, ep)), atoms::lookup::value);
  expect<std::string, files_map>(ep, tools);
  EXPECT_EQ(expect_one<eval_request>(pool, ep).mode, eval_mode::final);
  expect<eval_result>(ep, pool);
  // The sandbox closes, then the record goes out as the episode's last act.
  EXPECT_EQ(std::get<0>(expect<caf::atom_value, uint64_t>(tools, ep)), atoms::close::value);
  expect<bool>(ep, tools);
  auto rec = expect_one<trajectory_record>(sink, ep);
  EXPECT_TRUE(idle()) << "nothing after the record, next: " << next_message(ep);
  EXPECT_TRUE(self_receive<caf::down_msg>().has_value()) << "the episode exits after its record";

  EXPECT_EQ(name_of_field(rec.termination), "finished");
  EXPECT_EQ(rec.episode_id, 7u);
  EXPECT_EQ(rec.reward, 2);
  EXPECT_TRUE(rec.correct);
  EXPECT_EQ(rec.turns, 3);
  EXPECT_EQ(rec.tools["Read"].calls, 1);
  EXPECT_EQ(rec.tools["verify"].calls, 1);
  EXPECT_EQ(rec.observations.size(), 2u);
  EXPECT_EQ(ts->closed, 1);
  EXPECT_EQ(the_record().episode_id, 7u);
}

TEST_F(episode_test, a_policy_error_completion_aborts_with_the_reason) {
  completion bad;
  bad.finish_reason = completion_finish::error;
  bad.error = "CUDA out of memory";
  ps->replies = {bad};
  spawn_episode_now();
  auto& rec = the_record();
  EXPECT_EQ(name_of_field(rec.termination), "aborted");
  EXPECT_NE(rec.abort_reason.find("policy backend failed: CUDA out of memory"), std::string::npos) << rec.abort_reason;
  EXPECT_EQ(ts->closed, 1) << "the sandbox is closed on the way out";
  EXPECT_TRUE(gs->seen.empty()) << "an aborted episode gets no final evaluation";
}

TEST_F(episode_test, a_failed_policy_request_aborts) {
  ps->fail_request = true;
  spawn_episode_now();
  auto& rec = the_record();
  EXPECT_EQ(name_of_field(rec.termination), "aborted");
  EXPECT_NE(rec.abort_reason.find("policy backend failed"), std::string::npos) << rec.abort_reason;
  EXPECT_NE(rec.abort_reason.find("backend exploded"), std::string::npos) << rec.abort_reason;
}

TEST_F(episode_test, a_policy_that_never_answers_times_out_on_the_clock) {
  env.policy_timeout_ms = 5000;
  spawn_episode_now();
  run();
  ASSERT_EQ(ps->seen.size(), 1u);
  EXPECT_TRUE(records->empty()) << "no record while the request may still be answered";
  advance(4999ms);
  EXPECT_TRUE(records->empty()) << "the timeout has not passed yet";
  advance(2ms);
  ASSERT_EQ(records->size(), 1u);
  EXPECT_EQ(name_of_field(records->front().termination), "aborted");
  EXPECT_NE(records->front().abort_reason.find("policy backend failed"), std::string::npos);
  the_record();
}

TEST_F(episode_test, a_tool_executor_gone_mid_episode_aborts_once) {
  ps->replies = {says(read_call)};
  auto ep = spawn_episode_now();
  expect<caf::atom_value, uint64_t, task_spec>(tools, ep);
  expect<std::string>(ep, tools);
  expect<generate_request>(policy, ep);
  stop(tools, caf::exit_reason::kill);  // the router's node went down
  auto& rec = the_record();
  EXPECT_EQ(name_of_field(rec.termination), "aborted");
  EXPECT_NE(rec.abort_reason.find("tool executor failed"), std::string::npos) << rec.abort_reason;
  EXPECT_TRUE(ts->calls.empty());
}

TEST_F(episode_test, a_tool_executor_gone_before_the_workspace_opens_aborts) {
  stop(tools, caf::exit_reason::kill);
  spawn_episode_now();
  auto& rec = the_record();
  EXPECT_EQ(name_of_field(rec.termination), "aborted");
  EXPECT_NE(rec.abort_reason.find("tool executor failed"), std::string::npos) << rec.abort_reason;
  EXPECT_TRUE(ps->seen.empty());
}

TEST_F(episode_test, a_workspace_that_does_not_open_aborts_without_a_close) {
  ts->open_error = "disk full";
  spawn_episode_now();
  auto& rec = the_record();
  EXPECT_EQ(name_of_field(rec.termination), "aborted");
  EXPECT_EQ(rec.abort_reason, "workspace: disk full");
  EXPECT_EQ(ts->closed, 0);
}

TEST_F(episode_test, an_unreachable_pool_is_an_observation_then_an_aborted_final) {
  ps->replies = {says(verify_call), says("Done.")};
  stop(pool, caf::exit_reason::kill);
  spawn_episode_now();
  auto& rec = the_record();
  ASSERT_EQ(ps->seen.size(), 2u);
  EXPECT_NE(ps->seen[1].prompt_text.find("not evaluated (infrastructure problem, not your fault)"), std::string::npos)
      << "the agent is told the verify did not run, and why";
  EXPECT_EQ(name_of_field(rec.termination), "aborted");
  EXPECT_NE(rec.abort_reason.find("final evaluation: GPU pool unavailable"), std::string::npos) << rec.abort_reason;
  EXPECT_EQ(rec.reward, 0) << "an infrastructure failure is never scored";
  EXPECT_EQ(ts->closed, 1);
}

TEST_F(episode_test, a_pool_that_never_answers_times_out_then_aborts) {
  ps->replies = {says("Done.")};
  gs->hold = true;
  env.eval_timeout_ms = 30000;
  spawn_episode_now();
  run();
  ASSERT_EQ(gs->seen.size(), 1u);
  EXPECT_EQ(gs->seen[0].mode, eval_mode::final);
  EXPECT_TRUE(records->empty());
  advance(30001ms);
  auto& rec = the_record();
  EXPECT_EQ(name_of_field(rec.termination), "aborted");
  EXPECT_NE(rec.abort_reason.find("GPU pool unavailable"), std::string::npos) << rec.abort_reason;
}

TEST_F(episode_test, a_lost_pool_node_fails_the_evaluation_in_flight) {
  ps->replies = {says(verify_call), says("Done.")};
  gs->hold = true;
  auto ep = spawn_episode_now();
  run();
  ASSERT_EQ(gs->seen.size(), 1u);
  gs->hold = false;                         // the final evaluation is answered
  caf::anon_send(ep, atoms::drain::value);  // what the rollout manager sends on node_lost
  run();
  ASSERT_EQ(ps->seen.size(), 2u) << "the episode goes on without waiting for the timeout";
  EXPECT_NE(ps->seen[1].prompt_text.find("the GPU pool's node was lost"), std::string::npos);
  auto& rec = the_record();  // the failed evaluation's late timeout changes nothing
  EXPECT_EQ(name_of_field(rec.termination), "finished");
  EXPECT_EQ(rec.reward, 2);
  EXPECT_EQ(gs->seen.size(), 2u);
}

TEST_F(episode_test, the_turn_limit_ends_with_a_final_evaluation) {
  start.max_turns = 2;
  ps->replies = {says(read_call), says(read_call), says(read_call)};
  spawn_episode_now();
  auto& rec = the_record();
  EXPECT_EQ(ps->seen.size(), 2u) << "no third turn";
  EXPECT_EQ(name_of_field(rec.termination), "turn_limit");
  EXPECT_EQ(rec.turns, 2);
  ASSERT_EQ(gs->seen.size(), 1u);
  EXPECT_EQ(gs->seen[0].mode, eval_mode::final);
  EXPECT_EQ(rec.reward, 2) << "a limit still gets its reward";
}

TEST_F(episode_test, the_context_limit_ends_with_a_final_evaluation) {
  rollout::conversation probe(env.system_text, rollout::task_prompt(start.task), env.tool_schemas, {});
  env.context_limit_tokens = probe.context_tokens() + 50;
  ps->replies = {says(std::string(400, 'x') + "\n" + read_call), says(read_call)};
  spawn_episode_now();
  auto& rec = the_record();
  EXPECT_EQ(ps->seen.size(), 1u) << "the second turn would not fit";
  EXPECT_EQ(name_of_field(rec.termination), "context_limit");
  ASSERT_EQ(gs->seen.size(), 1u);
  EXPECT_EQ(gs->seen[0].mode, eval_mode::final);
}

TEST_F(episode_test, the_wall_limit_runs_on_the_clock) {
  start.wall_limit_ms = 1000;
  ps->replies = {says(read_call), says(read_call), says(read_call)};
  auto ep = spawn_episode_now();
  expect<caf::atom_value, uint64_t, task_spec>(tools, ep);
  expect<std::string>(ep, tools);
  expect<generate_request>(policy, ep);
  expect<completion>(ep, policy);
  expect<tool_request>(tools, ep);
  sched().advance_time(600ms);  // the tool "runs" 600 ms (its answer not yet delivered)
  expect<tool_response>(ep, tools);
  EXPECT_TRUE(next_is<generate_request>(policy)) << "within the limit: another turn";
  expect<generate_request>(policy, ep);
  expect<completion>(ep, policy);
  expect<tool_request>(tools, ep);
  sched().advance_time(600ms);  // 1.2 s in
  expect<tool_response>(ep, tools);
  auto& rec = the_record();
  EXPECT_EQ(ps->seen.size(), 2u) << "past the limit: no third turn";
  EXPECT_EQ(name_of_field(rec.termination), "wall_limit");
  EXPECT_EQ(rec.turns, 2);
  EXPECT_EQ(rec.reward, 2);
}

}  // namespace
