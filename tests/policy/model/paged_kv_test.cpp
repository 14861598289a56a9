// Unit tests of the engine's paged KV layout (engine_options::kv_layout "paged"): the same
// tokens and logprobs as the slot layout, the prefix cache over blocks, eviction and
// recomputation, admission by KV capacity, preemption, and contexts beyond a slot's share.
#include <gtest/gtest.h>

#include <map>

#include "policy/model/decoder.hpp"
#include "policy/model/engine.hpp"
#include "tests/policy/model/engine_helpers.hpp"

using namespace caf_agent::policy;
using test_support::expect_same;
using test_support::greedy;
using test_support::observation;
using test_support::run_one;

namespace {

const std::string& model_dir() {
  return test_support::long_model();
}

struct layout {
  kv_layout_kind kv_layout = kv_layout_kind::paged;
  int32_t block = 16;
  int64_t cache_tokens = 0;
  int32_t max_batch = 3;
  int32_t max_context = 0;
  int32_t prefill_chunk = 2048;
  bool prefix_cache = true;
  cache_attention_choice cache_attention = cache_attention_choice::automatic;
  bool fp8 = false;  ///< A bf16 model over an e4m3 KV cache (block moves and copies go through its bytes).
};

std::unique_ptr<generation_engine> open_engine(const layout& l) {
  engine_options o;
  o.model_dir = model_dir();
  o.kv_layout = l.kv_layout;
  o.kv_block_size = l.block;
  o.kv_cache_tokens = l.cache_tokens;
  o.max_batch = l.max_batch;
  o.max_context = l.max_context;
  o.prefill_chunk = l.prefill_chunk;
  o.prefix_cache = l.prefix_cache;
  o.cache_attention = l.cache_attention;
  if (l.fp8) {
    o.dtype = model_dtype::bfloat16;
    o.kv_cache_dtype = kv_cache_dtype_kind::fp8_e4m3;
  }
  auto engine = generation_engine::open(o);
  EXPECT_TRUE(engine) << (engine ? "" : engine.error().message);
  return std::move(engine.value());
}

layout slots(int32_t max_batch = 3, bool prefix_cache = false, bool fp8 = false) {
  layout l;
  l.fp8 = fp8;
  l.kv_layout = kv_layout_kind::slots;
  l.max_batch = max_batch;
  l.prefix_cache = prefix_cache;
  return l;
}

// A paged pool of `cache_tokens` for `max_batch` seats; `fp8`: a bf16 model over e4m3 keys.
layout pool(int64_t cache_tokens, int32_t max_batch, bool fp8 = false) {
  layout l;
  l.cache_tokens = cache_tokens;
  l.max_batch = max_batch;
  l.fp8 = fp8;
  return l;
}

const char* cache_name(bool fp8) {
  return fp8 ? "e4m3 cache" : "model dtype cache";
}

// Submits every request, runs until idle; results by position in `requests`.
std::vector<generation_result> run_all(generation_engine& engine, const std::vector<generation_request>& requests) {
  std::map<uint64_t, size_t> index;
  for (size_t i = 0; i < requests.size(); ++i) {
    auto id = engine.submit(requests[i]);
    EXPECT_TRUE(id) << (id ? "" : id.error().message);
    if (id) index[id.value()] = i;
  }
  std::vector<generation_result> out(requests.size());
  auto done = engine.run_until_idle();
  EXPECT_TRUE(done) << (done ? "" : done.error().message);
  if (done)
    for (auto& r : done.value()) out[index.at(r.id)] = std::move(r);
  return out;
}

// Prompts of 3..70 tokens (up to 5 blocks of 16), one sampled.
std::vector<generation_request> mixed_requests() {
  std::vector<generation_request> r = {greedy(observation(1, 0, 3), 12), greedy(observation(2, 0, 40), 9),
                                       greedy(observation(3, 0, 17), 20), greedy(observation(4, 0, 70), 8),
                                       greedy(observation(5, 0, 33), 15)};
  r[2].sampling.temperature = 1.0f;
  r[2].seed = 5;
  return r;
}

}  // namespace

