// tests/rollout/conversation_test.cpp: the episode transcript and the eval report.
#include <gtest/gtest.h>

#include <sys/stat.h>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>

#include <nlohmann/json.hpp>

#include "rollout/config.hpp"
#include "rollout/conversation.hpp"
#include "rollout/eval_report.hpp"
#include "rollout/policy_backend.hpp"
#include "sandbox/config.hpp"
#include "sandbox/episode_sandbox.hpp"
#include "sandbox/output_format.hpp"

using namespace caf_agent;
using namespace caf_agent::rollout;

namespace {
conversation make() {
  return conversation{"skill", "task", {}, {131072, 64}};
}
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

namespace {
size_t occurrences(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (auto at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}
}  // namespace

// Tool output is cut once, by the sandbox, at the smaller of [sandbox] max_output_bytes and
// [rollout] observation_limit_bytes (the settings the tool executors get), and reaches the
// transcript as it is: one marker, the smaller limit's bytes, the bytes the tool really dropped.
TEST(conversation, tool_output_is_cut_once_at_the_smaller_limit) {
  namespace fs = std::filesystem;
  rollout_config r;
  r.observation_limit_bytes = 2048;
  sandbox::sandbox_settings settings;  // max_output_bytes 30000: the larger limit
  ASSERT_GT(settings.max_output_bytes, r.observation_limit_bytes);
  std::string tmpl = (fs::temp_directory_path() / "caf_conv_cut_XXXXXX").string();
  ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
  ::chmod(tmpl.c_str(), 0711);  // the sandbox's per-episode uid traverses it
  const fs::path root = tmpl;
  sandbox::sandbox_config cfg;
  r.tool_sandbox(settings).apply_to(cfg);
  cfg.workspace = root;
  auto created = sandbox::episode_sandbox::create(cfg);
  ASSERT_TRUE(created.sandbox) << created.error;
  // 100,000 bytes of 'Q' (a letter no marker or status line holds) in one line.
  auto out = created.sandbox->execute({"c1", "Bash", {{"command", "head -c 100000 /dev/zero | tr '\\0' Q"}}});
  created.sandbox.reset();
  std::error_code ec;
  fs::remove_all(root, ec);
  ASSERT_EQ(out.status, messages::tool_status::ok) << out.output;

  conversation c{"s", "t", {}, {131072, r.observation_limit_bytes}};
  c.on_assistant("<tool_call>\n{\"name\": \"Bash\", \"arguments\": {\"command\": \"q\"}}\n</tool_call>");
  c.add_tool_output("t1c1", out.output);
  const auto obs = c.observations().at(0);
  EXPECT_EQ(occurrences(obs, "output truncated"), 1U) << obs;
  EXPECT_EQ(occurrences(obs, "Q"), 2048U);
  EXPECT_NE(obs.find("output truncated: 97952 bytes omitted"), std::string::npos) << obs;
}

TEST(conversation, truncation_never_splits_utf8) {
  std::string text;
  for (int i = 0; i < 100; ++i) text += "\xe2\x9c\x93";      // 3-byte characters
  auto cut = caf_agent::sandbox::truncate_middle(text, 50);  // what add_observation uses
  for (size_t i = 0; i + 1 < cut.size(); ++i)
    if ((static_cast<unsigned char>(cut[i]) & 0xC0) == 0xC0)
      EXPECT_EQ(static_cast<unsigned char>(cut[i + 1]) & 0xC0, 0x80);
}

TEST(conversation, context_limit_is_tracked) {
  conversation c{"s", "t", {}, {100, 1 << 20}};
  EXPECT_FALSE(c.context_exhausted());
  c.on_assistant(std::string(400, 'x'));
  EXPECT_TRUE(c.context_exhausted());
}

TEST(eval_report, rates_exclude_aborted_and_geomeans_use_correct) {
  std::vector<messages::trajectory_record> recs(4);
  recs[0].task_id = "a";
  recs[0].reward = 3;
  recs[0].termination = caf_agent::messages::episode_end::finished;
  recs[0].speedup_eager = 2;
  recs[0].speedup_compile = 1.5;
  recs[1].task_id = "a";
  recs[1].reward = 1;
  recs[1].termination = caf_agent::messages::episode_end::turn_limit;
  recs[1].speedup_eager = 0.5;
  recs[1].speedup_compile = 0.5;
  recs[2].task_id = "b";
  recs[2].reward = -1;
  recs[2].termination = caf_agent::messages::episode_end::finished;
  recs[3].task_id = "b";
  recs[3].termination = caf_agent::messages::episode_end::aborted;
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

// -- token mode ---------------------------------------------------------------

namespace {

std::optional<policy::tokenizer> tiny_tokenizer() {
  std::string dir;
  if (const char* m = std::getenv("CAF_AGENT_TINY_MODEL"))
    dir = m;
  else if (const char* s = std::getenv("CAF_AGENT_SOURCE_DIR"))
    dir = std::string(s) + "/models/tiny-qwen2";
  auto tok = policy::tokenizer::from_file(dir + "/tokenizer.json");
  if (!tok) return std::nullopt;
  return std::move(tok.value());
}

}  // namespace

TEST(conversation_tokens, sampled_tokens_are_kept_verbatim_and_observations_join_one_turn) {
  auto tok = tiny_tokenizer();
  if (!tok) GTEST_SKIP() << "no small model tokenizer (./x setup creates models/tiny-qwen2)";
  conversation c{"skill", "task", {}, {131072, 64}, &*tok};
  ASSERT_TRUE(c.token_mode());
  ASSERT_TRUE(c.token_error().empty()) << c.token_error();
  const auto prompt = c.prompt_tokens();
  EXPECT_EQ(static_cast<int64_t>(prompt.size()), c.context_tokens());
  const int32_t im_end = *tok->token_to_id("<|im_end|>");
  auto text =
      "<tool_call>\n{\"name\": \"Read\", \"arguments\": {\"file_path\": \"a\"}}\n</tool_call>\n"
      "<tool_call>\n{\"name\": \"Read\", \"arguments\": {\"file_path\": \"b\"}}\n</tool_call>";
  auto sampled = tok->encode(text);
  sampled.push_back(im_end);
  std::vector<float> lp(sampled.size(), -0.5f);
  auto actions = c.on_sampled(sampled, lp);
  ASSERT_EQ(actions.size(), 2u);
  EXPECT_EQ(c.assistant_texts().back(), text);
  c.add_observation(actions[0].call_id, "content of a");
  c.add_observation(actions[1].call_id, "content of b");
  const auto next = c.prompt_tokens();
  // The prompt, then the sampled tokens unchanged, then both results and the next generation prompt.
  ASSERT_GT(next.size(), prompt.size() + sampled.size());
  EXPECT_TRUE(std::equal(prompt.begin(), prompt.end(), next.begin()));
  EXPECT_TRUE(std::equal(sampled.begin(), sampled.end(), next.begin() + static_cast<long>(prompt.size())));
  auto tail = tok->decode(std::span<const int32_t>(next).subspan(prompt.size() + sampled.size()));
  EXPECT_EQ(tail.find("<|im_start|>user"), tail.rfind("<|im_start|>user"));  // one user turn for both
  EXPECT_NE(tail.find("content of a"), std::string::npos);
  EXPECT_NE(tail.find("content of b"), std::string::npos);
  EXPECT_TRUE(tail.ends_with("<|im_start|>assistant\n"));
  const auto& mask = c.loss_mask();
  const auto& logprobs = c.token_logprobs();
  ASSERT_EQ(mask.size(), next.size());
  ASSERT_EQ(logprobs.size(), next.size());
  for (size_t i = 0; i < next.size(); ++i) {
    const bool in_turn = i >= prompt.size() && i < prompt.size() + sampled.size();
    EXPECT_EQ(mask[i], in_turn ? 1 : 0) << i;
    EXPECT_EQ(logprobs[i], in_turn ? -0.5f : 0.0f) << i;
  }
  EXPECT_EQ(c.assistant_turn_starts(), std::vector<uint32_t>{static_cast<uint32_t>(prompt.size())});
}

TEST(conversation_tokens, a_turn_cut_by_the_length_limit_gets_an_unmasked_end_and_the_episode_closes) {
  auto tok = tiny_tokenizer();
  if (!tok) GTEST_SKIP() << "no small model tokenizer (./x setup creates models/tiny-qwen2)";
  conversation c{"skill", "task", {}, {131072, 64}, &*tok};
  const auto prompt_size = c.prompt_tokens().size();
  auto sampled = tok->encode("I am done");  // no <|im_end|>: the sampler hit max_new_tokens
  auto actions = c.on_sampled(sampled, std::vector<float>(sampled.size(), -1.0f));
  EXPECT_TRUE(actions.empty());  // no tool call: the final answer
  c.close_tokens();
  c.close_tokens();  // harmless twice
  const auto& tokens = c.tokens();
  ASSERT_GE(tokens.size(), prompt_size + sampled.size() + 1);
  EXPECT_EQ(tokens[prompt_size + sampled.size()], *tok->token_to_id("<|im_end|>"));
  EXPECT_EQ(c.loss_mask()[prompt_size + sampled.size()], 0);  // added, not sampled
  EXPECT_EQ(c.token_logprobs().size(), tokens.size());
}

TEST(policy_backends, replay_in_token_mode_gives_the_recorded_turn_as_tokens_the_conversation_keeps) {
  auto tok = tiny_tokenizer();
  if (!tok) GTEST_SKIP() << "no small model tokenizer (./x setup creates models/tiny-qwen2)";
  const std::string turn =
      "Task t.\n<tool_call>\n{\"name\": \"Read\", \"arguments\": {\"file_path\": \"model.py\"}}\n</tool_call>";
  auto path = std::filesystem::temp_directory_path() / "caf_agent_replay_tokens.jsonl";
  std::ofstream{path} << nlohmann::json({{"task_id", "t"}, {"turns", {turn, "Done."}}}).dump() << "\n";
  std::string error;
  auto shared = std::make_shared<const policy::tokenizer>(*tok);
  const int32_t im_end = *tok->token_to_id("<|im_end|>");
  EXPECT_FALSE(make_replay_policy(path.string(), 0, error, {shared, -1}));  // token mode needs the end id
  EXPECT_NE(error.find("end-of-turn"), std::string::npos);
  auto p = make_replay_policy(path.string(), 0, error, {shared, im_end});
  ASSERT_TRUE(p) << error;
  conversation c{"skill", "task", {}, {131072, 16384}, &*tok};
  const auto prompt_size = c.prompt_tokens().size();
  messages::generate_request req;
  req.task_id = "t";
  auto first = p->generate(req).completion;
  ASSERT_FALSE(first.tokens.empty());
  EXPECT_EQ(first.tokens.back(), im_end);
  EXPECT_EQ(first.logprobs, std::vector<float>(first.tokens.size(), 0.0f));
  auto actions = c.on_sampled(first.tokens, first.logprobs);
  ASSERT_EQ(actions.size(), 1u);
  EXPECT_EQ(c.assistant_texts().back(), turn);  // decodes back to the recording
  c.add_observation(actions[0].call_id, "the model");
  (void)c.prompt_tokens();
  req.turn = 1;
  auto last = p->generate(req).completion;
  EXPECT_TRUE(c.on_sampled(last.tokens, last.logprobs).empty());
  c.close_tokens();
  // The loss mask is 1 on the two recorded turns (their end token included), 0 elsewhere.
  const auto& mask = c.loss_mask();
  const auto starts = c.assistant_turn_starts();
  ASSERT_EQ(starts.size(), 2u);
  EXPECT_EQ(starts[0], prompt_size);
  size_t ones = 0;
  for (auto m : mask) ones += m;
  EXPECT_EQ(ones, first.tokens.size() + last.tokens.size());
  for (size_t i = 0; i < first.tokens.size(); ++i) EXPECT_EQ(mask[starts[0] + i], 1);
  for (size_t i = 0; i < last.tokens.size(); ++i) EXPECT_EQ(mask[starts[1] + i], 1);
  EXPECT_EQ(c.tokens()[starts[1] + last.tokens.size() - 1], im_end);
}
