// openai_client against openai_server on 127.0.0.1 with a scripted chat_service: every field
// of a request and a response crosses the wire both ways; bad requests get the right status
// and a message naming the field.
#include <gtest/gtest.h>

#include <condition_variable>

#include "policy/text/json.hpp"
#include "serving/openai_client.hpp"
#include "serving/openai_server.hpp"
#include "serving_test_support.hpp"

using namespace caf_agent;
using namespace caf_agent::serving;
using namespace caf_agent::serving::testing;
using policy::json_array;
using policy::json_object;
using policy::json_value;

namespace {

json_value parse(const std::string& text) {
  auto v = policy::parse_json(text);
  EXPECT_TRUE(v) << v.error().message << " in " << text;
  return v ? v.value() : json_value();
}

chat_message msg(std::string role, std::string content) {
  chat_message m;
  m.role = std::move(role);
  m.content = std::move(content);
  return m;
}

chat_request rich_request() {
  chat_request r;
  r.model = "m1";
  r.messages.push_back(msg("system", "You write CUDA kernels."));
  r.messages.push_back(msg("user", "Make it fast: ünïcødé \"quoted\"\n\ttabbed"));
  auto assistant = msg("assistant", "Let me look.");
  assistant.tool_calls = {{"Bash", parse(R"({"command": "ls -la", "timeout": 30})")},
                          {"Read", parse(R"({"path": "model.py", "range": [1, 2.5], "flag": null})")}};
  assistant.tool_call_ids = {"call_a"};  // the second id is generated
  r.messages.push_back(assistant);
  auto tool1 = msg("tool", "total 8\n-rw model.py");
  tool1.tool_call_id = "call_a";
  r.messages.push_back(tool1);
  r.messages.push_back(msg("tool", "import torch"));  // tool_call_id filled from the assistant
  r.tools =
      json_array{parse(R"({"type": "function", "function": {"name": "Bash", "description": "Run a command",
                                 "parameters": {"type": "object", "properties": {"command": {"type": "string"}}}}})"),
                 parse(R"({"type": "function", "function": {"name": "Read", "parameters": {"type": "object"}}})")};
  r.temperature = 0.7f;
  r.top_p = 0.9f;
  r.top_k = 20;
  r.max_tokens = 333;
  r.stop = {"</done>", "STOP"};
  r.seed = 42;
  r.logprobs = true;
  return r;
}

chat_response rich_response() {
  chat_response r;
  r.content = "I will run two tools.";
  r.tool_calls = {{"Bash", parse(R"({"command": "nvcc -O3 k.cu"})")},
                  {"Write", parse(R"({"path": "k.cu", "content": "__global__ void k() {}\n"})")}};
  r.tool_call_ids = {"", "call_custom"};
  r.finish_reason = "tool_calls";
  r.raw_text = "I will run two tools.\n<tool_call>\n{...}\n</tool_call>";
  r.prompt_token_ids = {1, 2, 3};
  r.token_ids = {10, 11, 12, 2};
  r.logprobs = {-0.5f, -1.2345678f, -3.0e-5f, -0.1f};
  r.token_texts = {"I", " will", "\xe2\x82", "<|im_end|>"};  // the third is half a UTF-8 character
  r.policy_version = 7;
  r.prompt_tokens = 3;
  r.completion_tokens = 4;
  return r;
}

void expect_same_calls(const std::vector<policy::tool_call>& a, const std::vector<policy::tool_call>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].name, b[i].name) << i;
    EXPECT_EQ(policy::dump_json(a[i].arguments), policy::dump_json(b[i].arguments)) << i;
  }
}

struct served {
  scripted_chat_service service;
  std::unique_ptr<openai_server> server;
  explicit served(server_options o = {}) {
    auto s = openai_server::start(service, o);
    if (!s) throw std::runtime_error(s.error().message);
    server = std::move(s).value();
  }
  openai_client client(client_options o = {}) const {
    o.base_url = server->base_url();
    return openai_client::create(o).value();
  }
  raw_reply post(const std::string& path, const std::string& body, const std::string& method = "POST") const {
    return parse_reply(raw_exchange(server->port(), raw_request(method, path, body)));
  }
};

}  // namespace

