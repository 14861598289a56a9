// Unit tests of the generation engine: KV-cache decoding against the plain forward pass,
// continuous batching, sampling, stop conditions, request validation and weight swaps.
// Shape legend: b batch, t positions, v vocabulary.
#include <gtest/gtest.h>

#include <algorithm>
#include <condition_variable>
#include <filesystem>
#include <map>
#include <mutex>
#include <thread>

#include <ATen/ATen.h>

#include "policy/model/decoder.hpp"
#include "policy/model/engine.hpp"
#include "policy/model/engine_service.hpp"
#include "tests/policy/model/engine_helpers.hpp"
#include "tests/policy/model/random_checkpoint.hpp"

namespace fs = std::filesystem;
using namespace caf_agent::policy;
using test_support::expect_same;
using test_support::greedy;
using test_support::observation;
using test_support::run_one;

namespace {

model_config tiny_config() {
  return test_support::tiny_qwen2_config(96, 64);
}

// A random Qwen2-shaped checkpoint in a fresh directory.
std::string make_model(const std::string& name, uint64_t seed) {
  return test_support::write_random_checkpoint(
      tiny_config(), fs::temp_directory_path() / ("policy_engine_test_" + name + "_" + std::to_string(::getpid())),
      seed);
}

const std::string& model_a() {
  static const std::string dir = make_model("a", 1);
  return dir;
}

std::unique_ptr<generation_engine> open_engine(const std::string& dir, int32_t max_batch, int32_t context = 0) {
  engine_options o;
  o.model_dir = dir;
  o.max_batch = max_batch;
  o.max_context = context;
  auto engine = generation_engine::open(o);
  EXPECT_TRUE(engine) << (engine ? "" : engine.error().message);
  return std::move(engine.value());
}

std::vector<int32_t> run_alone(const std::string& dir, generation_request r) {
  auto engine = open_engine(dir, 1);
  EXPECT_TRUE(engine->submit(std::move(r)));
  auto done = engine->run_until_idle();
  EXPECT_TRUE(done && done.value().size() == 1);
  return done.value().front().tokens;
}

}  // namespace

TEST(engine, greedy_decoding_with_the_kv_cache_matches_the_full_forward_pass) {
  auto tokens = run_alone(model_a(), greedy({5, 9, 2, 77}, 8));
  auto model = decoder::load(model_a(), torch::kCPU, torch::kFloat32);
  ASSERT_TRUE(model);
  std::vector<int64_t> seq = {5, 9, 2, 77};
  for (int i = 0; i < 8; ++i) {
    auto logits_btv = model.value().forward(torch::tensor(seq).unsqueeze(0));
    seq.push_back(logits_btv[0][-1].argmax().item<int64_t>());
  }
  EXPECT_EQ(std::vector<int64_t>(seq.begin() + 4, seq.end()), std::vector<int64_t>(tokens.begin(), tokens.end()));
}

// engine_options::report_logits: each generated token's logit (before the temperature), the
// forward pass's at the position that drew it, plainly and overlapped; tokens and logprobs are
// those of an engine that does not report them, whose results carry none.
TEST(engine, reported_logits_are_the_forward_passes_at_each_drawn_token) {
  auto model = decoder::load(model_a(), torch::kCPU, torch::kFloat32);
  ASSERT_TRUE(model);
  for (bool overlap : {false, true}) {
    std::vector<generation_result> runs[2];
    for (bool report : {false, true}) {
      engine_options o;
      o.model_dir = model_a();
      o.max_batch = 2;
      o.overlap = overlap;
      o.report_logits = report;
      auto engine = generation_engine::open(o);
      ASSERT_TRUE(engine) << engine.error().message;
      auto hot = greedy({7, 3, 50, 11, 2}, 9);
      hot.sampling.temperature = 0.7f;
      hot.seed = 4;
      for (auto r : {greedy({5, 9, 2, 77}, 12), hot}) ASSERT_TRUE(engine.value()->submit(std::move(r)));
      auto done = engine.value()->run_until_idle();
      ASSERT_TRUE(done && done.value().size() == 2);
      runs[report] = done.value();
      std::sort(runs[report].begin(), runs[report].end(), [](auto& a, auto& b) { return a.id < b.id; });
    }
    const std::vector<std::vector<int64_t>> prompts = {{5, 9, 2, 77}, {7, 3, 50, 11, 2}};
    for (size_t r = 0; r < 2; ++r) {
      const auto &plain = runs[0][r], &reported = runs[1][r];
      const std::string where = std::string(overlap ? "overlapped" : "plain") + " request " + std::to_string(r);
      EXPECT_TRUE(plain.logits.empty()) << where;
      EXPECT_EQ(plain.tokens, reported.tokens) << where;
      EXPECT_EQ(plain.logprobs, reported.logprobs) << where;
      ASSERT_EQ(reported.logits.size(), reported.tokens.size()) << where;
      std::vector<int64_t> seq = prompts[r];
      seq.insert(seq.end(), reported.tokens.begin(), reported.tokens.end());
      auto logits_tv = model.value().forward(torch::tensor(seq).unsqueeze(0))[0];
      for (size_t i = 0; i < reported.tokens.size(); ++i) {
        const int64_t at = static_cast<int64_t>(prompts[r].size() + i) - 1;
        EXPECT_NEAR(reported.logits[i], logits_tv[at][reported.tokens[i]].item<float>(), 1e-4)
            << where << " token " << i;
      }
    }
  }
}

