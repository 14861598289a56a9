// The real engine behind the HTTP server: a tiny random Qwen2-shaped model and a byte-level
// tokenizer, both made here (no Python needed). What comes over HTTP must be exactly what the
// engine samples for the same prompt and seed, and a reload must switch the weights version.
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <future>

#include "policy/model/decoder.hpp"
#include "policy/text/byte_level.hpp"
#include "serving/engine_chat_service.hpp"
#include "serving/openai_client.hpp"
#include "serving/openai_server.hpp"
#include "tests/policy/model/random_checkpoint.hpp"

namespace fs = std::filesystem;
using namespace caf_agent;
using namespace caf_agent::serving;
using policy::json_object;
using policy::json_value;

namespace {

const char* const specials[] = {"<|endoftext|>", "<|im_start|>", "<|im_end|>", "<tool_call>", "</tool_call>"};

// The 256 byte-level characters, a few merges, and the ChatML / tool-call special tokens.
policy::tokenizer make_tokenizer() {
  const auto& alphabet = policy::byte_level_alphabet::get();
  json_object vocab;
  for (int b = 0; b < 256; ++b) vocab.emplace_back(alphabet.to_utf8(static_cast<uint8_t>(b)), b);
  policy::json_array merges;
  int next = 256;
  for (auto [a, b] : {std::pair{"e", "r"}, std::pair{"Ġ", "t"}, std::pair{"o", "n"}}) {
    vocab.emplace_back(std::string(a) + b, next++);
    merges.emplace_back(std::string(a) + " " + b);
  }
  policy::json_array added;
  for (const char* s : specials) {
    added.push_back(json_object{{"id", next}, {"content", s}, {"special", true}});
    vocab.emplace_back(s, next++);
  }
  const std::string text =
      R"({"version": "1.0", "normalizer": null, "added_tokens": )" + policy::dump_json(added) +
      R"(, "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": false, "use_regex": true},)"
      R"( "decoder": {"type": "ByteLevel"}, "model": )" +
      policy::dump_json(json_object{
          {"type", "BPE"}, {"vocab", json_value(std::move(vocab))}, {"merges", json_value(std::move(merges))}}) +
      "}";
  return policy::tokenizer::from_json_text(text).value();
}

const policy::tokenizer& tok() {
  static const policy::tokenizer t = make_tokenizer();
  return t;
}

bool made_work_dir = false;

fs::path work_dir() {
  static const fs::path dir = [] {
    made_work_dir = true;
    auto d = fs::temp_directory_path() / ("serving_engine_test_" + std::to_string(::getpid()));
    fs::remove_all(d);
    fs::create_directories(d);
    return d;
  }();
  return dir;
}

// A random checkpoint of the tokenizer's vocabulary.
std::string make_model(const std::string& name, uint64_t seed) {
  return policy::test_support::write_random_checkpoint(
      policy::test_support::tiny_qwen2_config(static_cast<int64_t>(tok().id_limit()), 2048), work_dir() / name, seed);
}

const std::string& model_a() {
  static const std::string dir = make_model("a", 1);
  return dir;
}
const std::string& model_b() {
  static const std::string dir = make_model("b", 2);
  return dir;
}

std::shared_ptr<policy::engine_service> open_engine(const std::string& dir, int32_t context = 1024) {
  policy::service_options o;
  o.engine.model_dir = dir;
  o.engine.max_batch = 4;
  o.engine.max_context = context;
  auto engine = policy::engine_service::open(o);
  if (!engine) throw std::runtime_error(engine.error().message);
  return std::shared_ptr<policy::engine_service>(std::move(engine).value());
}

// The request the server should build, made here independently of engine_chat_service.
policy::generation_request direct_request(const chat_request& req) {
  const std::vector<policy::chat_message> plain(req.messages.begin(), req.messages.end());
  policy::generation_request g;
  g.prompt = tok().encode(policy::render_chat({}, plain, req.tools, true));
  g.max_new_tokens = req.max_tokens;
  g.sampling = {req.temperature, req.top_p, req.top_k};
  g.stop_token_ids = {*tok().token_to_id("<|im_end|>"), *tok().token_to_id("<|endoftext|>")};
  g.seed = req.seed.value();
  return g;
}

policy::generation_result run_direct(policy::engine_service& engine, const chat_request& req) {
  std::promise<policy::generation_result> done;
  auto submitted = engine.submit(direct_request(req), [&](policy::generation_result r, std::string error) {
    EXPECT_EQ(error, "");
    done.set_value(std::move(r));
  });
  EXPECT_TRUE(submitted) << submitted.error().message;
  return done.get_future().get();
}

chat_request kernel_request(float temperature, uint64_t seed) {
  chat_request r;
  chat_message system, user;
  system.role = "system";
  system.content = "You are terse.";
  user.role = "user";
  user.content = "Write a relu kernel.";
  r.messages = {system, user};
  r.tools.push_back(policy::parse_json(R"({"type": "function", "function": {"name": "Bash", "parameters":
      {"type": "object", "properties": {"command": {"type": "string"}}}}})")
                        .value());
  r.temperature = temperature;
  r.top_k = temperature > 0 ? 50 : 0;
  r.max_tokens = 16;
  r.seed = seed;
  r.logprobs = true;
  return r;
}

