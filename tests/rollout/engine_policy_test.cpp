// tests/rollout/engine_policy_test.cpp: the libtorch policy backend over a real engine (a tiny
// random Qwen2-shaped model and a byte-level tokenizer, both made here). A request comes back
// through the callback on the engine's thread with tokens, their log-probs and the decoded
// text; a script's turn is teacher-forced; bad requests, a missing script turn and a bad
// checkpoint are error values naming what is wrong.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <future>
#include <thread>

#include "rollout/engine_policy.hpp"
#include "tests/policy/model/random_checkpoint.hpp"
#include "tests/policy/text/byte_tokenizer_fixture.hpp"

namespace fs = std::filesystem;
using namespace caf_agent;
using messages::completion_finish;
using messages::generate_request;

namespace {

struct engine_policy_test : ::testing::Test {
  static inline fs::path dir;
  static inline std::shared_ptr<const policy::tokenizer> tok;
  static inline std::shared_ptr<policy::engine_service> engine;
  static inline int32_t im_end = -1;

  static void SetUpTestSuite() {
    dir = fs::temp_directory_path() / ("engine_policy_test_" + std::to_string(::getpid()));
    tok = std::make_shared<const policy::tokenizer>(policy::testing::tiny_tokenizer());
    im_end = *tok->token_to_id("<|im_end|>");
    const auto config = policy::test_support::tiny_qwen2_config(static_cast<int64_t>(tok->id_limit()), 1024);
    policy::test_support::write_random_checkpoint(config, dir / "v1", 1);
    policy::test_support::write_random_checkpoint(config, dir / "v2", 2);
    policy::service_options o;
    o.engine.model_dir = (dir / "v1").string();
    o.engine.max_batch = 4;
    o.engine.max_context = 1024;
    auto opened = policy::engine_service::open(o);
    ASSERT_TRUE(opened) << opened.error().message;
    engine = std::shared_ptr<policy::engine_service>(std::move(opened).value());
  }
  static void TearDownTestSuite() {
    engine.reset();
    std::error_code ec;
    fs::remove_all(dir, ec);
  }

  static generate_request request(uint64_t id, const std::string& prompt) {
    generate_request r;
    r.request_id = id;
    r.task_id = "relu";
    r.turn = 0;
    auto ids = tok->encode(prompt);
    r.prompt_tokens.assign(ids.begin(), ids.end());
    r.sampling.temperature = 0;
    r.sampling.max_new_tokens = 6;
    r.sampling.seed = 7;
    return r;
  }