TEST(paged_kv, gives_the_tokens_and_logprobs_of_the_slot_layout) {
  const auto requests = mixed_requests();
  using enum cache_attention_choice;
  for (const auto& [chunk, attention] : {std::pair{0, sdpa}, std::pair{16, sdpa}, std::pair{16, matmul}}) {
    auto slot_layout = slots();
    slot_layout.prefill_chunk = chunk;
    slot_layout.cache_attention = attention;
    const auto reference = run_all(*open_engine(slot_layout), requests);
    for (int32_t block : {16, 256}) {
      layout paged;
      paged.block = block;
      paged.prefill_chunk = chunk;
      paged.cache_attention = attention;
      auto engine = open_engine(paged);
      const auto got = run_all(*engine, requests);
      for (size_t i = 0; i < requests.size(); ++i)
        expect_same(got[i], reference[i],
                    to_string(attention) + " block " + std::to_string(block) + " chunk " + std::to_string(chunk) +
                        " request " + std::to_string(i));
      const auto s = engine->stats();
      EXPECT_EQ(s.kv_blocks, static_cast<uint64_t>((3 * 1024 + block - 1) / block));  // the slots' memory
      EXPECT_EQ(s.preemptions, 0u);
      EXPECT_EQ(s.kv_blocks_free + s.kv_blocks_kept, s.kv_blocks);  // nothing runs: every block free or kept
      EXPECT_EQ(engine->kept_prefixes(), requests.size());
    }
  }
}

TEST(paged_kv, a_conversation_prefills_only_its_new_tokens_and_matches_a_full_reprefill) {
  auto paged = open_engine(layout{});
  auto plain = open_engine(slots(2));
  std::vector<int32_t> history = observation(0, 0, 12);
  size_t final_length = 0;
  for (int turn = 0; turn < 20; ++turn) {
    auto a = run_one(*paged, greedy(history, 6));
    expect_same(a, run_one(*plain, greedy(history, 6)), "turn " + std::to_string(turn));
    final_length = history.size() + a.tokens.size();
    history.insert(history.end(), a.tokens.begin(), a.tokens.end());
    auto obs = observation(0, turn + 1, 8);
    history.insert(history.end(), obs.begin(), obs.end());
  }
  const auto s = paged->stats();
  // Every key of the final conversation was computed once (the last sampled token's is never needed).
  EXPECT_EQ(s.prefilled_tokens + s.decoded_tokens, final_length - 1);
  EXPECT_EQ(s.prefix_hits, 19u);
  EXPECT_EQ(s.evictions, 0u);
  EXPECT_EQ(s.recomputed_tokens, 0u);
  EXPECT_EQ(paged->kept_prefixes(), 1u);
  EXPECT_EQ(s.kv_blocks_kept, (final_length - 1 + 15) / 16);  // the kept conversation's blocks, no more
}

TEST(paged_kv, evicted_conversations_come_back_with_the_same_tokens_and_count_their_recomputation) {
  // 6 blocks of 16: a kept conversation of >= 49 tokens (4 blocks) and the other's next turn
  // never fit together, so each turn evicts the other conversation's keys. Over bf16 / fp32 keys
  // and over e4m3 keys (against the slot layout's e4m3 tokens).
  for (bool fp8 : {false, true}) {
    SCOPED_TRACE(cache_name(fp8));
    auto paged = open_engine(pool(96, 1, fp8));
    auto plain = open_engine(slots(1, false, fp8));
    std::vector<std::vector<int32_t>> history = {observation(1, 0, 50), observation(2, 0, 50)};
    uint64_t expected_recomputed = 0, prompts = 0;
    std::vector<size_t> kept_length(2, 0);
    for (int turn = 0; turn < 3; ++turn) {
      for (int who = 0; who < 2; ++who) {
        auto a = run_one(*paged, greedy(history[who], 5));
        expect_same(a, run_one(*plain, greedy(history[who], 5)),
                    "conversation " + std::to_string(who) + " turn " + std::to_string(turn));
        expected_recomputed += kept_length[who];  // its earlier keys were evicted: all computed again
        prompts += history[who].size();
        kept_length[who] = history[who].size() + a.tokens.size() - 1;
        history[who].insert(history[who].end(), a.tokens.begin(), a.tokens.end());
        auto obs = observation(who + 1, turn + 1, 8);
        history[who].insert(history[who].end(), obs.begin(), obs.end());
      }
    }
    const auto s = paged->stats();
    EXPECT_GE(s.evictions, 5u);
    EXPECT_EQ(s.reused_tokens, 0u);
    EXPECT_EQ(s.prefilled_tokens, prompts);
    EXPECT_EQ(s.recomputed_tokens, expected_recomputed);
    EXPECT_EQ(expected_recomputed, 2u * ((50 + 5 - 1) + (63 + 5 - 1)));  // the kept keys of turns 0 and 1
  }
}

