// openai_server under load and under garbage: many clients at once, and mutated request bodies
// that must each get an answer (never a crash, never a hang).
#include <gtest/gtest.h>

#include <random>

#include "serving/openai_client.hpp"
#include "serving/openai_server.hpp"
#include "serving_test_support.hpp"

using namespace caf_agent;
using namespace caf_agent::serving;
using namespace caf_agent::serving::testing;

TEST(serving_server, many_clients_at_once_each_get_their_answer) {
  scripted_chat_service service;
  service.reply.content = "ok";
  service.reply.token_ids = {1, 2};
  auto server = openai_server::start(service, {.io_threads = 2}).value();
  auto client = openai_client::create({.base_url = server->base_url(), .max_retries = 0}).value();
  // Rationale: 8 threads x 10 requests is well past the 2 io threads and finishes in well
  // under a second on loopback.
  constexpr int threads = 8, each = 10;
  std::atomic<int> ok{0};
  std::vector<std::thread> callers;
  for (int t = 0; t < threads; ++t)
    callers.emplace_back([&, t] {
      for (int i = 0; i < each; ++i) {
        chat_request req;
        chat_message m;
        m.role = "user";
        m.content = "caller " + std::to_string(t) + " request " + std::to_string(i);
        req.messages.push_back(m);
        auto got = client.chat(req);
        if (got && got->content == "ok") ++ok;
      }
    });
  for (auto& c : callers) c.join();
  EXPECT_EQ(ok.load(), threads * each);
  EXPECT_EQ(service.received().size(), static_cast<size_t>(threads * each));
}

TEST(serving_server, mutated_bodies_always_get_an_answer) {
  scripted_chat_service service;
  service.reply.content = "ok";
  auto server = openai_server::start(service, {.max_body_bytes = 8192}).value();
  const std::string valid =
      R"({"model": "m", "messages": [{"role": "system", "content": "s"}, {"role": "user", "content": [{"type": "text", "text": "hi"}]},)"
      R"( {"role": "assistant", "content": null, "tool_calls": [{"id": "c", "type": "function", "function": {"name": "Bash", "arguments": "{\"a\": 1}"}}]},)"
      R"( {"role": "tool", "tool_call_id": "c", "content": "x"}], "tools": [{"type": "function", "function": {"name": "Bash", "parameters": {}}}],)"
      R"( "temperature": 0.5, "top_p": 1, "top_k": 3, "max_tokens": 9, "stop": ["a", "b"], "seed": 4, "logprobs": true, "n": 1})";
  std::mt19937 rng(12345);
  const std::string alphabet = "{}[]\",:0123456789-.eE truefalsnul\\\x01\xff";
  // Rationale: 300 mutations cover truncation, deletion, insertion and replacement at many
  // offsets in about a second.
  for (int i = 0; i < 300; ++i) {
    std::string body = valid;
    const int edits = 1 + static_cast<int>(rng() % 4);
    for (int e = 0; e < edits && !body.empty(); ++e) {
      const size_t at = rng() % body.size();
      switch (rng() % 4) {
        case 0:
          body.resize(at);
          break;
        case 1:
          body.erase(at, 1 + rng() % 8);
          break;
        case 2:
          body.insert(at, 1, alphabet[rng() % alphabet.size()]);
          break;
        default:
          body[at] = alphabet[rng() % alphabet.size()];
          break;
      }
    }
    const auto reply = parse_reply(raw_exchange(server->port(), raw_request("POST", "/v1/chat/completions", body)));
    ASSERT_TRUE(reply.status == 200 || reply.status == 400) << reply.status << " for " << body;
    ASSERT_TRUE(policy::parse_json(reply.body)) << reply.body;
  }
  EXPECT_EQ(parse_reply(raw_exchange(server->port(), raw_request("GET", "/health", ""))).status, 200);
}

TEST(serving_server, connections_over_the_limit_get_503) {
  scripted_chat_service service;
  auto server = openai_server::start(service, {.max_connections = 1}).value();
  auto client = openai_client::create({.base_url = server->base_url(), .max_retries = 0}).value();
  const int idle = connect_loopback(server->port());  // holds the only connection
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  auto refused = client.models();
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().code, errc::busy);
  EXPECT_NE(refused.error().message.find("too many connections"), std::string::npos) << refused.error().message;
  ::close(idle);
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_TRUE(client.models());
}