// fuse_projections (what the engine runs): one q/k/v GEMM and one gate/up GEMM per block, q and k
// rotated together. Same logits as the separate weights on every path (forward, prefill, decode),
// for Qwen2 (biases) and Qwen3 (q/k norms, no biases) shapes; assign() writes into the fused
// storage; training's packed_block keeps the separate weights.
TEST(decoder, fused_projections_give_the_same_logits_and_take_new_weights_in_place) {
  auto qwen3 = test_support::tiny_qwen2_config(96, 64);
  qwen3.family = model_family::qwen3;
  qwen3.attention_bias = false;
  qwen3.qk_norm = true;
  qwen3.mlp_bias = true;
  for (const auto& config : {tiny_config(), qwen3}) {
    torch::manual_seed(7);
    auto random_tensors = [&] {
      tensor_map t;
      for (const auto& [key, shape] : expected_parameter_shapes(config))
        t[key] = key.find("norm") != std::string::npos ? 1 + 0.1 * torch::randn(shape) : 0.3 * torch::randn(shape);
      return t;
    };
    const auto tensors = random_tensors();
    auto plain = decoder::from_tensors(config, tensors, torch::kCPU, torch::kFloat32);
    auto fused = decoder::from_tensors(config, tensors, torch::kCPU, torch::kFloat32);
    ASSERT_TRUE(plain && fused);
    fused.value().fuse_projections();
    ASSERT_TRUE(fused.value().fused());
    EXPECT_EQ(fused.value().named_parameters().size(), plain.value().named_parameters().size());
    EXPECT_TRUE(fused.value().layer(0).qkv_w.defined() && fused.value().layer(0).gate_up_w.defined());
    auto tokens_1t = torch::tensor(std::vector<int64_t>{5, 9, 2, 77, 13, 40}).unsqueeze(0);
    // Prefill 4 tokens into slot 1 and decode two more, on each decoder's own cache.
    auto cached = [&](const decoder& m) {
      auto cache = kv_cache::allocate(config, 2, 16, torch::kCPU, torch::kFloat32);
      std::vector<torch::Tensor> out{m.prefill(tokens_1t[0].narrow(0, 0, 4), 1, cache)};
      for (int64_t i = 4; i < 6; ++i)
        out.push_back(m.decode(torch::tensor({int64_t{0}, tokens_1t[0][i].item<int64_t>()}),
                               torch::tensor({int64_t{15}, i}), i + 1, cache)[1]);
      return torch::stack(out);
    };
    auto check = [&](const char* when) {
      EXPECT_TRUE(torch::allclose(fused.value().forward(tokens_1t), plain.value().forward(tokens_1t), 1e-5, 1e-5))
          << when;
      EXPECT_TRUE(torch::allclose(cached(fused.value()), cached(plain.value()), 1e-5, 1e-5)) << when;
    };
    check("loaded");
    const auto next = random_tensors();
    ASSERT_TRUE(plain.value().assign(next));
    ASSERT_TRUE(fused.value().assign(next));
    check("after assign");
    // The fused storage itself holds the new weights.
    const std::string a = "model.layers.0.self_attn.";
    EXPECT_TRUE(torch::equal(
        fused.value().layer(0).qkv_w,
        torch::cat({next.at(a + "q_proj.weight"), next.at(a + "k_proj.weight"), next.at(a + "v_proj.weight")})));
    auto x_1td = torch::randn({1, 6, config.hidden_size});
    auto positions_1t = torch::arange(6).unsqueeze(0);
    EXPECT_TRUE(torch::allclose(fused.value().packed_block(fused.value().layer(1), x_1td, positions_1t, {0, 2, 6}),
                                plain.value().packed_block(plain.value().layer(1), x_1td, positions_1t, {0, 2, 6}),
                                1e-5, 1e-5));
  }
}

TEST(engine, continuous_batching_gives_the_same_tokens_as_running_alone) {
  std::vector<generation_request> requests = {greedy({1, 2, 3}, 3), greedy({40, 41, 42, 43, 44, 45, 46}, 9),
                                              greedy({7}, 5), greedy({8, 8, 8, 8}, 2), greedy({60, 61}, 7)};
  auto engine = open_engine(model_a(), 2);
  std::map<uint64_t, size_t> index;
  for (size_t i = 0; i < requests.size(); ++i) index[engine->submit(requests[i]).value()] = i;
  std::map<size_t, std::vector<int32_t>> got;
  std::map<size_t, int> finish_step;
  for (int step = 0; !engine->idle(); ++step) {
    EXPECT_LE(engine->running(), 2u);
    auto done = engine->step();
    ASSERT_TRUE(done);
    for (auto& r : done.value()) {
      got[index[r.id]] = r.tokens;
      finish_step[index[r.id]] = step;
      EXPECT_EQ(r.reason, finish_reason::max_new_tokens);
    }
  }
  ASSERT_EQ(got.size(), requests.size());
  for (size_t i = 0; i < requests.size(); ++i) EXPECT_EQ(got[i], run_alone(model_a(), requests[i])) << i;
  EXPECT_NE(finish_step[0], finish_step[1]);  // sequences left the batch at different steps
}

