// openai_client against servers that misbehave: down, slow, malformed, overloaded, refusing.
// The fake server is raw sockets, so the bytes are exactly what each test scripts.
#include <gtest/gtest.h>

#include <chrono>

#include "serving/openai_client.hpp"
#include "serving_test_support.hpp"

using namespace caf_agent;
using namespace caf_agent::serving;
using namespace caf_agent::serving::testing;
using step = fake_http_server::step;

namespace {

const std::string ok_body =
    R"({"id": "x", "object": "chat.completion", "model": "vllm-model", "choices": [{"index": 0,
      "message": {"role": "assistant", "content": null, "tool_calls": [{"id": "t1", "type": "function",
      "function": {"name": "Bash", "arguments": "{\"command\": \"ls\"}"}}]},
      "finish_reason": "tool_calls", "logprobs": {"content": [{"token": "ls", "logprob": -0.25, "bytes": [108, 115],
      "top_logprobs": []}]}}], "usage": {"prompt_tokens": 12, "completion_tokens": 1, "total_tokens": 13}})";

chat_request hello() {
  chat_request r;
  chat_message m;
  m.role = "user";
  m.content = "hello";
  r.messages.push_back(m);
  return r;
}

client_options fast(const std::string& url) {
  client_options o;
  o.base_url = url;
  o.connect_timeout_ms = 1000;
  o.request_timeout_ms = 1000;
  o.max_retries = 2;
  o.backoff_initial_ms = 10;
  o.backoff_max_ms = 20;
  return o;
}

openai_client make(const client_options& o) {
  return openai_client::create(o).value();
}

long long ms_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t).count();
}

}  // namespace

TEST(serving_client, reads_a_vllm_style_response_without_extension_fields) {
  fake_http_server server({{http_response(200, ok_body)}});
  auto opts = fast(server.base_url());
  opts.api_key = "sk-test";
  auto got = make(opts).chat(hello());
  ASSERT_TRUE(got) << got.error().message;
  EXPECT_EQ(got->content, "");
  ASSERT_EQ(got->tool_calls.size(), 1u);
  EXPECT_EQ(got->tool_calls[0].name, "Bash");
  EXPECT_EQ(policy::dump_json(got->tool_calls[0].arguments), R"({"command": "ls"})");
  EXPECT_EQ(got->tool_call_ids, std::vector<std::string>{"t1"});
  EXPECT_EQ(got->logprobs, std::vector<float>{-0.25f});
  EXPECT_EQ(got->token_texts, std::vector<std::string>{"ls"});
  EXPECT_TRUE(got->token_ids.empty());
  EXPECT_EQ(got->prompt_tokens, 12);
  EXPECT_EQ(got->raw_text, "<tool_call>\n{\"name\": \"Bash\", \"arguments\": {\"command\": \"ls\"}}\n</tool_call>");
  const auto request = server.requests().at(0);
  EXPECT_EQ(request.rfind("POST /v1/chat/completions HTTP/1.1\r\n", 0), 0u) << request;
  EXPECT_NE(request.find("Authorization: Bearer sk-test\r\n"), std::string::npos) << request;
}

TEST(serving_client, malformed_json_names_the_offset_and_is_not_retried) {
  fake_http_server server({{http_response(200, R"({"choices": [{"message": )")}});
  auto got = make(fast(server.base_url())).chat(hello());
  ASSERT_FALSE(got);
  EXPECT_EQ(got.error().code, errc::protocol);
  const auto& m = got.error().message;
  EXPECT_NE(m.find(server.base_url() + "/chat/completions"), std::string::npos) << m;
  EXPECT_NE(m.find("malformed JSON in the response: invalid JSON at offset 25"), std::string::npos) << m;
  EXPECT_EQ(server.connections(), 1);
}

TEST(serving_client, a_missing_message_is_named) {
  fake_http_server server({{http_response(200, R"({"choices": [{"index": 0, "finish_reason": "stop"}]})")}});
  auto got = make(fast(server.base_url())).chat(hello());
  ASSERT_FALSE(got);
  EXPECT_EQ(got.error().code, errc::protocol);
  EXPECT_NE(got.error().message.find("missing field choices[0].message"), std::string::npos) << got.error().message;
}

TEST(serving_client, server_down_fails_after_the_retries_in_bounded_time) {
  const auto url = "http://127.0.0.1:" + std::to_string(closed_port()) + "/v1";
  const auto start = std::chrono::steady_clock::now();
  auto got = make(fast(url)).chat(hello());
  ASSERT_FALSE(got);
  EXPECT_LT(ms_since(start), 2000);
  EXPECT_EQ(got.error().code, errc::unavailable);
  EXPECT_TRUE(got.error().retryable());
  EXPECT_NE(got.error().message.find("connection refused (3 attempts)"), std::string::npos) << got.error().message;
  EXPECT_NE(got.error().message.find(url), std::string::npos) << got.error().message;
}