TEST(paged_kv, requests_beyond_the_kv_capacity_wait_and_all_finish) {
  // 8 blocks of 16 for 4 sequences of 20 prompt + 10 new tokens (2 blocks each, plus headroom).
  std::vector<generation_request> requests;
  for (int i = 0; i < 6; ++i) requests.push_back(greedy(observation(10 + i, 0, 20), 10));
  const auto reference = run_all(*open_engine(slots(4)), requests);
  auto engine = open_engine(pool(128, 4));
  std::map<uint64_t, size_t> index;
  for (size_t i = 0; i < requests.size(); ++i) index[engine->submit(requests[i]).value()] = i;
  std::vector<generation_result> got(requests.size());
  bool held_back = false;  // a request waited while a seat was free: back-pressure by KV capacity
  while (!engine->idle()) {
    auto done = engine->step();
    ASSERT_TRUE(done) << done.error().message;
    held_back = held_back || (engine->waiting() > 0 && engine->running() < 4);
    for (auto& r : done.value()) got[index.at(r.id)] = std::move(r);
  }
  EXPECT_TRUE(held_back);
  for (size_t i = 0; i < requests.size(); ++i) expect_same(got[i], reference[i], "request " + std::to_string(i));
  EXPECT_EQ(engine->stats().preemptions, 0u);
}

TEST(paged_kv, decode_growth_preempts_the_newest_sequence_which_is_recomputed_with_the_same_tokens) {
  // 6 blocks of 16; three sequences of 10 + 40 tokens would need 12: the newest gives way. Over
  // bf16 / fp32 keys and over e4m3 keys.
  for (bool fp8 : {false, true}) {
    SCOPED_TRACE(cache_name(fp8));
    std::vector<generation_request> requests = {greedy(observation(20, 0, 10), 40), greedy(observation(21, 0, 10), 40),
                                                greedy(observation(22, 0, 10), 40)};
    requests[1].sampling.temperature = 1.0f;  // sampling continues from the same random stream
    requests[1].seed = 3;
    const auto reference = run_all(*open_engine(slots(3, false, fp8)), requests);
    auto engine = open_engine(pool(96, 3, fp8));
    const auto got = run_all(*engine, requests);
    // The e4m3 run's model is bf16: a preempted sequence's recomputing prefill rounds its keys'
    // inputs otherwise than its decode steps did: the same tokens, logprobs to bf16 precision (0.05,
    // as flash against sdpa in tests/policy/model/test_cache_attention_gpu.py).
    for (size_t i = 0; i < requests.size(); ++i)
      expect_same(got[i], reference[i], "request " + std::to_string(i), fp8 ? 0.05 : 1e-4);
    const auto s = engine->stats();
    EXPECT_GT(s.preemptions, 0u);
    EXPECT_GT(s.recomputed_tokens, 0u);
    // Keys computed = the three sequences' keys once each, plus what preemption made recompute.
    EXPECT_EQ(s.prefilled_tokens + s.decoded_tokens, 3u * (10 + 40 - 1) + s.recomputed_tokens);
  }
}

// 30 blocks of 16, 3 seats (blocks 0, 10, 20 first): a 150-token prompt takes blocks 0..9, a
// 20-token one 10..11; the first grows past block 9, finds block 10 taken and moves, keys
// copied, to a free run of 11 blocks, so it stays one run. Tokens are the slot layout's. Over an
// e4m3 cache nothing reads runs: the row grows into another block, nothing moves.
TEST(paged_kv, a_sequence_whose_next_block_is_taken_moves_to_a_free_run_with_the_same_tokens) {
  for (bool fp8 : {false, true}) {
    SCOPED_TRACE(cache_name(fp8));
    const std::vector<generation_request> requests = {greedy(observation(30, 0, 150), 30),
                                                      greedy(observation(31, 0, 20), 30)};
    const auto reference = run_all(*open_engine(slots(3, false, fp8)), requests);
    auto engine = open_engine(pool(480, 3, fp8));
    const auto got = run_all(*engine, requests);
    for (size_t i = 0; i < requests.size(); ++i) expect_same(got[i], reference[i], "request " + std::to_string(i));
    const auto s = engine->stats();
    EXPECT_EQ(s.preemptions, 0u);
    if (fp8) {
      EXPECT_EQ(s.moved_tokens, 0u);
      EXPECT_GT(s.decode_block_runs, s.decoded_tokens);  // the first row in two runs
      continue;
    }
    EXPECT_GE(s.moved_tokens, 160u);                   // the first sequence's keys when it reached block 10
    EXPECT_EQ(s.decode_block_runs, s.decoded_tokens);  // every decode row one run
  }
}