TEST(sampling, top_k_one_equals_greedy) {
  auto r = greedy({3, 4, 5}, 10);
  auto want = run_alone(model_a(), r);
  r.sampling = sampling_params{1.0f, 1.0f, 1};
  r.seed = 99;
  EXPECT_EQ(run_alone(model_a(), r), want);
}

TEST(sampling, a_seed_reproduces_tokens_whatever_else_is_in_the_batch) {
  generation_request r;
  r.prompt = {10, 20, 30};
  r.max_new_tokens = 12;
  r.sampling = sampling_params{1.0f, 0.95f, 40};
  r.seed = 1234;
  auto alone = run_alone(model_a(), r);
  auto engine = open_engine(model_a(), 4);
  auto other = r;
  other.seed = 5;
  ASSERT_TRUE(engine->submit(other));
  auto id = engine->submit(r).value();
  ASSERT_TRUE(engine->submit(greedy({1, 1}, 4)));
  auto done = engine->run_until_idle();
  ASSERT_TRUE(done);
  for (const auto& res : done.value()) {
    if (res.id == id) {
      EXPECT_EQ(res.tokens, alone);
    }
    if (res.id == 1) {
      EXPECT_NE(res.tokens, alone);  // a different seed draws differently
    }
  }
}

TEST(engine, stop_tokens_stop_strings_and_context_limit_end_sequences) {
  auto free_run = run_alone(model_a(), greedy({2, 3}, 6));
  auto r = greedy({2, 3}, 6);
  r.stop_token_ids = {free_run[2]};
  auto engine = open_engine(model_a(), 2, /*context=*/6);
  ASSERT_TRUE(engine->submit(r));
  auto s = greedy({2, 3}, 6);
  s.stop_check = [](const std::vector<int32_t>& generated) { return generated.size() == 2; };
  ASSERT_TRUE(engine->submit(s));
  auto done = engine->run_until_idle();
  ASSERT_TRUE(done);
  ASSERT_EQ(done.value().size(), 2u);
  for (const auto& res : done.value()) {
    if (res.id == 1) {
      const auto first = std::find(free_run.begin(), free_run.end(), free_run[2]) - free_run.begin();
      EXPECT_EQ(res.reason, finish_reason::stop_token);
      EXPECT_EQ(res.tokens, std::vector<int32_t>(free_run.begin(), free_run.begin() + first + 1));
    } else {
      EXPECT_EQ(res.reason, finish_reason::stop_string);
      EXPECT_EQ(res.tokens.size(), 2u);
    }
  }
  ASSERT_TRUE(engine->submit(greedy({2, 3}, 20)));
  done = engine->run_until_idle();
  ASSERT_TRUE(done);
  EXPECT_EQ(done.value().front().reason, finish_reason::context_limit);
  EXPECT_EQ(done.value().front().tokens.size(), 4u);  // 2 prompt + 4 generated = context 6
}

TEST(engine, bad_requests_are_errors) {
  auto engine = open_engine(model_a(), 1, 8);
  EXPECT_FALSE(engine->submit(greedy({}, 4)));
  EXPECT_FALSE(engine->submit(greedy({1, 2, 3, 4, 5, 6, 7, 8}, 4)));  // no room in context 8
  EXPECT_FALSE(engine->submit(greedy({96}, 4)));                      // vocab is 96
  auto r = greedy({1}, 4);
  r.sampling.top_p = 0.0f;
  EXPECT_FALSE(engine->submit(r));
  EXPECT_TRUE(engine->idle());
}

TEST(engine, weight_swap_happens_at_a_step_boundary) {
  static const std::string model_b = make_model("b", 2);
  auto old_run = run_alone(model_a(), greedy({4, 5, 6}, 6));
  auto new_run = run_alone(model_b, greedy({9, 9}, 4));
  auto engine = open_engine(model_a(), 2);
  auto spanning = engine->submit(greedy({4, 5, 6}, 6)).value();
  ASSERT_TRUE(engine->step());
  ASSERT_TRUE(engine->step());
  EXPECT_FALSE(engine->load_weights(make_model("bad", 3) + "/missing", 1));
  ASSERT_TRUE(engine->load_weights(model_b, 1));
  EXPECT_EQ(engine->policy_version(), 1u);
  auto fresh = engine->submit(greedy({9, 9}, 4)).value();  // admitted in the swapping step
  auto done = engine->run_until_idle();
  ASSERT_TRUE(done);
  for (const auto& res : done.value()) {
    if (res.id == fresh) {
      EXPECT_EQ(res.tokens, new_run);  // entirely new weights
      EXPECT_EQ(res.policy_version, 1u);
    }
    if (res.id == spanning) {
      EXPECT_EQ(std::vector<int32_t>(res.tokens.begin(), res.tokens.begin() + 2),
                std::vector<int32_t>(old_run.begin(), old_run.begin() + 2));  // before the swap
      EXPECT_EQ(res.policy_version, 0u);
      EXPECT_EQ(res.last_policy_version, 1u);
    }
  }
  EXPECT_FALSE(engine->load_weights(model_b, 0));  // older than the current version
}

