// Teacher forcing in the generation engine (generation_request::forced_tokens): the engine runs
// its passes over a script's tokens and reports the model's own log-probabilities of them.
// Shape legend: t positions, v vocabulary.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>

#include <ATen/ATen.h>

#include "policy/model/decoder.hpp"
#include "policy/model/engine.hpp"
#include "tests/policy/model/random_checkpoint.hpp"

namespace fs = std::filesystem;
using namespace caf_agent::policy;

namespace {

const std::string& model_dir() {
  static const std::string dir = test_support::write_random_checkpoint(
      test_support::tiny_qwen2_config(96, 64),
      fs::temp_directory_path() / ("policy_forced_test_" + std::to_string(::getpid())), 3);
  return dir;
}

std::unique_ptr<generation_engine> open_engine(int32_t max_batch) {
  engine_options o;
  o.model_dir = model_dir();
  o.max_batch = max_batch;
  auto engine = generation_engine::open(o);
  EXPECT_TRUE(engine) << (engine ? "" : engine.error().message);
  return std::move(engine.value());
}

generation_request forced(std::vector<int32_t> prompt, std::vector<int32_t> script, float temperature) {
  generation_request r;
  r.prompt = std::move(prompt);
  r.forced_tokens = std::move(script);
  r.max_new_tokens = 64;
  r.sampling.temperature = temperature;
  r.seed = 7;
  return r;
}

// log softmax(logits / T) of the full forward pass at each scripted position.
std::vector<float> reference_logprobs(const std::vector<int32_t>& prompt, const std::vector<int32_t>& script,
                                      float temperature) {
  auto model = decoder::load(model_dir(), torch::kCPU, torch::kFloat32);
  EXPECT_TRUE(model);
  std::vector<int64_t> seq(prompt.begin(), prompt.end());
  seq.insert(seq.end(), script.begin(), script.end());
  torch::NoGradGuard no_grad;
  auto logits_tv = model.value().forward(torch::tensor(seq).unsqueeze(0))[0];
  auto logp_tv = torch::log_softmax(logits_tv / (temperature > 0 ? temperature : 1.0f), -1);
  std::vector<float> out;
  for (size_t i = 0; i < script.size(); ++i)
    out.push_back(logp_tv[static_cast<int64_t>(prompt.size() + i - 1)][script[i]].item<float>());
  return out;
}

}  // namespace

TEST(forced_tokens, the_script_is_generated_with_the_models_own_logprobs_beside_sampled_rows) {
  const std::vector<int32_t> prompt = {5, 9, 2, 77}, script = {17, 3, 60, 44, 91, 12, 12, 8};
  auto engine = open_engine(3);
  generation_request sampled;  // shares every step with the forced row
  sampled.prompt = {1, 2, 3};
  sampled.max_new_tokens = 12;
  sampled.seed = 11;
  ASSERT_TRUE(engine->submit(sampled));
  const auto hot = engine->submit(forced(prompt, script, 0.7f)).value();
  const auto greedy = engine->submit(forced({40, 41}, {6, 6, 6}, 0.0f)).value();
  auto done = engine->run_until_idle();
  ASSERT_TRUE(done);
  ASSERT_EQ(done.value().size(), 3u);
  for (const auto& r : done.value()) {
    if (r.id == hot) {
      EXPECT_EQ(r.tokens, script);                         // never the draw
      EXPECT_EQ(r.reason, finish_reason::max_new_tokens);  // the script ran out
      auto want = reference_logprobs(prompt, script, 0.7f);
      ASSERT_EQ(r.logprobs.size(), want.size());
      for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(r.logprobs[i], want[i], 1e-4) << i;
    } else if (r.id == greedy) {
      EXPECT_EQ(r.tokens, (std::vector<int32_t>{6, 6, 6}));  // forcing wins over greedy too
      auto want = reference_logprobs({40, 41}, {6, 6, 6}, 0.0f);
      for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(r.logprobs[i], want[i], 1e-4) << i;
    } else {
      EXPECT_EQ(r.tokens.size(), 12u);  // the sampled row is unaffected
    }
  }
}

TEST(forced_tokens, a_stop_token_or_max_new_tokens_ends_the_script_early) {
  auto engine = open_engine(2);
  auto stop = forced({5, 6}, {10, 20, 30, 40}, 1.0f);
  stop.stop_token_ids = {30};
  const auto stop_id = engine->submit(stop).value();
  auto cap = forced({5, 6}, {10, 20, 30, 40}, 1.0f);
  cap.max_new_tokens = 2;
  ASSERT_TRUE(engine->submit(cap));
  auto done = engine->run_until_idle();
  ASSERT_TRUE(done);
  for (const auto& r : done.value()) {
    if (r.id == stop_id) {
      EXPECT_EQ(r.tokens, (std::vector<int32_t>{10, 20, 30}));
      EXPECT_EQ(r.reason, finish_reason::stop_token);
    } else {
      EXPECT_EQ(r.tokens, (std::vector<int32_t>{10, 20}));
      EXPECT_EQ(r.reason, finish_reason::max_new_tokens);
    }
  }
}

TEST(forced_tokens, ids_outside_the_vocabulary_are_refused) {
  auto engine = open_engine(1);
  auto r = forced({1}, {4, 96}, 1.0f);  // vocab is 96
  auto id = engine->submit(r);
  ASSERT_FALSE(id);
  EXPECT_NE(id.error().message.find("forced token id 96"), std::string::npos) << id.error().message;
  EXPECT_TRUE(engine->idle());
}