// 12 blocks of 16, 3 seats: twelve short conversations leave twelve kept prefixes of one block
// each, so the pool is full of them. Three longer replies follow: each row's next block is a kept
// prefix's, which is evicted so that the row grows in place (one run each, no second flash
// sequence), rather than into whatever block an eviction elsewhere freed.
TEST(paged_kv, a_row_grows_over_kept_prefixes_in_one_run_with_the_same_tokens) {
  layout full;
  full.cache_tokens = 192;
  std::vector<generation_request> first, second;
  for (int i = 0; i < 12; ++i) first.push_back(greedy(observation(40 + i, 0, 10), 5));
  for (int i = 0; i < 3; ++i) second.push_back(greedy(observation(60 + i, 0, 10), 40));
  auto engine = open_engine(full);
  run_all(*engine, first);
  const auto before = engine->stats();
  ASSERT_EQ(before.decode_block_runs, before.decoded_tokens);
  const auto reference = run_all(*open_engine(slots(3)), second);
  const auto got = run_all(*engine, second);
  for (size_t i = 0; i < second.size(); ++i) expect_same(got[i], reference[i], "request " + std::to_string(i));
  const auto s = engine->stats();
  EXPECT_GT(s.evictions, before.evictions);
  EXPECT_EQ(s.preemptions, 0u);
  EXPECT_EQ(s.decode_block_runs - before.decode_block_runs, s.decoded_tokens - before.decoded_tokens);
}

// 12 blocks of 16, 3 seats, three conversations of 10 + 40 tokens kept (four blocks each, the
// whole pool). The same prompts again: each matches its kept prefix but for the reply, and the
// free blocks cannot hold it as it grows, so it takes over the least recently used prefix's
// blocks in place (as a slot is taken over): no block copied or moved, one run a row.
TEST(paged_kv, a_prompt_again_takes_over_the_least_recent_prefix_in_place_when_the_pool_is_full) {
  layout full;
  full.cache_tokens = 192;
  std::vector<generation_request> requests;
  for (int i = 0; i < 3; ++i) requests.push_back(greedy(observation(70 + i, 0, 10), 40));
  auto engine = open_engine(full);
  const auto first = run_all(*engine, requests);
  const auto before = engine->stats();
  const auto again = run_all(*engine, requests);
  for (size_t i = 0; i < requests.size(); ++i) expect_same(again[i], first[i], "request " + std::to_string(i));
  const auto s = engine->stats();
  EXPECT_EQ(s.reused_tokens - before.reused_tokens, 3u * 9);  // all but each prompt's last token
  EXPECT_EQ(s.copied_tokens, before.copied_tokens);
  EXPECT_EQ(s.moved_tokens, before.moved_tokens);
  EXPECT_EQ(s.recomputed_tokens, before.recomputed_tokens);
  EXPECT_EQ(s.decode_block_runs - before.decode_block_runs, s.decoded_tokens - before.decoded_tokens);
}

TEST(paged_kv, one_sequence_may_use_most_of_the_cache_and_ends_when_it_is_full) {
  // 512 tokens of KV for 4 sequences: a slot's share would be 128 tokens.
  layout l;
  l.cache_tokens = 512;
  l.max_batch = 4;
  l.max_context = 1000;
  auto paged = open_engine(l);
  auto reference_engine = open_engine(slots(1));
  const auto long_one = greedy(observation(30, 0, 300), 150);
  expect_same(run_one(*paged, long_one), run_one(*reference_engine, long_one), "450 tokens");
  // Longer than the whole cache: it ends with context_limit when its keys fill every block.
  auto too_long = greedy(observation(31, 0, 300), 400);
  auto r = run_one(*paged, too_long);
  EXPECT_EQ(r.reason, finish_reason::context_limit);
  EXPECT_EQ(r.tokens.size(), 512u - 300 + 1);  // keys 0..511, then the token no block can hold
  auto reference = run_one(*reference_engine, too_long);
  reference.tokens.resize(r.tokens.size());
  EXPECT_EQ(r.tokens, reference.tokens);
}