TEST(serving_client_server, every_field_round_trips_both_ways) {
  served s;
  s.service.reply = rich_response();
  const auto request = rich_request();
  auto got = s.client().chat(request);
  ASSERT_TRUE(got) << got.error().message;

  // What the server handed to the service.
  const auto received = s.service.received();
  ASSERT_EQ(received.size(), 1u);
  const auto& r = received[0];
  EXPECT_EQ(r.model, "m1");
  ASSERT_EQ(r.messages.size(), request.messages.size());
  for (size_t i = 0; i < r.messages.size(); ++i) {
    EXPECT_EQ(r.messages[i].role, request.messages[i].role) << i;
    EXPECT_EQ(r.messages[i].content, request.messages[i].content) << i;
    expect_same_calls(r.messages[i].tool_calls, request.messages[i].tool_calls);
  }
  EXPECT_EQ(r.messages[2].tool_call_ids, (std::vector<std::string>{"call_a", "call_2_1"}));
  EXPECT_EQ(r.messages[3].tool_call_id, "call_a");
  EXPECT_EQ(r.messages[4].tool_call_id, "call_2_1");
  EXPECT_EQ(r.tools, request.tools);
  EXPECT_EQ(r.temperature, request.temperature);
  EXPECT_EQ(r.top_p, request.top_p);
  EXPECT_EQ(r.top_k, 20);
  EXPECT_EQ(r.max_tokens, 333);
  EXPECT_EQ(r.stop, request.stop);
  EXPECT_EQ(r.seed, std::optional<uint64_t>(42));
  EXPECT_TRUE(r.logprobs);

  // What came back to the client.
  const auto want = rich_response();
  const auto& c = got.value();
  EXPECT_EQ(c.model, "scripted-model");
  EXPECT_EQ(c.id.rfind("chatcmpl-", 0), 0u) << c.id;
  EXPECT_EQ(c.content, want.content);
  expect_same_calls(c.tool_calls, want.tool_calls);
  ASSERT_EQ(c.tool_call_ids.size(), 2u);
  EXPECT_EQ(c.tool_call_ids[0].rfind("call_", 0), 0u);
  EXPECT_EQ(c.tool_call_ids[1], "call_custom");
  EXPECT_EQ(c.finish_reason, "tool_calls");
  EXPECT_EQ(c.raw_text, want.raw_text);
  EXPECT_EQ(c.prompt_token_ids, want.prompt_token_ids);
  EXPECT_EQ(c.token_ids, want.token_ids);
  EXPECT_EQ(c.logprobs, want.logprobs);        // exact: floats travel as their exact double values
  EXPECT_EQ(c.token_texts, want.token_texts);  // exact bytes, the partial character included
  EXPECT_EQ(c.policy_version, 7u);
  EXPECT_EQ(c.prompt_tokens, 3);
  EXPECT_EQ(c.completion_tokens, 4);
}

TEST(serving_client_server, logprobs_only_when_asked_and_a_request_without_seed_has_none) {
  served s;
  s.service.reply = rich_response();
  chat_request req;
  req.messages.push_back(msg("user", "hi"));
  auto got = s.client({.model = "default-name"}).chat(req);
  ASSERT_TRUE(got) << got.error().message;
  EXPECT_TRUE(got->logprobs.empty());
  EXPECT_EQ(got->token_ids, rich_response().token_ids);  // the extension fields always travel
  const auto r = s.service.received().at(0);
  EXPECT_EQ(r.model, "default-name");
  EXPECT_FALSE(r.seed.has_value());
  EXPECT_FALSE(r.logprobs);
}

