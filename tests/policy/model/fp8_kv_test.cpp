// Unit tests of the e4m3 KV cache (engine_options::kv_cache_dtype fp8_e4m3) on the CPU, where
// attention reads its keys converted back to the model's dtype: what the decoder writes (the bf16
// cache's keys and values rounded to e4m3, saturated), what it reads (decode steps and a prefill
// after a cached prefix near the bf16 cache's logits, not equal to them), the engine over it
// (slots and paged agree, the prefix cache reused), and the rule that it needs bf16 or fp16.
#include <gtest/gtest.h>

#include <map>

#include "policy/model/decoder.hpp"
#include "policy/model/engine.hpp"
#include "tests/policy/model/engine_helpers.hpp"

using namespace caf_agent::policy;
using test_support::greedy;
using test_support::observation;

namespace {

decoder bf16_model() {
  auto model = decoder::load(test_support::long_model(), torch::kCPU, torch::kBFloat16);
  EXPECT_TRUE(model) << (model ? "" : model.error().message);
  return std::move(model.value());
}

// bf16_model() with its query and key projections scaled by 0.2: attention far from one-hot, so
// that rounding keys moves the logits a little (the model's own std 0.3 weights make scores of
// tens, where a rounded key can move the argmax of a softmax and the logits with it).
decoder soft_attention_model() {
  auto model = bf16_model();
  tensor_map scaled;
  for (const auto& [name, tensor] : model.named_parameters())
    scaled[name] =
        name.find("q_proj") != std::string::npos || name.find("k_proj") != std::string::npos ? tensor * 0.2 : tensor;
  EXPECT_TRUE(model.assign(scaled));
  return model;
}

// x rounded to e4m3 as the cache stores it (saturated at +-448), as bytes.
torch::Tensor e4m3_bytes(const torch::Tensor& x) {
  return x.to(torch::kFloat32).clamp(-448.0, 448.0).to(torch::kFloat8_e4m3fn).view(torch::kUInt8);
}

kv_cache make_cache(const decoder& model, bool paged, torch::ScalarType dtype) {
  return paged ? kv_cache::allocate_blocks(model.config(), 8, 16, torch::kCPU, dtype)
               : kv_cache::allocate(model.config(), 2, 128, torch::kCPU, dtype);
}

torch::Tensor tokens(int64_t first, int64_t n) {
  return (torch::arange(first, first + n, torch::kInt64) * 7) % 90 + 3;
}

// The largest |a - b| over the largest |b|.
double relative_gap(const torch::Tensor& a, const torch::Tensor& b) {
  const auto fa = a.to(torch::kFloat32), fb = b.to(torch::kFloat32);
  return (fa - fb).abs().max().item<double>() / fb.abs().max().item<double>();
}

}  // namespace

TEST(fp8_kv, a_prefill_stores_the_bf16_caches_keys_and_values_rounded_to_e4m3) {
  auto model = bf16_model();
  for (bool paged : {false, true}) {
    auto bf16 = make_cache(model, paged, torch::kBFloat16);
    auto fp8 = make_cache(model, paged, torch::kFloat8_e4m3fn);
    ASSERT_TRUE(fp8.fp8());
    // 37 tokens: slot 1, or blocks 5, 2, 7 (not one run).
    const decoder::prefill_part part{1, 0, 37, paged ? std::vector<int64_t>{5, 2, 7} : std::vector<int64_t>{}};
    model.prefill(tokens(0, 37), {part}, bf16);
    model.prefill(tokens(0, 37), {part}, fp8);
    // The first layer's keys and values come from the embeddings alone: every entry, the untouched
    // zeros included, is the bf16 cache's rounded. (Later layers' inputs already differ: attention
    // read the rounded keys.)
    EXPECT_TRUE(torch::equal(kv_cache::entries(fp8.k_nkce[0]), e4m3_bytes(bf16.k_nkce[0])));
    EXPECT_TRUE(torch::equal(kv_cache::entries(fp8.v_nkce[0]), e4m3_bytes(bf16.v_nkce[0])));
    for (size_t layer = 0; layer < bf16.k_nkce.size(); ++layer) {
      EXPECT_GT(fp8.k_nkce[layer].view(torch::kUInt8).count_nonzero().item<int64_t>(), 37);
      // The rounding changed some entries (3 mantissa bits against bf16's 7).
      EXPECT_FALSE(torch::equal(fp8.k_nkce[layer].to(torch::kBFloat16), bf16.k_nkce[layer])) << layer;
    }
  }
}

TEST(fp8_kv, a_prompt_attends_the_same_rounded_keys_at_once_and_after_a_cached_prefix) {
  // 42 tokens prefilled at once, and as 30 then 12 after the cached 30, over an e4m3 cache and a
  // bf16 one: the two ways part over e4m3 no more than bf16's own rounding parts them (every read,
  // the first prefill's too, sees the rounded keys), far less than e4m3 parts from bf16.
  auto model = soft_attention_model();
  for (bool paged : {false, true}) {
    const std::vector<int64_t> blocks = paged ? std::vector<int64_t>{6, 1, 4} : std::vector<int64_t>{};
    const auto both_ways = [&](torch::ScalarType dtype) {
      auto whole = make_cache(model, paged, dtype), parts = make_cache(model, paged, dtype);
      auto at_once = model.prefill(tokens(0, 42), {decoder::prefill_part{0, 0, 42, blocks}}, whole);
      model.prefill(tokens(0, 30), {decoder::prefill_part{0, 0, 30, blocks}}, parts);
      return std::pair{at_once, model.prefill(tokens(30, 12), {decoder::prefill_part{0, 30, 12, blocks}}, parts)};
    };
    const auto [fp8_once, fp8_continued] = both_ways(torch::kFloat8_e4m3fn);
    const auto [bf16_once, bf16_continued] = both_ways(torch::kBFloat16);
    const std::string where = paged ? "paged" : "slots";
    EXPECT_LE(relative_gap(fp8_continued, fp8_once), 2 * relative_gap(bf16_continued, bf16_once) + 1e-3) << where;
    EXPECT_LT(relative_gap(fp8_continued, fp8_once), 0.25 * relative_gap(fp8_once, bf16_once)) << where;
  }
}