// -- prefix cache: an episode's keys kept between its turns -----------------

namespace {

// A model with room for long conversations (the default tiny one has 64 positions).
const std::string& model_long() {
  return test_support::long_model();
}

std::unique_ptr<generation_engine> open_cached(const std::string& dir, int32_t max_batch, bool prefix_cache) {
  engine_options o;
  o.model_dir = dir;
  o.max_batch = max_batch;
  o.prefix_cache = prefix_cache;
  auto engine = generation_engine::open(o);
  EXPECT_TRUE(engine) << (engine ? "" : engine.error().message);
  return std::move(engine.value());
}

}  // namespace

TEST(prefix_cache, a_conversation_prefills_only_its_new_tokens_and_matches_a_full_reprefill) {
  auto cached = open_cached(model_long(), 2, true);
  auto plain = open_cached(model_long(), 2, false);
  std::vector<int32_t> history = observation(0, 0, 12);
  uint64_t plain_prompt_tokens = 0;
  size_t final_length = 0;
  for (int turn = 0; turn < 20; ++turn) {
    auto a = run_one(*cached, greedy(history, 6));
    auto b = run_one(*plain, greedy(history, 6));
    expect_same(a, b, "turn " + std::to_string(turn));
    plain_prompt_tokens += history.size();
    final_length = history.size() + a.tokens.size();
    history.insert(history.end(), a.tokens.begin(), a.tokens.end());
    auto obs = observation(0, turn + 1);
    history.insert(history.end(), obs.begin(), obs.end());
  }
  const auto s = cached->stats();
  // Every key of the final conversation was computed once (the last sampled token's is never needed).
  EXPECT_EQ(s.prefilled_tokens + s.decoded_tokens, final_length - 1);
  EXPECT_EQ(s.prefix_hits, 19u);
  EXPECT_EQ(s.evictions, 0u);
  EXPECT_EQ(plain->stats().prefilled_tokens, plain_prompt_tokens);  // re-prefilling: quadratic in turns
  EXPECT_EQ(plain->stats().reused_tokens, 0u);
  EXPECT_GT(plain_prompt_tokens, 5 * s.prefilled_tokens);
}

TEST(prefix_cache, a_continued_and_a_new_prompt_prefilled_in_one_pass_equal_each_alone) {
  // One step admits both: turn 2 of conversation A (its first turn's keys cached, so it prefills
  // from an offset) and a fresh prompt B; the engine prefills them in one packed pass.
  auto engine = open_cached(model_long(), 2, true);
  auto turn1 = greedy(observation(1, 0, 20), 6);
  ASSERT_TRUE(engine->submit(turn1));
  auto first = engine->run_until_idle();
  ASSERT_TRUE(first && first.value().size() == 1);
  auto turn2 = turn1;
  turn2.prompt.insert(turn2.prompt.end(), first.value()[0].tokens.begin(), first.value()[0].tokens.end());
  const auto obs = observation(1, 1, 30);
  turn2.prompt.insert(turn2.prompt.end(), obs.begin(), obs.end());
  auto fresh = greedy(observation(2, 0, 45), 7);
  fresh.sampling.temperature = 1.0f;
  fresh.seed = 9;
  const auto before = engine->stats();
  auto id_a = engine->submit(turn2);
  auto id_b = engine->submit(fresh);
  ASSERT_TRUE(id_a && id_b);
  auto step = engine->step();  // both admitted and prefilled here
  ASSERT_TRUE(step) << step.error().message;
  EXPECT_EQ(engine->stats().prefilled_tokens - before.prefilled_tokens, turn2.prompt.size() - 25 + fresh.prompt.size());
  EXPECT_EQ(engine->stats().prefix_hits - before.prefix_hits, 1u);
  auto rest = engine->run_until_idle();
  ASSERT_TRUE(rest) << rest.error().message;
  std::map<uint64_t, generation_result> got;
  for (auto& r : step.value()) got[r.id] = r;
  for (auto& r : rest.value()) got[r.id] = r;
  ASSERT_EQ(got.size(), 2u);
  for (auto [id, request] : {std::pair{id_a.value(), turn2}, std::pair{id_b.value(), fresh}}) {
    auto alone = open_cached(model_long(), 1, false);
    ASSERT_TRUE(alone->submit(request));
    auto r = alone->run_until_idle();
    ASSERT_TRUE(r && r.value().size() == 1);
    expect_same(got[id], r.value()[0], "request " + std::to_string(id));
  }
}

