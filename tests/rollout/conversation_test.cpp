// tests/rollout/conversation_test.cpp: the episode transcript and the eval report.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "rollout/conversation.hpp"
#include "rollout/eval_report.hpp"
#include "rollout/policy_backend.hpp"

using namespace caf_agent;
using namespace caf_agent::rollout;

namespace {
conversation make() { return conversation{"skill", "task", {}, {131072, 64}}; }
}  // namespace

TEST(conversation, verify_and_profile_become_evaluations) {
  EXPECT_EQ(conversation::eval_command("verify"), "verify");
  EXPECT_EQ(conversation::eval_command("  ./profile ;"), "profile");
  EXPECT_FALSE(conversation::eval_command("verify && rm -rf /"));
  EXPECT_FALSE(conversation::eval_command("./compile"));
  auto c = make();
  auto actions = c.on_assistant(
      "<tool_call>\n{\"name\": \"Bash\", \"arguments\": {\"command\": \"./verify\"}}\n</tool_call>\n"
      "<tool_call>\n{\"name\": \"Read\", \"arguments\": {\"file_path\": \"model.py\"}}\n</tool_call>");
  ASSERT_EQ(actions.size(), 2u);
  EXPECT_EQ(actions[0].kind, action::eval);
  EXPECT_EQ(actions[0].name, "verify");
  EXPECT_EQ(actions[1].kind, action::tool);
  EXPECT_EQ(actions[1].name, "Read");
  EXPECT_NE(actions[0].call_id, actions[1].call_id);
}

TEST(conversation, malformed_call_is_counted_and_explained) {
  auto c = make();
  auto actions = c.on_assistant("<tool_call>\n{\"name\": \"Bash\", \"arguments\": {\"command\": }\n</tool_call>");
  ASSERT_EQ(actions.size(), 1u);
  EXPECT_EQ(actions[0].kind, action::invalid);
  EXPECT_FALSE(actions[0].error.empty());
  EXPECT_EQ(c.malformed_calls(), 1);
}

TEST(conversation, final_answer_has_no_actions) {
  auto c = make();
  EXPECT_TRUE(c.on_assistant("Done, the kernel is 2x faster.").empty());
  EXPECT_EQ(c.turns(), 1);
}

TEST(conversation, observations_are_truncated_with_a_marker) {
  auto c = make();
  c.on_assistant("<tool_call>\n{\"name\": \"Bash\", \"arguments\": {\"command\": \"yes\"}}\n</tool_call>");
  c.add_observation("t1c1", std::string(1000, 'y') + "TAIL");
  auto obs = c.observations();
  ASSERT_EQ(obs.size(), 1u);
  EXPECT_LT(obs[0].size(), 200u);
  EXPECT_NE(obs[0].find("output truncated"), std::string::npos);
  EXPECT_NE(obs[0].find("TAIL"), std::string::npos);  // the tail (errors) is kept
  EXPECT_NE(c.prompt_text().find("<|im_start|>assistant\n"), std::string::npos);
}

TEST(conversation, truncation_never_splits_utf8) {
  std::string text;
  for (int i = 0; i < 100; ++i) text += "\xe2\x9c\x93";  // 3-byte characters
  auto cut = conversation::truncate(text, 50);
  for (size_t i = 0; i + 1 < cut.size(); ++i)
    if ((static_cast<unsigned char>(cut[i]) & 0xC0) == 0xC0) EXPECT_EQ(static_cast<unsigned char>(cut[i + 1]) & 0xC0, 0x80);
}

TEST(conversation, context_limit_is_tracked) {
  conversation c{"s", "t", {}, {100, 1 << 20}};
  EXPECT_FALSE(c.context_exhausted());
  c.on_assistant(std::string(400, 'x'));
  EXPECT_TRUE(c.context_exhausted());
}

TEST(eval_report, rates_exclude_aborted_and_geomeans_use_correct) {
  std::vector<messages::trajectory_record> recs(4);
  recs[0].task_id = "a"; recs[0].reward = 3; recs[0].termination = "finished";
  recs[0].speedup_eager = 2; recs[0].speedup_compile = 1.5;
  recs[1].task_id = "a"; recs[1].reward = 1; recs[1].termination = "turn_limit";
  recs[1].speedup_eager = 0.5; recs[1].speedup_compile = 0.5;
  recs[2].task_id = "b"; recs[2].reward = -1; recs[2].termination = "finished";
  recs[3].task_id = "b"; recs[3].termination = "aborted";
  auto rep = make_eval_report(recs, {{"a", 1}, {"b", 2}});
  EXPECT_EQ(rep.overall.episodes, 4);
  EXPECT_EQ(rep.overall.aborted, 1);
  EXPECT_EQ(rep.overall.correct, 2);
  EXPECT_EQ(rep.overall.faster_compile, 1);
  EXPECT_NEAR(rep.by_level[1].geomean_speedup_eager, 1.0, 1e-9);  // sqrt(2 * 0.5)
  EXPECT_EQ(rep.by_level[2].correct, 0);
  EXPECT_NE(format_eval_report(rep).find("L2"), std::string::npos);
}

TEST(policy_backends, replay_file_errors_name_the_line) {
  auto path = std::filesystem::temp_directory_path() / "caf_agent_bad_replay.jsonl";
  std::ofstream{path} << "{\"task_id\": \"x\", \"turns\": [\"a\"]}\n{\"task_id\": 3}\n";
  std::string error;
  EXPECT_FALSE(make_replay_policy(path.string(), 0, error));
  EXPECT_NE(error.find(":2:"), std::string::npos);
  EXPECT_FALSE(make_replay_policy("/nonexistent.jsonl", 0, error));
  EXPECT_NE(error.find("/nonexistent.jsonl"), std::string::npos);
}

TEST(policy_backends, replay_falls_back_to_star_and_ends) {
  auto path = std::filesystem::temp_directory_path() / "caf_agent_replay.jsonl";
  std::ofstream{path} << "{\"task_id\": \"*\", \"turns\": [\"first\"]}\n";
  std::string error;
  auto p = make_replay_policy(path.string(), 0, error);
  ASSERT_TRUE(p) << error;
  messages::generate_request req;
  req.task_id = "anything";
  EXPECT_EQ(p->generate(req).completion.text, "first");
  req.turn = 5;
  EXPECT_NE(p->generate(req).completion.text.find("ends"), std::string::npos);
}

TEST(policy_backends, sim_policy_scripts_tool_calls_and_latency) {
  sim_policy_options o;
  o.malformed_rate = 0;
  o.finish_after = 20;
  auto p = make_sim_policy(o);
  messages::generate_request req;
  int evals = 0;
  for (int t = 0; t < 19; ++t) {
    req.turn = t;
    auto r = p->generate(req);
    EXPECT_GT(r.delay.count(), 0);
    auto c = make();
    auto acts = c.on_assistant(r.completion.text);
    ASSERT_EQ(acts.size(), 1u) << r.completion.text;
    evals += acts[0].kind == action::eval;
  }
  EXPECT_GE(evals, 1);
  req.turn = 19;
  EXPECT_TRUE(make().on_assistant(p->generate(req).completion.text).empty());
}