TEST(fp8_kv, decode_and_a_continued_prefill_read_the_rounded_keys) {
  auto model = soft_attention_model();
  for (auto attention : {cache_attention::sdpa, cache_attention::matmul})
    for (bool paged : {false, true}) {
      model.set_cache_attention(attention);
      const std::string where =
          std::string(paged ? "paged " : "slots ") + (attention == cache_attention::sdpa ? "sdpa" : "matmul");
      auto bf16 = make_cache(model, paged, torch::kBFloat16);
      auto fp8 = make_cache(model, paged, torch::kFloat8_e4m3fn);
      const std::vector<int64_t> blocks = {3, 4, 0, 6};
      const decoder::prefill_part first{0, 0, 30, paged ? blocks : std::vector<int64_t>{}};
      model.prefill(tokens(0, 30), {first}, bf16);
      model.prefill(tokens(0, 30), {first}, fp8);
      // A prefill after the cached prefix: 12 tokens attending 30 cached keys and each other.
      const decoder::prefill_part next{0, 30, 12, first.blocks};
      auto prefill_bf16 = model.prefill(tokens(30, 12), {next}, bf16);
      auto prefill_fp8 = model.prefill(tokens(30, 12), {next}, fp8);
      // A decode step at position 42.
      auto token = torch::tensor({7L}, torch::kInt64), position = torch::tensor({42L}, torch::kInt64);
      auto table = torch::tensor(blocks, torch::kInt64).view({1, 4});
      auto decode_bf16 =
          paged ? model.decode(token, position, 43, bf16, table) : model.decode(token, position, 43, bf16);
      auto decode_fp8 = paged ? model.decode(token, position, 43, fp8, table) : model.decode(token, position, 43, fp8);
      // Near the bf16 cache's logits (keys and values within 2^-4 of themselves), not equal to them.
      for (const auto& [got, want] : {std::pair{prefill_fp8, prefill_bf16}, std::pair{decode_fp8, decode_bf16}}) {
        EXPECT_LT(relative_gap(got, want), 0.05) << where;
        EXPECT_FALSE(torch::equal(got, want)) << where;
      }
    }
}

TEST(fp8_kv, the_engine_gives_the_same_tokens_over_slots_and_blocks_with_and_without_the_prefix_cache) {
  const auto run = [](kv_layout_kind layout, bool prefix_cache) {
    engine_options o;
    o.model_dir = test_support::long_model();
    o.dtype = model_dtype::bfloat16;
    o.kv_cache_dtype = kv_cache_dtype_kind::fp8_e4m3;
    o.kv_layout = layout;
    o.kv_block_size = 16;
    o.max_batch = 2;
    o.prefill_chunk = 16;
    o.prefix_cache = prefix_cache;
    auto engine = generation_engine::open(o);
    EXPECT_TRUE(engine) << (engine ? "" : engine.error().message);
    // Two conversations of three turns: each turn's prompt is the last prompt, its reply and a new observation.
    std::map<int, std::vector<int32_t>> prompts = {{1, observation(1, 0, 20)}, {2, observation(2, 0, 9)}};
    std::vector<std::vector<int32_t>> replies;
    for (int turn = 0; turn < 3; ++turn)
      for (auto& [who, prompt] : prompts) {
        auto result = test_support::run_one(*engine.value(), greedy(prompt, 10));
        replies.push_back(result.tokens);
        prompt.insert(prompt.end(), result.tokens.begin(), result.tokens.end());
        const auto obs = observation(who, turn + 1, 6);
        prompt.insert(prompt.end(), obs.begin(), obs.end());
      }
    return std::pair{replies, engine.value()->stats()};
  };
  const auto [slots, slot_stats] = run(kv_layout_kind::slots, true);
  const auto [paged, paged_stats] = run(kv_layout_kind::paged, true);
  // Every turn re-prefilled in chunks of 16: the rounded keys read alike (decoder's prefill).
  const auto [again, again_stats] = run(kv_layout_kind::slots, false);
  EXPECT_EQ(slots, paged);
  EXPECT_EQ(slots, again);
  EXPECT_EQ(slots.size(), 6u);
  for (const auto* stats : {&slot_stats, &paged_stats}) {
    EXPECT_EQ(stats->prefix_hits, 4u);  // turns 2 and 3 of both conversations
    EXPECT_GT(stats->reused_tokens, 0u);
  }
  EXPECT_EQ(again_stats.prefix_hits, 0u);
}

TEST(fp8_kv, needs_a_bf16_or_fp16_model) {
  engine_options o;
  o.model_dir = test_support::long_model();
  o.kv_cache_dtype = kv_cache_dtype_kind::fp8_e4m3;
  o.dtype = model_dtype::float32;
  auto engine = generation_engine::open(o);
  ASSERT_FALSE(engine);
  EXPECT_NE(engine.error().message.find("kv_cache_dtype"), std::string::npos) << engine.error().message;
  o.dtype = model_dtype::float16;
  EXPECT_TRUE(generation_engine::open(o));
}
