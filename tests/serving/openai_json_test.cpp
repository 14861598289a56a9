// The OpenAI JSON mapping alone (no sockets): the lenient corners of requests and responses.
#include <gtest/gtest.h>

#include <cmath>

#include "serving/openai_json.hpp"

using namespace caf_agent;
using namespace caf_agent::serving;
using policy::json_value;

namespace {

json_value parse(const std::string& text) {
  auto v = policy::parse_json(text);
  EXPECT_TRUE(v) << v.error().message;
  return v ? v.value() : json_value();
}

}  // namespace

TEST(serving_json, requests_accept_what_openai_clients_send) {
  auto r = chat_request_from_json(parse(R"({"model": null, "messages": [
      {"role": "developer", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]},
      {"role": "user", "content": "hi", "name": "bob"},
      {"role": "assistant", "content": null, "tool_calls": [{"id": "c1", "type": "function",
        "function": {"name": "Bash", "arguments": "not json {"}}]},
      {"role": "tool", "tool_call_id": "c1", "content": "out"}],
    "top_k": -1, "max_tokens": 10, "max_completion_tokens": 20, "stop": "END", "n": 1, "stream": false,
    "top_logprobs": 0, "logprobs": false, "frequency_penalty": 0, "seed": null})"));
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->messages[0].role, "system");
  EXPECT_EQ(r->messages[0].content, "a\nb");
  EXPECT_EQ(r->messages[2].tool_calls[0].arguments, json_value("not json {"));  // kept verbatim
  EXPECT_EQ(r->messages[3].tool_call_id, "c1");
  EXPECT_EQ(r->top_k, 0);
  EXPECT_EQ(r->max_tokens, 20);
  EXPECT_EQ(r->stop, std::vector<std::string>{"END"});
  EXPECT_FALSE(r->seed);
}

TEST(serving_json, extra_body_overrides_and_seeds_are_63_bit) {
  chat_request r;
  r.messages.resize(1);
  r.messages[0].role = "user";
  r.seed = ~uint64_t{0};
  auto body = chat_request_to_json(r, {{"max_tokens", 5}, {"return_token_ids", true}});
  EXPECT_EQ(*body.find("max_tokens"), json_value(5));
  EXPECT_EQ(*body.find("return_token_ids"), json_value(true));
  EXPECT_EQ(body.find("seed")->as_integer(), INT64_MAX);
  EXPECT_EQ(body.find("top_k"), nullptr);  // OpenAI itself refuses top_k
}

TEST(serving_json, responses_never_carry_invalid_json) {
  chat_response r;
  r.content = "bad \xff byte";
  r.token_ids = {1};
  r.logprobs = {-INFINITY};
  r.token_texts = {"\xff"};
  auto text = policy::dump_json(chat_response_to_json(r, {"id", 1, true}));
  auto back = chat_response_from_json(parse(text));
  ASSERT_TRUE(back) << back.error().message;
  EXPECT_EQ(back->content, "bad \xef\xbf\xbd byte");
  EXPECT_EQ(back->logprobs, std::vector<float>{-9999.0f});
  EXPECT_EQ(back->token_texts, std::vector<std::string>{"\xff"});  // exact bytes via "bytes"
}

TEST(serving_json, error_messages_of_other_servers_are_found) {
  EXPECT_EQ(error_message_from_body(R"({"error": {"message": "m1"}})"), "m1");
  EXPECT_EQ(error_message_from_body(R"({"object": "error", "message": "m2"})"), "m2");
  EXPECT_EQ(error_message_from_body(R"({"detail": [{"loc": "x"}]})"), R"([{"loc": "x"}])");
  EXPECT_EQ(error_message_from_body("<html>Bad Gateway</html>"), "<html>Bad Gateway</html>");
  EXPECT_EQ(error_message_from_body(std::string(1000, 'x')).size(), 303u);
  auto e = error_to_json(make_serving_error(errc::bad_request, "messages: required", "messages"));
  EXPECT_EQ(
      policy::dump_json(e),
      R"({"error": {"message": "messages: required", "type": "invalid_request_error", "param": "messages", "code": "bad_request"}})");
}