TEST(serving_client_server, service_errors_keep_their_status_and_text) {
  served s;
  s.service.failure = make_serving_error(errc::bad_request, "messages: the prompt is 9000 tokens", "messages");
  chat_request req;
  req.messages.push_back(msg("user", "hi"));
  auto got = s.client({.max_retries = 0}).chat(req);
  ASSERT_FALSE(got);
  EXPECT_EQ(got.error().code, errc::bad_request);
  EXPECT_NE(got.error().message.find("HTTP 400: messages: the prompt is 9000 tokens"), std::string::npos)
      << got.error().message;

  s.service.failure = make_serving_error(errc::busy, "engine service: busy");
  auto busy = s.client({.max_retries = 1, .backoff_initial_ms = 1, .backoff_max_ms = 2}).chat(req);
  ASSERT_FALSE(busy);
  EXPECT_EQ(busy.error().code, errc::busy);
  EXPECT_NE(busy.error().message.find("HTTP 503"), std::string::npos) << busy.error().message;
  EXPECT_EQ(s.service.received().size(), 3u);  // the 503 was retried once
}

TEST(serving_client_server, reload_models_and_health) {
  served s;
  auto client = s.client();
  ASSERT_TRUE(client.reload("/ckpt/step-100", 3));
  EXPECT_EQ(s.service.reloads(), (std::vector<std::pair<std::string, uint64_t>>{{"/ckpt/step-100", 3}}));
  auto refused = client.reload("/no/such/checkpoint", 4);
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().code, errc::bad_request);
  EXPECT_NE(refused.error().message.find("no config.json"), std::string::npos) << refused.error().message;
  auto models = client.models();
  ASSERT_TRUE(models) << models.error().message;
  EXPECT_EQ(models.value(), std::vector<std::string>{"scripted-model"});
  auto health = s.post("/health", "", "GET");
  EXPECT_EQ(health.status, 200);
  EXPECT_EQ(parse(health.body).find("status")->as_string(), "ok");
}

TEST(serving_client_server, api_key_is_required_when_configured) {
  served s({.api_key = "sk-test"});
  s.service.reply = rich_response();
  chat_request req;
  req.messages.push_back(msg("user", "hi"));
  EXPECT_TRUE(s.client({.api_key = "sk-test"}).chat(req));
  auto denied = s.client({.api_key = "wrong", .max_retries = 2}).chat(req);
  ASSERT_FALSE(denied);
  EXPECT_EQ(denied.error().code, errc::unauthorized);
  EXPECT_EQ(s.service.received().size(), 1u);
  EXPECT_EQ(s.post("/health", "", "GET").status, 200);  // probes need no key
}

