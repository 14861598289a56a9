#pragma once
/// tests/policy/model/engine_helpers.hpp: what the generation engine's tests share: a tiny model
/// with room for long conversations, greedy requests, conversation tokens, running one request
/// and comparing two results.

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

#include "policy/model/engine.hpp"
#include "tests/policy/model/random_checkpoint.hpp"

namespace caf_agent::policy::test_support {

/// A tiny random Qwen2-shaped model with 1024 positions (written once per process).
inline const std::string& long_model() {
  static const std::string dir = write_random_checkpoint(
      tiny_qwen2_config(96, 1024),
      std::filesystem::temp_directory_path() / ("policy_engine_test_long_" + std::to_string(::getpid())), 4);
  return dir;
}

/// Another model of long_model()'s shape with other weights (new weights for a swap).
inline const std::string& long_model_b() {
  static const std::string dir = write_random_checkpoint(
      tiny_qwen2_config(96, 1024),
      std::filesystem::temp_directory_path() / ("policy_engine_test_long_b_" + std::to_string(::getpid())), 5);
  return dir;
}

/// A greedy request for `new_tokens` tokens.
inline generation_request greedy(std::vector<int32_t> prompt, int32_t new_tokens) {
  generation_request r;
  r.prompt = std::move(prompt);
  r.max_new_tokens = new_tokens;
  r.sampling.temperature = 0.0f;
  return r;
}

/// The observation of turn `turn` of conversation `who`: tokens no reply depends on.
inline std::vector<int32_t> observation(int who, int turn, int n = 8) {
  std::vector<int32_t> out;
  for (int i = 0; i < n; ++i) out.push_back(static_cast<int32_t>((who * 31 + turn * 7 + i * 3) % 90 + 3));
  return out;
}

/// Submits `r` alone and runs the engine until idle.
inline generation_result run_one(generation_engine& engine, generation_request r) {
  auto id = engine.submit(std::move(r));
  EXPECT_TRUE(id) << (id ? "" : id.error().message);
  auto done = engine.run_until_idle();
  EXPECT_TRUE(done && done.value().size() == 1);
  return done && !done.value().empty() ? done.value().front() : generation_result{};
}

/// The same tokens, and logprobs within `tolerance` (1e-4 by default: fp32, the same computation up
/// to summation order).
inline void expect_same(const generation_result& a, const generation_result& b, const std::string& where,
                        double tolerance = 1e-4) {
  EXPECT_EQ(a.tokens, b.tokens) << where;
  ASSERT_EQ(a.logprobs.size(), b.logprobs.size()) << where;
  for (size_t i = 0; i < a.logprobs.size(); ++i)
    EXPECT_NEAR(a.logprobs[i], b.logprobs[i], tolerance) << where << " token " << i;
}

}  // namespace caf_agent::policy::test_support