void expect_same_as_engine(const chat_response& http, const policy::generation_result& direct,
                           const chat_request& req) {
  EXPECT_EQ(http.prompt_token_ids, direct_request(req).prompt);
  EXPECT_EQ(http.token_ids, direct.tokens);
  ASSERT_EQ(http.logprobs.size(), direct.logprobs.size());
  for (size_t i = 0; i < direct.logprobs.size(); ++i) EXPECT_FLOAT_EQ(http.logprobs[i], direct.logprobs[i]) << i;
  EXPECT_EQ(http.policy_version, direct.policy_version);
  std::vector<int32_t> body = direct.tokens;
  if (direct.reason == policy::finish_reason::stop_token) body.pop_back();
  EXPECT_EQ(http.raw_text, tok().decode(body));
  if (http.tool_calls.empty()) {
    EXPECT_EQ(http.content, http.raw_text);
  }
  EXPECT_EQ(http.finish_reason, direct.reason == policy::finish_reason::max_new_tokens ? "length"
                                : http.tool_calls.empty()                              ? "stop"
                                                                                       : "tool_calls");
  EXPECT_EQ(http.token_texts.size(), direct.tokens.size());
  EXPECT_EQ(http.completion_tokens, static_cast<int32_t>(direct.tokens.size()));
  EXPECT_EQ(http.prompt_tokens, static_cast<int32_t>(http.prompt_token_ids.size()));
}

// Removes the checkpoints when the binary ends.
class cleanup : public ::testing::Environment {
 public:
  void TearDown() override {
    std::error_code ec;
    if (made_work_dir) fs::remove_all(work_dir(), ec);
  }
};
const auto* const cleanup_registration = ::testing::AddGlobalTestEnvironment(new cleanup);

}  // namespace

TEST(serving_engine, http_returns_exactly_what_the_engine_samples_and_reload_switches_versions) {
  auto service = engine_chat_service::create(open_engine(model_a()), tok(), "tiny-qwen", policy::chat_format{}).value();
  auto server = openai_server::start(*service, {}).value();
  auto client = openai_client::create({.base_url = server->base_url(), .max_retries = 0}).value();
  auto direct = open_engine(model_a());

  for (auto [temperature, seed] : {std::pair{0.0f, uint64_t{5}}, std::pair{1.0f, uint64_t{77}}}) {
    const auto req = kernel_request(temperature, seed);
    auto http = client.chat(req);
    ASSERT_TRUE(http) << http.error().message;
    EXPECT_EQ(http->model, "tiny-qwen");
    EXPECT_EQ(http->policy_version, 0u);
    expect_same_as_engine(http.value(), run_direct(*direct, req), req);
  }

  ASSERT_TRUE(client.reload(model_b(), 1));
  ASSERT_TRUE(direct->load_weights(model_b(), 1));
  const auto req = kernel_request(0.0f, 5);
  auto after = client.chat(req);
  ASSERT_TRUE(after) << after.error().message;
  EXPECT_EQ(after->policy_version, 1u);
  expect_same_as_engine(after.value(), run_direct(*direct, req), req);

  auto older = client.reload(model_a(), 0);
  ASSERT_FALSE(older);
  EXPECT_EQ(older.error().code, errc::bad_request);
  const auto missing_dir = (work_dir() / "missing").string();
  auto missing = client.reload(missing_dir, 2);
  ASSERT_FALSE(missing);
  EXPECT_NE(missing.error().message.find(missing_dir), std::string::npos) << missing.error().message;
  EXPECT_EQ(client.chat(req)->policy_version, 1u);  // a failed reload changes nothing
}