TEST(serving_client, a_slow_server_times_out) {
  fake_http_server server({{http_response(200, ok_body), 5000}});
  auto opts = fast(server.base_url());
  opts.request_timeout_ms = 200;
  opts.max_retries = 1;
  const auto start = std::chrono::steady_clock::now();
  auto got = make(opts).chat(hello());
  const auto took = ms_since(start);
  ASSERT_FALSE(got);
  EXPECT_EQ(got.error().code, errc::timeout);
  EXPECT_NE(got.error().message.find("timed out after 200 ms"), std::string::npos) << got.error().message;
  EXPECT_GE(took, 400);
  EXPECT_LT(took, 2000);
}

TEST(serving_client, busy_and_server_errors_are_retried_until_success) {
  const auto busy = http_response(503, R"({"error": {"message": "engine busy"}})");
  const auto limited = http_response(429, R"({"message": "slow down"})", "Retry-After: 0\r\n");
  fake_http_server server({{busy}, {limited}, {http_response(200, ok_body)}});
  auto got = make(fast(server.base_url())).chat(hello());
  ASSERT_TRUE(got) << got.error().message;
  EXPECT_EQ(server.connections(), 3);
}

TEST(serving_client, the_last_error_is_reported_when_retries_run_out) {
  fake_http_server server({{http_response(500, R"({"detail": "CUDA error: out of memory"})")}});
  auto got = make(fast(server.base_url())).chat(hello());
  ASSERT_FALSE(got);
  EXPECT_EQ(got.error().code, errc::internal);
  EXPECT_NE(got.error().message.find("HTTP 500: CUDA error: out of memory (3 attempts)"), std::string::npos)
      << got.error().message;
  EXPECT_EQ(server.connections(), 3);
}

TEST(serving_client, a_400_is_not_retried_and_carries_the_servers_message) {
  fake_http_server server({{http_response(400, R"({"error": {"message": "messages[0].role: bad", "param": null}})")},
                           {http_response(200, ok_body)}});
  auto got = make(fast(server.base_url())).chat(hello());
  ASSERT_FALSE(got);
  EXPECT_EQ(got.error().code, errc::bad_request);
  EXPECT_FALSE(got.error().retryable());
  EXPECT_NE(got.error().message.find("HTTP 400: messages[0].role: bad"), std::string::npos) << got.error().message;
  EXPECT_EQ(server.connections(), 1);
}

TEST(serving_client, a_connection_closed_mid_response_is_retried) {
  fake_http_server server({{"HTTP/1.1 200 OK\r\nContent-Length: 500\r\n\r\n{\"choi"}, {http_response(200, ok_body)}});
  auto got = make(fast(server.base_url())).chat(hello());
  ASSERT_TRUE(got) << got.error().message;
  EXPECT_EQ(server.connections(), 2);
}

TEST(serving_client, reload_posts_to_the_root_and_reports_refusals) {
  fake_http_server server({{http_response(200, R"({"success": true, "message": "ok"})")},
                           {http_response(200, R"({"success": false, "message": "shape mismatch"})")}});
  auto client = make(fast(server.base_url()));
  ASSERT_TRUE(client.reload("/ckpt/a", 5));
  auto refused = client.reload("/ckpt/b", 6);
  ASSERT_FALSE(refused);
  EXPECT_NE(refused.error().message.find("shape mismatch"), std::string::npos) << refused.error().message;
  const auto request = server.requests().at(0);
  EXPECT_EQ(request.rfind("POST /update_weights_from_disk HTTP/1.1\r\n", 0), 0u) << request;
  EXPECT_NE(request.find(R"({"model_path": "/ckpt/a", "version": 5})"), std::string::npos) << request;
}

TEST(serving_client, urls_and_options_are_checked) {
  auto url = parse_http_url("http://[::1]:8000/v1/");
  ASSERT_TRUE(url) << url.error().message;
  EXPECT_EQ(url->host, "::1");
  EXPECT_EQ(url->port, 8000);
  EXPECT_EQ(url->path, "/v1");
  EXPECT_EQ(parse_http_url("http://example.com")->port, 80);
  EXPECT_NE(parse_http_url("https://api.openai.com/v1").error().message.find("https is not supported"),
            std::string::npos);
  EXPECT_FALSE(parse_http_url("http://host:99999/v1"));
  EXPECT_FALSE(parse_http_url("http://:80/v1"));
  EXPECT_FALSE(parse_http_url("127.0.0.1:8000"));
  auto bad = openai_client::create({.base_url = "http://h:1/v1", .request_timeout_ms = 0});
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().message.find("request_timeout_ms"), std::string::npos);
}