// Bad request bodies: each gets its status and a message naming the field.
TEST(serving_server, bad_requests_get_the_right_status_and_name_the_field) {
  served s({.max_body_bytes = 4096});
  struct bad_case {
    std::string body;
    int status;
    std::string mentions;
  };
  const std::vector<bad_case> cases = {
      {R"({"model": "m"})", 400, "messages: required"},
      {R"({"messages": []})", 400, "messages: must not be empty"},
      {R"({"messages": "hi"})", 400, "messages: expected an array, got string"},
      {R"({"messages": [{"role": 3, "content": "x"}]})", 400, "messages[0].role"},
      {R"({"messages": [{"role": "wizard", "content": "x"}]})", 400, "messages[0].role: unknown role 'wizard'"},
      {R"({"messages": [{"role": "user", "content": 5}]})", 400, "messages[0].content"},
      {R"({"messages": [{"role": "user"}]})", 400, "messages[0].content: required"},
      {R"({"messages": [{"role": "assistant", "tool_calls": [{"function": {"arguments": "{}"}}]}]})", 400,
       "messages[0].tool_calls[0].function.name"},
      {R"({"messages": [{"role": "user", "content": "x"}], "temperature": "hot"})", 400,
       "temperature: expected a number"},
      {R"({"messages": [{"role": "user", "content": "x"}], "top_p": 0})", 400, "top_p: must be in (0.0, 1.0]"},
      {R"({"messages": [{"role": "user", "content": "x"}], "max_tokens": 0})", 400, "max_tokens"},
      {R"({"messages": [{"role": "user", "content": "x"}], "stop": [1]})", 400, "stop[0]"},
      {R"({"messages": [{"role": "user", "content": "x"}], "tools": [{"type": "function"}]})", 400,
       "tools[0].function"},
      {R"({"messages": [{"role": "user", "content": "x"}], "n": 2})", 400, "n: only n = 1"},
      {R"({"messages": [{"role": "user", "content": "x"}], "stream": true})", 400,
       "stream: streaming is not supported"},
      {R"({"messages": [{"role": "user", "content": "x"}], "top_logprobs": 5})", 400, "top_logprobs: only 0"},
      {R"({"messages": [{"role": "user", "content": "x"}], "seed": -1})", 400, "seed"},
      {R"({"messages": [{"role": "user", "content": "x"},)", 400, "not valid JSON: invalid JSON at offset"},
      {R"([1, 2])", 400, "must be a JSON object"},
  };
  for (const auto& c : cases) {
    auto reply = s.post("/v1/chat/completions", c.body);
    EXPECT_EQ(reply.status, c.status) << c.body;
    auto body = parse(reply.body);
    const auto* error = body.find("error");
    ASSERT_TRUE(error && error->find("message")) << reply.body;
    EXPECT_NE(error->find("message")->as_string().find(c.mentions), std::string::npos)
        << c.body << " -> " << reply.body;
  }
  EXPECT_TRUE(s.service.received().empty());
  // The param field names the field, as OpenAI does.
  auto role = parse(s.post("/v1/chat/completions", R"({"messages": [{"role": 1}]})").body);
  EXPECT_EQ(role.find("error")->find("param")->as_string(), "messages[0].role");
}

TEST(serving_server, wrong_paths_methods_and_sizes) {
  served s({.max_body_bytes = 4096});
  auto unknown = s.post("/v1/completions", "{}");
  EXPECT_EQ(unknown.status, 404);
  EXPECT_NE(unknown.body.find("unknown path '/v1/completions'"), std::string::npos) << unknown.body;
  auto get_on_post = s.post("/v1/chat/completions", "", "GET");
  EXPECT_EQ(get_on_post.status, 405);
  EXPECT_NE(get_on_post.headers.find("Allow: POST"), std::string::npos) << get_on_post.headers;
  EXPECT_NE(get_on_post.body.find("use POST"), std::string::npos);
  const std::string big = R"({"messages": [{"role": "user", "content": ")" + std::string(10000, 'x') + R"("}]})";
  auto oversize = s.post("/v1/chat/completions", big);
  EXPECT_EQ(oversize.status, 413);
  EXPECT_NE(oversize.body.find("4096 bytes"), std::string::npos) << oversize.body;
  auto garbage = parse_reply(raw_exchange(s.server->port(), "NOT HTTP AT ALL\r\n\r\n"));
  EXPECT_EQ(garbage.status, 400);
  auto reload_bad = s.post("/update_weights_from_disk", R"({"model_path": "/x"})");
  EXPECT_EQ(reload_bad.status, 400);
  EXPECT_NE(reload_bad.body.find("version: required"), std::string::npos) << reload_bad.body;
  // The server is still fine after all of that.
  EXPECT_EQ(s.post("/health", "", "GET").status, 200);
}