TEST(serving_engine, a_prompt_over_the_context_is_a_clear_400) {
  auto service =
      engine_chat_service::create(open_engine(model_a(), 600), tok(), "tiny-qwen", policy::chat_format{}).value();
  auto server = openai_server::start(*service, {}).value();
  auto client = openai_client::create({.base_url = server->base_url()}).value();
  auto req = kernel_request(0.0f, 1);
  req.messages[1].content = std::string(2000, 'x');
  auto got = client.chat(req);
  ASSERT_FALSE(got);
  EXPECT_EQ(got.error().code, errc::bad_request);
  EXPECT_NE(got.error().message.find("the model's context is 600 tokens"), std::string::npos) << got.error().message;
  // A stop string ends generation early and is cut from the content. The stop string is a
  // printable token of a free run (random byte-level models write much invalid UTF-8).
  req = kernel_request(0.0f, 1);
  req.max_tokens = 40;
  auto free_run = client.chat(req);
  ASSERT_TRUE(free_run) << free_run.error().message;
  std::string stop;
  for (size_t i = 1; i + 1 < free_run->token_texts.size() && stop.empty(); ++i) {
    const auto& t = free_run->token_texts[i];
    if (!t.empty() && t.front() != '<' && std::all_of(t.begin(), t.end(), [](char c) { return c > ' ' && c < 127; }))
      stop = t;
  }
  if (stop.empty()) GTEST_SKIP() << "the free run has no printable token to stop on";
  req.stop = {stop};
  auto stopped = client.chat(req);
  ASSERT_TRUE(stopped) << stopped.error().message;
  EXPECT_LT(stopped->token_ids.size(), free_run->token_ids.size());
  EXPECT_EQ(stopped->content.find(stop), std::string::npos) << stopped->content;
  EXPECT_NE(stopped->raw_text.find(stop), std::string::npos) << stopped->raw_text;
  EXPECT_EQ(stopped->finish_reason, "stop");
}

TEST(serving_engine, renders_with_the_format_it_was_given_and_refuses_one_whose_end_of_turn_is_missing) {
  // The checkpoint's own template (here Qwen2.5's) decides the prompt, not the built-in ChatML.
  const auto qwen = policy::chat_format_of_family(policy::chat_family::qwen2_5);
  auto service = engine_chat_service::create(open_engine(model_a()), tok(), "tiny-qwen", qwen).value();
  const auto req = kernel_request(0.0f, 1);
  const std::vector<policy::chat_message> plain(req.messages.begin(), req.messages.end());
  const auto expected = tok().encode(policy::render_chat(qwen, plain, req.tools, true));
  EXPECT_EQ(service->prompt_tokens(req), expected);
  EXPECT_NE(expected, tok().encode(policy::render_chat(policy::chat_format{}, plain, req.tools, true)))
      << "the two formats render this request alike: the test shows nothing";
  // Llama 3.1 ends a turn with <|eot_id|>, which this tokenizer lacks.
  auto llama = engine_chat_service::create(open_engine(model_a()), tok(), "tiny",
                                           policy::chat_format_of_family(policy::chat_family::llama3_1));
  ASSERT_FALSE(llama);
  EXPECT_NE(llama.error().message.find("<|eot_id|>"), std::string::npos) << llama.error().message;
}