TEST(prefix_cache, evicted_conversations_come_back_with_the_same_tokens) {
  // One slot, two conversations taking turns: each turn evicts the other's kept keys.
  auto cached = open_cached(model_long(), 1, true);
  auto plain = open_cached(model_long(), 1, false);
  std::vector<std::vector<int32_t>> history = {observation(1, 0, 10), observation(2, 0, 10)};
  for (int turn = 0; turn < 6; ++turn) {
    for (int who = 0; who < 2; ++who) {
      auto a = run_one(*cached, greedy(history[who], 5));
      auto b = run_one(*plain, greedy(history[who], 5));
      expect_same(a, b, "conversation " + std::to_string(who) + " turn " + std::to_string(turn));
      history[who].insert(history[who].end(), a.tokens.begin(), a.tokens.end());
      auto obs = observation(who + 1, turn + 1);
      history[who].insert(history[who].end(), obs.begin(), obs.end());
    }
  }
  EXPECT_GE(cached->stats().evictions, 11u);
  EXPECT_EQ(cached->kept_prefixes(), 1u);
}

TEST(prefix_cache, a_shared_prefix_is_copied_into_a_free_slot_and_sampling_is_unchanged) {
  auto cached = open_cached(model_long(), 2, true);
  auto plain = open_cached(model_long(), 2, false);
  std::vector<int32_t> system = observation(5, 0, 30);
  auto first = system, second = system;
  first.push_back(11);
  second.push_back(12);
  expect_same(run_one(*cached, greedy(first, 4)), run_one(*plain, greedy(first, 4)), "first");
  generation_request sampled = greedy(second, 8);
  sampled.sampling.temperature = 1.0f;
  sampled.seed = 77;
  expect_same(run_one(*cached, sampled), run_one(*plain, sampled), "second, sampled");
  EXPECT_EQ(cached->stats().copied_tokens, 30u);  // the shared 30 tokens, not recomputed
  EXPECT_EQ(cached->kept_prefixes(), 2u);         // the first conversation's keys stay too
}

TEST(prefix_cache, new_weights_drop_every_kept_prefix) {
  const std::string& model_b = test_support::long_model_b();
  auto cached = open_cached(model_long(), 2, true);
  std::vector<int32_t> history = observation(3, 0, 16);
  auto first = run_one(*cached, greedy(history, 5));
  history.insert(history.end(), first.tokens.begin(), first.tokens.end());
  ASSERT_TRUE(cached->load_weights(model_b, 1));
  auto after = run_one(*cached, greedy(history, 5));
  auto fresh = open_cached(model_b, 1, false);
  expect_same(after, run_one(*fresh, greedy(history, 5)), "after the swap");
  EXPECT_EQ(after.policy_version, 1u);
  EXPECT_EQ(cached->stats().invalidations, 1u);
  EXPECT_EQ(cached->stats().reused_tokens, 0u);  // keys of the old weights were not used
}

TEST(chunked_prefill, a_long_prompt_is_prefilled_over_steps_while_others_decode) {
  engine_options o;
  o.model_dir = model_long();
  o.max_batch = 2;
  o.prefill_chunk = 16;
  auto chunked = generation_engine::open(o).value();
  o.prefill_chunk = 0;
  auto whole = generation_engine::open(o).value();
  const auto short_request = greedy(observation(7, 0, 5), 30);
  const auto long_request = greedy(observation(8, 0, 100), 6);
  auto reference_short = run_one(*whole, short_request);
  auto reference_long = run_one(*whole, long_request);

  auto short_id = chunked->submit(short_request).value();
  ASSERT_TRUE(chunked->step());  // the short prompt is prefilled and starts decoding
  auto long_id = chunked->submit(long_request).value();
  std::map<uint64_t, generation_result> got;
  std::map<uint64_t, int> finished_at;
  uint64_t prefilled = chunked->stats().prefilled_tokens;
  double prefill_host = chunked->stats().prefill_host_seconds;
  EXPECT_GT(prefill_host, 0.0);  // the short prompt's pass
  for (int step = 1; !chunked->idle(); ++step) {
    auto done = chunked->step();
    ASSERT_TRUE(done);
    const auto now = chunked->stats();
    EXPECT_LE(now.prefilled_tokens - prefilled, 16u) << "step " << step;
    // Host time is counted in the steps that prefill, and only in them.
    if (now.prefilled_tokens > prefilled)
      EXPECT_GT(now.prefill_host_seconds, prefill_host) << "step " << step;
    else
      EXPECT_EQ(now.prefill_host_seconds, prefill_host) << "step " << step;
    EXPECT_EQ(now.wait_seconds, 0.0) << "the CPU never waits for a device";
    prefill_host = now.prefill_host_seconds;
    prefilled = now.prefilled_tokens;
    for (auto& r : done.value()) {
      finished_at[r.id] = step;
      got[r.id] = std::move(r);
    }
  }
  expect_same(got[short_id], reference_short, "short");
  expect_same(got[long_id], reference_long, "long");
  // The short sequence gained a token in every step: 30 tokens in 30 steps (the first at step 0).
  EXPECT_EQ(finished_at[short_id], 29);
  // The long prompt took ceil(100 / 16) = 7 steps of prefill before its 6 tokens.
  EXPECT_EQ(finished_at[long_id], 7 + 5);
  EXPECT_FALSE(generation_engine::open([&] {
    auto bad = o;
    bad.prefill_chunk = -1;
    return bad;
  }()));
}