TEST(serving_server, keep_alive_pipelining_and_expect_continue) {
  served s;
  s.service.reply = rich_response();
  const std::string body = R"({"messages": [{"role": "user", "content": "hi"}]})";
  const std::string keep =
      "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: " + std::to_string(body.size()) + "\r\n\r\n" +
      body;
  const std::string raw = raw_exchange(s.server->port(), keep + raw_request("GET", "/health", ""));
  const size_t second = raw.find("HTTP/1.1 200", 1);
  ASSERT_NE(second, std::string::npos) << raw;
  EXPECT_EQ(parse_reply(raw).status, 200);
  EXPECT_EQ(parse(parse_reply(raw.substr(second)).body).find("status")->as_string(), "ok");

  // curl's Expect: 100-continue: the body follows the interim response.
  const int fd = connect_loopback(s.server->port());
  send_all(fd,
           "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nConnection: close\r\n"
           "Content-Length: " +
               std::to_string(body.size()) + "\r\n\r\n");
  std::string interim;
  char c;
  while (interim.find("\r\n\r\n") == std::string::npos && ::recv(fd, &c, 1, 0) == 1) interim.push_back(c);
  EXPECT_EQ(interim.rfind("HTTP/1.1 100", 0), 0u) << interim;
  send_all(fd, body);
  EXPECT_EQ(parse_reply(read_until_close(fd, 3000)).status, 200);
  ::close(fd);
}

TEST(serving_server, a_silent_client_is_disconnected_after_the_read_timeout) {
  served s({.read_timeout_ms = 150});
  const int fd = connect_loopback(s.server->port());
  send_all(fd, "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n");  // and then nothing
  const auto start = std::chrono::steady_clock::now();
  const std::string got = read_until_close(fd, 3000);
  const auto waited = std::chrono::steady_clock::now() - start;
  ::close(fd);
  EXPECT_LT(waited, std::chrono::milliseconds(2000));
  EXPECT_GE(waited, std::chrono::milliseconds(100));
}

namespace {

// Holds the first request until release(), to stop the server while it is in flight.
class holding_service : public chat_service {
 public:
  void complete(chat_request, chat_handler done) override {
    std::lock_guard lock(mtx_);
    pending_ = std::move(done);
    cv_.notify_all();
  }
  status reload(const std::string&, uint64_t) override { return {}; }
  std::string model_name() const override { return "holding"; }
  void wait_pending() {
    std::unique_lock lock(mtx_);
    cv_.wait(lock, [&] { return pending_ != nullptr; });
  }
  void release() {
    std::lock_guard lock(mtx_);
    pending_(rich_response());
  }

 private:
  std::mutex mtx_;
  std::condition_variable cv_;
  chat_handler pending_;
};

}  // namespace

TEST(serving_server, stop_with_a_request_in_flight) {
  holding_service service;
  auto server = openai_server::start(service, {}).value();
  auto client = openai_client::create({.base_url = server->base_url(), .max_retries = 0}).value();
  std::optional<result<chat_response>> got;
  std::thread caller([&] {
    chat_request req;
    req.messages.push_back(msg("user", "hi"));
    got.emplace(client.chat(req));
  });
  service.wait_pending();
  server->stop();
  caller.join();
  ASSERT_TRUE(got.has_value());
  ASSERT_FALSE(got->ok());
  EXPECT_EQ(got->error().code, errc::unavailable) << got->error().message;
  service.release();  // the late answer is dropped, nothing crashes
  server->stop();     // idempotent
  server.reset();
  auto refused = client.models();
  ASSERT_FALSE(refused);
  EXPECT_NE(refused.error().message.find("connection refused"), std::string::npos) << refused.error().message;
}

TEST(serving_server, bad_options_and_a_taken_port_are_errors) {
  scripted_chat_service service;
  auto threads = openai_server::start(service, {.io_threads = 0});
  ASSERT_FALSE(threads);
  EXPECT_NE(threads.error().message.find("io_threads"), std::string::npos);
  EXPECT_FALSE(openai_server::start(service, {.host = "not-an-address"}));
  auto taken = openai_server::start(service, {});
  ASSERT_TRUE(taken);
  auto clash = openai_server::start(service, {.port = taken.value()->port()});
  ASSERT_FALSE(clash);
  EXPECT_NE(clash.error().message.find("cannot listen on 127.0.0.1:"), std::string::npos) << clash.error().message;
}