  /// Submits `r` and waits for its reply; notes the thread the callback ran on.
  static rollout::backend_reply submit(rollout::policy_backend& b, generate_request r, std::thread::id* on = nullptr) {
    std::promise<rollout::backend_reply> answer;
    b.submit(std::move(r), [&](rollout::backend_reply reply) {
      if (on) *on = std::this_thread::get_id();
      answer.set_value(std::move(reply));
    });
    return answer.get_future().get();
  }
};

TEST_F(engine_policy_test, a_request_comes_back_on_the_engine_thread_with_tokens_logprobs_and_text) {
  auto b = rollout::make_engine_policy(engine, tok, im_end);
  EXPECT_EQ(b->mode(), rollout::backend_mode::asynchronous);
  std::thread::id on;
  auto reply = submit(*b, request(3, "hello world"), &on);
  auto& c = reply.completion;
  ASSERT_NE(c.finish_reason, completion_finish::error) << c.error;
  EXPECT_NE(on, std::this_thread::get_id()) << "the engine's thread calls back";
  EXPECT_EQ(c.request_id, 3u);
  ASSERT_FALSE(c.tokens.empty());
  EXPECT_LE(c.tokens.size(), 6u);
  EXPECT_EQ(c.logprobs.size(), c.tokens.size());
  EXPECT_EQ(c.text, tok->decode(c.tokens));
  EXPECT_GT(c.latency_us, 0);
  EXPECT_EQ(reply.delay.count(), 0);
  // Greedy with the same seed: the same tokens, through generate() (submit and wait) too.
  EXPECT_EQ(b->generate(request(3, "hello world")).completion.tokens, c.tokens);
  auto stats = b->stats();
  EXPECT_GE(stats.at("completed"), 2);
  EXPECT_EQ(stats.at("outstanding"), 0);
  // Every engine counter is exported under its field's name (policy/model/engine.hpp for_each_stat).
  EXPECT_GE(stats.at("prefill_passes"), 2);
  EXPECT_GT(stats.at("prefill_host_seconds"), 0);
  EXPECT_GT(stats.at("decode_steps"), 0);
  EXPECT_EQ(stats.at("wait_seconds"), 0);  // the CPU: no device to wait for
  EXPECT_EQ(stats.count("kv_blocks_kept"), 1u);
}

TEST_F(engine_policy_test, a_script_turn_is_teacher_forced_with_the_models_own_logprobs) {
  const auto script_path = dir / "script.jsonl";
  std::ofstream{script_path} << R"({"task_id": "relu", "turns": ["hello"]})"
                             << "\n";
  std::string error;
  std::shared_ptr<rollout::policy_backend> script =
      rollout::make_replay_policy(script_path.string(), 0, error, {tok, im_end});
  ASSERT_TRUE(script) << error;
  auto b = rollout::make_engine_policy(engine, tok, im_end, script);
  auto r = request(4, "write a kernel");
  r.sampling.max_new_tokens = 64;
  auto c = submit(*b, r).completion;
  ASSERT_NE(c.finish_reason, completion_finish::error) << c.error;
  auto expected = tok->encode("hello");
  std::vector<int32_t> forced(expected.begin(), expected.end());
  forced.push_back(im_end);
  EXPECT_EQ(c.tokens, forced);
  EXPECT_EQ(c.finish_reason, completion_finish::stop) << "the forced turn ends with its end-of-turn token";
  ASSERT_EQ(c.logprobs.size(), forced.size());
  for (float lp : c.logprobs) EXPECT_LT(lp, 0.0f) << "the model's log-prob, not the replay's 0";
  // A task the script has no turn for: an error naming the script, no engine call.
  auto other = request(5, "write a kernel");
  other.task_id = "softmax";
  auto missing = submit(*b, other).completion;
  EXPECT_EQ(missing.finish_reason, completion_finish::error);
  EXPECT_EQ(missing.error.rfind("policy.script: ", 0), 0u) << missing.error;
}

TEST_F(engine_policy_test, bad_requests_and_checkpoints_are_error_values) {
  auto b = rollout::make_engine_policy(engine, tok, im_end);
  generate_request text_only;
  text_only.request_id = 9;
  text_only.prompt_text = "no tokens";
  auto c = submit(*b, text_only).completion;
  EXPECT_EQ(c.finish_reason, completion_finish::error);
  EXPECT_EQ(c.request_id, 9u);
  EXPECT_NE(c.error.find("prompt_tokens"), std::string::npos) << c.error;
  // Token ids outside the vocabulary: the engine refuses the request at submit().
  auto bad = request(10, "x");
  bad.prompt_tokens = {1 << 30};
  auto refused = submit(*b, bad).completion;
  EXPECT_EQ(refused.finish_reason, completion_finish::error);
  EXPECT_EQ(refused.error.rfind("libtorch engine: ", 0), 0u) << refused.error;
  // A publication from a directory without a checkpoint: refused, the version stays.
  const auto before = engine->policy_version();
  EXPECT_NE(b->publish_weights((dir / "missing").string(), before + 1), "");
  EXPECT_EQ(engine->policy_version(), before);
}

TEST_F(engine_policy_test, a_publication_stages_the_new_version_for_the_next_request) {
  auto b = rollout::make_engine_policy(engine, tok, im_end);
  const auto next = engine->policy_version() + 1;
  EXPECT_EQ(b->publish_weights((dir / "v2").string(), next), "");
  EXPECT_EQ(b->weights_version(), next);
  auto c = submit(*b, request(11, "hello")).completion;
  ASSERT_NE(c.finish_reason, completion_finish::error) << c.error;
  EXPECT_EQ(c.policy_version, next);
  EXPECT_EQ(b->stats().at("policy_version"), double(next));
}

}  // namespace