TEST(paged_kv, bad_options_and_a_prompt_longer_than_the_cache_are_clear_errors) {
  layout l;
  l.cache_tokens = 64;
  auto engine = open_engine(l);
  auto too_long = engine->submit(greedy(observation(40, 0, 70), 4));
  ASSERT_FALSE(too_long);
  EXPECT_NE(too_long.error().message.find("prompt of 70 tokens needs 5 KV blocks of 16 tokens"), std::string::npos)
      << too_long.error().message;
  EXPECT_NE(too_long.error().message.find("the whole cache has 4 blocks (64 tokens"), std::string::npos)
      << too_long.error().message;
  EXPECT_FALSE(engine->submit(greedy(observation(40, 0, 64), 4)));  // its first new key needs a 5th block
  EXPECT_TRUE(engine->submit(greedy(observation(40, 0, 63), 4)));
  auto refused = [](auto change) {
    engine_options o;
    o.model_dir = model_dir();
    o.kv_layout = kv_layout_kind::paged;
    change(o);
    auto e = generation_engine::open(o);
    return e ? std::string() : e.error().message;
  };
  // flash reads the paged layout on a CUDA device only (test_cache_attention_gpu.py runs it).
  EXPECT_NE(refused([](auto& o) {
              o.cache_attention = cache_attention_choice::flash;
            }).find("cache_attention 'flash' needs a CUDA device"),
            std::string::npos);
  EXPECT_NE(refused([](auto& o) { o.kv_block_size = 0; }).find("kv_block_size must be >= 1"), std::string::npos);
  EXPECT_NE(refused([](auto& o) {
              o.kv_layout = kv_layout_kind::slots;
              o.kv_cache_tokens = 100;
            }).find("kv_cache_tokens applies to kv_layout 'paged' only"),
            std::string::npos);
  EXPECT_EQ(refused([](auto& o) { o.cache_attention = cache_attention_choice::matmul; }), "");
}

// The shared full block's keys are copied into each new sequence's own run of blocks (admit_paged:
// one run a row where one is free), the partial one too; the tokens are the slot layout's. Over
// e4m3 keys too (the partial block copied as bytes).
TEST(paged_kv, a_shared_prefix_is_reused_not_recomputed_and_keeps_the_other_conversation_whole) {
  for (bool fp8 : {false, true}) {
    SCOPED_TRACE(cache_name(fp8));
    auto paged = open_engine(pool(0, 3, fp8));
    auto plain = open_engine(slots(3, false, fp8));
    // The e4m3 run's model is bf16: the slot layout here re-prefills what the paged one reuses, and
    // bf16 rounds the two otherwise (the same tokens; logprobs to bf16 precision, 0.05).
    const double tolerance = fp8 ? 0.05 : 1e-4;
    const auto system = observation(5, 0, 30);  // one full block of 16 and 14 tokens of the next
    auto first = system;
    first.push_back(11);
    const auto first_reply = run_one(*paged, greedy(first, 4));
    expect_same(first_reply, run_one(*plain, greedy(first, 4)), "first", tolerance);
    // Two prompts sharing the system prompt run side by side, one of them sampled.
    auto second = greedy(system, 8), third = greedy(system, 6);
    second.prompt.push_back(12);
    third.prompt.push_back(13);
    second.sampling.temperature = 1.0f;
    second.seed = 77;
    const auto got = run_all(*paged, {second, third});
    const auto want = run_all(*plain, {second, third});
    expect_same(got[0], want[0], "second, sampled", tolerance);
    expect_same(got[1], want[1], "third", tolerance);
    auto s = paged->stats();
    EXPECT_EQ(s.copied_tokens, 60u);  // 30 shared tokens each, not recomputed
    EXPECT_EQ(paged->kept_prefixes(), 3u);
    EXPECT_EQ(s.kv_blocks_free + s.kv_blocks_kept, s.kv_blocks);
    // The first conversation's keys stayed whole: its next turn continues them.
    auto next = first;
    next.insert(next.end(), first_reply.tokens.begin(), first_reply.tokens.end());
    next.push_back(40);
    expect_same(run_one(*paged, greedy(next, 5)), run_one(*plain, greedy(next, 5)), "first, next turn", tolerance);
    EXPECT_EQ(paged->stats().reused_tokens - s.reused_tokens, first.size() + first_reply.tokens.size() - 1);
    EXPECT_EQ(paged->stats().evictions, 0u);
  }
}

