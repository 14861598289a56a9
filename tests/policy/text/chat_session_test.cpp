#include "policy/text/chat_session.hpp"

#include <gtest/gtest.h>

#include "byte_tokenizer_fixture.hpp"

using namespace caf_agent::policy;
using caf_agent::policy::testing::tiny_tokenizer;

namespace {

json_array one_tool() {
  return json_array{
      json_object{{"type", "function"}, {"function", json_object{{"name", "bash"}, {"parameters", json_object{}}}}}};
}

std::vector<chat_message> episode() {
  chat_message call{"assistant", "Looking.", {tool_call{"bash", json_object{{"cmd", "ls"}}}}};
  return {{"system", "sys", {}}, {"user", "go", {}},   call,
          {"tool", "a.py", {}},  {"tool", "b.py", {}}, {"assistant", "done", {}}};
}

}  // namespace

TEST(chat_session, incremental_tokens_equal_the_full_rendering) {
  auto tok = tiny_tokenizer();
  auto msgs = episode();
  auto s = chat_session::start(tok, std::span(msgs).subspan(0, 2), one_tool());
  ASSERT_TRUE(s.ok()) << s.error().message;
  EXPECT_TRUE(s->awaiting_assistant());
  auto first = tok.encode(render_assistant_body(msgs[2]));
  first.push_back(s->im_end_id());
  ASSERT_TRUE(s->append_sampled(first));
  ASSERT_TRUE(s->append_observation(std::span(msgs).subspan(3, 2)));
  auto last = tok.encode("done");
  last.push_back(s->im_end_id());
  ASSERT_TRUE(s->append_sampled(last));
  ASSERT_TRUE(s->close());
  EXPECT_EQ(s->tokens(), tok.encode(render_chat(chat_format{}, msgs, one_tool(), false)));
}

TEST(chat_session, mask_and_turns_mark_sampled_tokens_only) {
  auto tok = tiny_tokenizer();
  chat_message user{"user", "hi", {}};
  auto s = chat_session::start(tok, std::span(&user, 1), {});
  ASSERT_TRUE(s.ok());
  size_t prompt_len = s->tokens().size();
  std::vector<token_id> sampled = tok.encode("hello");
  sampled.push_back(s->im_end_id());
  ASSERT_TRUE(s->append_sampled(sampled));
  chat_message obs{"tool", "ok", {}};
  ASSERT_TRUE(s->append_observation(std::span(&obs, 1)));
  const auto& turns = s->turns();
  ASSERT_EQ(turns.size(), 3u);
  EXPECT_EQ(turns[0].kind, turn_kind::prompt);
  EXPECT_EQ(turns[1].kind, turn_kind::assistant);
  EXPECT_EQ(turns[1].begin, prompt_len);
  EXPECT_EQ(turns[1].end, prompt_len + sampled.size());
  EXPECT_EQ(turns[2].kind, turn_kind::observation);
  EXPECT_EQ(turns[2].end, s->tokens().size());
  ASSERT_EQ(s->loss_mask().size(), s->tokens().size());
  for (size_t i = 0; i < s->tokens().size(); ++i)
    EXPECT_EQ(s->loss_mask()[i], i >= turns[1].begin && i < turns[1].end) << i;
  // The observation ends with the next generation prompt.
  auto tail = tok.decode(std::vector<token_id>(s->tokens().begin() + turns[2].begin, s->tokens().end()));
  EXPECT_EQ(tail, "\n<|im_start|>user\n<tool_response>\nok\n</tool_response><|im_end|>\n<|im_start|>assistant\n");
}

TEST(chat_session, truncated_sample_gets_an_unmasked_im_end) {
  auto tok = tiny_tokenizer();
  chat_message user{"user", "hi", {}};
  auto s = chat_session::start(tok, std::span(&user, 1), {});
  ASSERT_TRUE(s.ok());
  size_t before = s->tokens().size();
  auto sampled = tok.encode("cut off mid");
  ASSERT_TRUE(s->append_sampled(sampled));
  EXPECT_EQ(s->tokens().size(), before + sampled.size() + 1);
  EXPECT_EQ(s->tokens().back(), s->im_end_id());
  EXPECT_EQ(s->loss_mask().back(), 0);
  EXPECT_EQ(s->loss_mask()[before], 1);
  EXPECT_EQ(s->turns().back().end, s->tokens().size());
}

TEST(chat_session, out_of_order_calls_are_errors) {
  auto tok = tiny_tokenizer();
  chat_message user{"user", "hi", {}};
  auto s = chat_session::start(tok, std::span(&user, 1), {});
  ASSERT_TRUE(s.ok());
  EXPECT_FALSE(s->append_observation(std::span(&user, 1)));
  EXPECT_FALSE(s->close());
  std::vector<token_id> sampled = {s->im_end_id()};
  ASSERT_TRUE(s->append_sampled(sampled));
  EXPECT_FALSE(s->append_sampled(sampled));
  chat_message bad{"assistant", "x", {}};
  EXPECT_FALSE(s->append_observation(std::span(&bad, 1)));
  ASSERT_TRUE(s->close());
  EXPECT_FALSE(s->close());
  EXPECT_FALSE(chat_session::start(tok, std::span(&bad, 1), {}).ok());
}