namespace {

// Prompts submitted one step apart while a sequence decodes (engine `o`, prefill_chunk 64): with
// prefill_wait_steps 3 the first waits for the next two and one pass prefills the three; the
// tokens are those of an engine that prefills each as it arrives.
void expect_held_prefill_passes(const engine_options& o) {
  const auto runner = greedy(observation(1, 0, 6), 24);
  const std::vector<generation_request> arrivals = {greedy(observation(2, 0, 9), 5), greedy(observation(3, 0, 7), 5),
                                                    greedy(observation(4, 0, 8), 5)};
  struct run {
    std::map<uint64_t, generation_result> results;
    engine_stats stats;
  };
  const auto play = [&](int32_t wait_steps) {
    auto opts = o;
    opts.prefill_wait_steps = wait_steps;
    auto engine = generation_engine::open(opts).value();
    run out;
    EXPECT_TRUE(engine->submit(runner));
    EXPECT_TRUE(engine->step());  // the runner is prefilled (nothing decodes: no wait) and decodes
    for (int step = 1; !engine->idle(); ++step) {
      if (step <= static_cast<int>(arrivals.size()))
        EXPECT_TRUE(engine->submit(arrivals[static_cast<size_t>(step - 1)]));
      auto done = engine->step();
      EXPECT_TRUE(done);
      for (auto& r : done.value()) out.results[r.id] = std::move(r);
    }
    out.stats = engine->stats();
    EXPECT_EQ(out.results.size(), 1 + arrivals.size());
    return out;
  };
  const run each = play(0), held = play(3);
  EXPECT_EQ(each.stats.prefill_passes, 1 + arrivals.size());  // the runner's, then one an arrival
  EXPECT_EQ(each.stats.prefill_holds, 0u);
  // Held: the first arrival (step 1) is held in steps 1 to 3; at step 4 it has waited 3 steps and
  // the three arrivals go in one pass.
  EXPECT_EQ(held.stats.prefill_passes, 2u);
  EXPECT_EQ(held.stats.prefill_holds, 3u);
  EXPECT_EQ(held.stats.prefilled_tokens, each.stats.prefilled_tokens);
  for (const auto& [id, result] : each.results) {
    ASSERT_TRUE(held.results.count(id)) << id;
    expect_same(held.results.at(id), result, "request " + std::to_string(id));
  }
}

}  // namespace

TEST(chunked_prefill, prompts_arriving_while_others_decode_wait_for_one_fuller_pass) {
  for (const bool paged : {false, true})
    for (const bool overlap : {false, true}) {
      SCOPED_TRACE(std::string(paged ? "paged" : "slots") + (overlap ? ", overlapped" : ""));
      engine_options o;
      o.model_dir = model_long();
      o.max_batch = 4;
      o.prefill_chunk = 64;
      o.overlap = overlap;
      if (paged) {
        o.kv_layout = kv_layout_kind::paged;
        o.kv_block_size = 8;
      }
      expect_held_prefill_passes(o);
    }
  EXPECT_FALSE(generation_engine::open([] {
    engine_options bad;
    bad.model_dir = model_long();
    bad.prefill_wait_steps = -1;
    return bad;
  }()));
}