TEST(paged_kv, forgotten_prefixes_free_their_blocks_and_are_prefilled_again) {
  for (const auto& l : {layout{}, slots(3, /*prefix_cache=*/true)}) {
    auto engine = open_engine(l);
    const auto request = greedy(observation(6, 0, 40), 5);
    const auto first = run_one(*engine, request);
    ASSERT_EQ(engine->kept_prefixes(), 1u);
    EXPECT_EQ(engine->forget_prefixes(), 1u);
    EXPECT_EQ(engine->kept_prefixes(), 0u);
    const auto s = engine->stats();
    EXPECT_EQ(s.kv_blocks_free, s.kv_blocks);  // paged: every block free (slots: both 0)
    expect_same(run_one(*engine, request), first, "after forgetting");
    EXPECT_EQ(engine->stats().reused_tokens, s.reused_tokens);  // prefilled in full
  }
}

TEST(paged_kv, new_weights_drop_every_kept_prefix) {
  const std::string& model_b = test_support::long_model_b();
  auto paged = open_engine(layout{});
  std::vector<int32_t> history = observation(3, 0, 40);
  auto first = run_one(*paged, greedy(history, 5));
  history.insert(history.end(), first.tokens.begin(), first.tokens.end());
  ASSERT_TRUE(paged->load_weights(model_b, 1));
  auto after = run_one(*paged, greedy(history, 5));
  engine_options o;
  o.model_dir = model_b;
  auto fresh = generation_engine::open(o);
  ASSERT_TRUE(fresh);
  expect_same(after, run_one(*fresh.value(), greedy(history, 5)), "after the swap");
  EXPECT_EQ(paged->stats().invalidations, 1u);
  EXPECT_EQ(paged->stats().reused_tokens, 0u);
  EXPECT_EQ(paged->kept_prefixes(), 1u);
  // A prompt partly prefilled by the old weights (it shares the kept conversation's first block)
  // starts over under the new ones.
  layout chunked;
  chunked.prefill_chunk = 16;
  auto engine = open_engine(chunked);
  (void)run_one(*engine, greedy(observation(6, 0, 20), 3));
  auto long_prompt = observation(6, 0, 20);
  const auto rest = observation(7, 0, 80);
  long_prompt.insert(long_prompt.end(), rest.begin(), rest.end());
  ASSERT_TRUE(engine->submit(greedy(long_prompt, 5)));
  ASSERT_TRUE(engine->step());  // 16 of its 80 new tokens prefilled
  ASSERT_TRUE(engine->load_weights(model_b, 1));
  auto swapped = engine->run_until_idle();
  ASSERT_TRUE(swapped && swapped.value().size() == 1);
  EXPECT_EQ(swapped.value()[0].policy_version, 1u);
  expect_same(swapped.value()[0], run_one(*fresh.value(), greedy(long_prompt, 5)), "partly prefilled, swapped");
}

TEST(paged_kv, the_kv_capacity_is_the_pool_or_the_slots) {
  layout paged;
  paged.cache_tokens = 100;  // rounded up to 7 blocks of 16
  EXPECT_EQ(open_engine(paged)->kv_capacity_tokens(), 112);
  EXPECT_EQ(open_engine(layout{})->kv_capacity_tokens(), 3 * 1024);  // default: the slots' memory
  EXPECT_EQ(open_engine(slots(2))->kv_capacity_tokens(), 2 * 1024);
  // A context that is not whole blocks: each seat's share is rounded up, so every seat can hold
  // a max_context sequence (3 x ceil(100 / 16) = 21 blocks, not ceil(300 / 16) = 19).
  layout odd;
  odd.max_context = 100;
  EXPECT_EQ(open_engine(odd)->kv_capacity_tokens(), 3 * 7 * 16);
}