TEST(engine, matmul_decode_attention_equals_sdpa_over_rows_of_different_lengths) {
  for (const model_dtype dtype : {model_dtype::float32, model_dtype::bfloat16}) {
    const std::string name = to_string(dtype);
    engine_options o;
    o.model_dir = model_long();
    o.max_batch = 3;
    o.dtype = dtype;
    auto sdpa = generation_engine::open(o).value();
    o.cache_attention = cache_attention_choice::matmul;
    auto matmul = generation_engine::open(o).value();
    std::vector<generation_request> requests = {greedy(observation(9, 0, 3), 12), greedy(observation(9, 1, 40), 9),
                                                greedy(observation(9, 2, 17), 15)};
    requests[2].sampling.temperature = 1.0f;
    requests[2].seed = 5;
    std::map<uint64_t, generation_result> a, b;
    for (const auto& r : requests) {
      (void)sdpa->submit(r);
      (void)matmul->submit(r);
    }
    auto ra = sdpa->run_until_idle();
    ASSERT_TRUE(ra) << name << ": " << ra.error().message;
    auto rb = matmul->run_until_idle();
    ASSERT_TRUE(rb) << name << ": " << rb.error().message;
    for (auto& r : ra.value()) a[r.id] = r;
    for (auto& r : rb.value()) b[r.id] = r;
    ASSERT_EQ(a.size(), 3u);
    const bool exact = dtype == model_dtype::float32;
    for (const auto& [id, r] : a) {
      if (exact) {
        expect_same(r, b[id], name + " request " + std::to_string(id));
      } else {
        // bf16: rounding differs between the kernels, so tokens may part after a near tie; up to
        // there (at least the first decoded tokens) the logprobs agree to bf16 precision.
        size_t same = 0;
        while (same < r.tokens.size() && same < b[id].tokens.size() && r.tokens[same] == b[id].tokens[same]) ++same;
        EXPECT_GE(same, 4u) << name << " request " << id;
        for (size_t i = 0; i < same; ++i)
          EXPECT_NEAR(r.logprobs[i], b[id].logprobs[i], 0.1) << name << " request " << id << " token " << i;
      }
    }
  }
}

namespace {

// An engine opened with `o` (on model_a) greedily decodes one request as the default engine does.
/// open(o) fails with a message holding `message`.
void expect_refused(const engine_options& o, const std::string& message) {
  auto refused = generation_engine::open(o);
  ASSERT_FALSE(refused) << message;
  EXPECT_NE(refused.error().message.find(message), std::string::npos) << refused.error().message;
}

void expect_default_tokens(const engine_options& o) {
  auto engine = generation_engine::open(o);
  ASSERT_TRUE(engine) << engine.error().message;
  ASSERT_TRUE(engine.value()->submit(greedy({5, 9, 2, 77}, 8)));
  auto done = engine.value()->run_until_idle();
  ASSERT_TRUE(done && done.value().size() == 1);
  EXPECT_EQ(done.value().front().tokens, run_alone(model_a(), greedy({5, 9, 2, 77}, 8)));
}

}  // namespace

TEST(engine, flash_cache_attention_is_refused_where_it_cannot_run_and_auto_falls_back) {
  engine_options o;
  o.model_dir = model_a();
  o.max_batch = 2;
  o.cache_attention =
      cache_attention_choice::flash;  // CPU, float32: the flash kernel exists only on CUDA in half precision
  auto refused = generation_engine::open(o);
  ASSERT_FALSE(refused);
  EXPECT_NE(refused.error().message.find("cache_attention 'flash' needs a CUDA device"), std::string::npos)
      << refused.error().message;
  o.cache_attention = cache_attention_choice::automatic;  // sdpa here: the same tokens as the default engine
  expect_default_tokens(o);
}

TEST(engine, negative_flash_decode_shares_are_refused_and_shares_leave_sdpa_alone) {
  engine_options o;
  o.model_dir = model_a();
  o.max_batch = 2;
  o.flash_decode_shares = -1;
  auto refused = generation_engine::open(o);
  ASSERT_FALSE(refused);
  EXPECT_NE(refused.error().message.find("flash_decode_shares must be >= 0, got -1"), std::string::npos)
      << refused.error().message;
  for (int32_t shares : {0, 64}) {  // only flash decode steps are cut; sdpa here gives the default's tokens
    o.flash_decode_shares = shares;
    expect_default_tokens(o);
  }
}

TEST(engine, decode_gemv_and_mma_rows_out_of_range_are_refused_and_leave_the_cpu_alone) {
  engine_options o;
  o.model_dir = model_a();
  o.max_batch = 2;
  for (int32_t rows : {-1, 9}) {
    o.decode_gemv_rows = rows;
    expect_refused(o, "decode_gemv_rows must be in 0..8, got " + std::to_string(rows));
  }
  o.decode_gemv_rows = 1;
  for (int32_t rows : {-1, 65}) {
    o.decode_mma_rows = rows;
    expect_refused(o, "decode_mma_rows must be in 0..64, got " + std::to_string(rows));
  }
  // The matrix-vector kernels run on CUDA only, the tensor-core ones on CUDA in bf16 / fp16, and
  // programmatic launch is a launch attribute of the CUDA kernels: the CPU decodes as the default.
  for (int32_t rows : {0, 8}) {
    o.decode_gemv_rows = rows;
    o.decode_mma_rows = rows == 0 ? 0 : 64;
    expect_default_tokens(o);
  }
  o.decode_gemv_rows = 1;
  o.programmatic_launch = false;
  expect_default_tokens(o);
}

// -- engine_service: the engine on its own thread ---------------------------