// flash reads a paged row as runs of consecutive block ids (decoder::decode's runs_br3).
TEST(paged_kv, block_tables_read_as_runs_of_consecutive_blocks) {
  using caf_agent::policy::paged_block_run_count;
  using caf_agent::policy::paged_block_runs;
  const std::vector<int64_t> one{4, 5, 6}, three{9, 2, 3, 7};
  const std::vector<const std::vector<int64_t>*> tables{&one, &three};
  EXPECT_EQ(paged_block_run_count(tables), 3);
  // Per run: first block, first position, blocks; rows padded to 3 runs with (pad, 0, 0).
  EXPECT_EQ(paged_block_runs(tables, 16, 3, 99),
            (std::vector<int64_t>{4, 0, 3, 99, 0, 0, 99, 0, 0, 9, 0, 1, 2, 16, 2, 7, 48, 1}));
}

// A paged decode step's flash sequences, share-major: row 0 of two runs (blocks 5, 6 = positions
// 0..31; block 9 = 32..47) at position 40, row 1 of one (blocks 1, 2) at position 20 and a padding
// run, 2 KV heads, a cache of 12 blocks of 16. Each share is one sequence per (row, KV head), and
// a flash call takes as many shares as keep it within split_sequences sequences.
TEST(paged_kv, a_decode_row_is_one_flash_sequence_per_kv_head_run_and_share) {
  const auto positions = torch::tensor(std::vector<int64_t>{40, 20});
  const auto runs = torch::tensor(std::vector<int64_t>{5, 0, 2, 9, 32, 1, 1, 0, 2, 11, 0, 0}).view({2, 2, 3});
  const auto list = [](const torch::Tensor& t) {
    std::vector<int32_t> out(static_cast<size_t>(t.numel()));
    std::copy_n(t.data_ptr<int32_t>(), t.numel(), out.begin());
    return out;
  };
  auto one = decoder::describe_paged_decode(positions, runs, 2, 12, 16, 48, 1, 211);
  EXPECT_EQ(one.shares, 2);
  EXPECT_EQ(one.max_k, 48);
  EXPECT_EQ(one.call_shares, 2);  // 8 sequences: one call
  EXPECT_EQ(list(one.cu_q), (std::vector<int32_t>{0, 1, 2, 3, 4, 5, 6, 7, 8}));
  // Run 0 of (row 0, head 0), (row 0, head 1), (row 1, head 0), (row 1, head 1), then run 1 of
  // each; head 1's rows start 12 x 16 = 192 rows later; the padding run reads no key.
  EXPECT_EQ(list(one.cu_k), (std::vector<int32_t>{80, 272, 16, 208, 144, 336, 176, 368, 0}));
  EXPECT_EQ(list(one.used_k), (std::vector<int32_t>{32, 32, 21, 21, 9, 9, 0, 0}));
  // 4 sequences a share: a call a share at 4 (or 5-7), all in one when a share alone is past it
  // or the limit is unknown.
  EXPECT_EQ(decoder::describe_paged_decode(positions, runs, 2, 12, 16, 48, 1, 4).call_shares, 1);
  EXPECT_EQ(decoder::describe_paged_decode(positions, runs, 2, 12, 16, 48, 1, 7).call_shares, 1);
  EXPECT_EQ(decoder::describe_paged_decode(positions, runs, 2, 12, 16, 48, 1, 3).call_shares, 2);
  EXPECT_EQ(decoder::describe_paged_decode(positions, runs, 2, 12, 16, 48, 1, 0).call_shares, 2);
  // Each run cut in 2: shares (run 0, cut 0), (0, 1), (1, 0), (1, 1).
  auto cut = decoder::describe_paged_decode(positions, runs, 2, 12, 16, 5000, 2, 211);
  EXPECT_EQ(cut.shares, 4);
  EXPECT_EQ(cut.max_k, 2500);
  EXPECT_EQ(list(cut.cu_k),
            (std::vector<int32_t>{80, 272, 16, 208, 96, 288, 27, 219, 144, 336, 176, 368, 149, 341, 176, 368, 0}));
  EXPECT_EQ(list(cut.used_k), (std::vector<int32_t>{16, 16, 11, 11, 16, 16, 10, 10, 5, 5, 0, 0, 4, 4, 0, 0}));
  EXPECT_THROW(decoder::describe_paged_decode(positions, runs, 2, 12, 16, 48, 0, 211), c10::Error);
  EXPECT_EQ(caf_agent::policy::flash_split_sequences(132), 211);  // 0.8 x 2 x 132 = 211.2
  EXPECT_EQ(caf_agent::policy::flash_split_sequences(120), 191);  // 192: no longer split
  EXPECT_EQ(caf_agent::policy::flash_split_sequences(0), 0);
}