namespace {

struct collected {
  std::mutex mtx;
  std::condition_variable cv;
  std::map<int, generation_result> results;
  std::map<int, std::string> errors;
  void add(int key, generation_result r, std::string error) {
    std::lock_guard lock(mtx);
    if (error.empty())
      results[key] = std::move(r);
    else
      errors[key] = std::move(error);
    cv.notify_all();
  }
  bool wait_for(size_t n) {
    std::unique_lock lock(mtx);
    return cv.wait_for(lock, std::chrono::seconds(60), [&] { return results.size() + errors.size() >= n; });
  }
};

std::unique_ptr<engine_service> open_service(const std::string& dir, int32_t max_batch, int32_t max_queued) {
  service_options o;
  o.engine.model_dir = dir;
  o.engine.max_batch = max_batch;
  o.max_queued = max_queued;
  auto s = engine_service::open(o);
  EXPECT_TRUE(s) << (s ? "" : s.error().message);
  return std::move(s.value());
}

}  // namespace

TEST(engine_service, requests_from_many_threads_are_batched_and_match_running_alone) {
  auto service = open_service(model_a(), 4, 64);
  collected got;
  std::vector<std::thread> callers;
  for (int t = 0; t < 4; ++t)
    callers.emplace_back([&, t] {
      for (int i = 0; i < 3; ++i) {
        const int key = t * 3 + i;
        auto st = service->submit(
            greedy({key + 1, 7, 3}, 6 + key % 4),
            [&got, key](generation_result r, std::string e) { got.add(key, std::move(r), std::move(e)); });
        EXPECT_TRUE(st) << st.error().message;
      }
    });
  for (auto& c : callers) c.join();
  ASSERT_TRUE(got.wait_for(12));
  EXPECT_TRUE(got.errors.empty());
  for (int key = 0; key < 12; ++key)
    EXPECT_EQ(got.results[key].tokens, run_alone(model_a(), greedy({key + 1, 7, 3}, 6 + key % 4))) << key;
  auto stats = service->stats();
  EXPECT_EQ(stats.submitted, 12u);
  EXPECT_EQ(stats.completed, 12u);
  EXPECT_EQ(stats.outstanding, 0);
  EXPECT_GT(stats.batch_rows_total, stats.steps);  // more than one sequence per step on average
}

TEST(engine_service, a_full_queue_and_bad_requests_are_refused_without_a_callback) {
  auto service = open_service(model_a(), 1, 2);
  collected got;
  auto cb = [&got](int key) {
    return [&got, key](generation_result r, std::string e) { got.add(key, std::move(r), std::move(e)); };
  };
  ASSERT_TRUE(service->submit(greedy({1, 2}, 40), cb(0)));
  ASSERT_TRUE(service->submit(greedy({3, 4}, 40), cb(1)));
  auto busy = service->submit(greedy({5}, 4), cb(2));
  ASSERT_FALSE(busy);
  EXPECT_NE(busy.error().message.find("busy"), std::string::npos) << busy.error().message;
  auto bad = service->submit(greedy({1, 100000}, 4), cb(3));
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().message.find("vocabulary"), std::string::npos) << bad.error().message;
  ASSERT_TRUE(got.wait_for(2));
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_EQ(got.results.size(), 2u);
  EXPECT_EQ(got.errors.size(), 0u);
  EXPECT_EQ(service->stats().rejected, 2u);
  EXPECT_TRUE(service->submit(greedy({5}, 4), cb(4)));  // room again
  ASSERT_TRUE(got.wait_for(3));
}

TEST(engine_service, stopping_answers_every_outstanding_request) {
  collected got;
  {
    auto service = open_service(model_a(), 1, 16);
    for (int key = 0; key < 6; ++key)
      ASSERT_TRUE(service->submit(greedy({key + 1}, 50), [&got, key](generation_result r, std::string e) {
        got.add(key, std::move(r), std::move(e));
      }));
  }  // destroyed with requests queued and running
  ASSERT_TRUE(got.wait_for(6));
  EXPECT_GE(got.errors.size(), 1u);
  for (const auto& [key, error] : got.errors) EXPECT_EQ(error, "engine service stopped") << key;
}

TEST(engine_service, published_weights_apply_to_later_requests) {
  static const std::string model_b = make_model("svc_b", 2);
  auto service = open_service(model_a(), 2, 8);
  collected got;
  ASSERT_TRUE(service->submit(greedy({9, 9}, 4),
                              [&got](generation_result r, std::string e) { got.add(0, std::move(r), std::move(e)); }));
  ASSERT_TRUE(got.wait_for(1));
  ASSERT_TRUE(service->load_weights(model_b, 3));
  EXPECT_FALSE(service->load_weights(model_a(), 2));  // older than the staged version 3
  EXPECT_EQ(service->policy_version(), 3u);
  ASSERT_TRUE(service->submit(greedy({9, 9}, 4),
                              [&got](generation_result r, std::string e) { got.add(1, std::move(r), std::move(e)); }));
  ASSERT_TRUE(got.wait_for(2));
  EXPECT_EQ(got.results[0].policy_version, 0u);
  EXPECT_EQ(got.results[0].tokens, run_alone(model_a(), greedy({9, 9}, 4)));
  EXPECT_EQ(got.results[1].policy_version, 3u);
  EXPECT_EQ(got.results[1].tokens, run_alone(model_b, greedy({9, 9}, 4)));
}
