// Overlapped decoding (engine_options::overlap): a step launched from the last step's tokens
// while they are on their way to the host gives the same tokens, logprobs, finish reasons and
// kept prefixes as stepping one at a time, whatever ends a sequence and whatever happens between
// steps (a request admitted while tokens are in flight, new weights, a cancel), in the slot and
// the paged layout (rows crossing into new blocks in flight; a preemption lands them first).
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "policy/model/engine.hpp"
#include "tests/policy/model/engine_helpers.hpp"
#include "tests/policy/model/random_checkpoint.hpp"

namespace fs = std::filesystem;
using namespace caf_agent::policy;
using test_support::expect_same;
using test_support::greedy;
using test_support::observation;

namespace {

// The KV layout of a run: slots, or paged with blocks of 8 tokens (rows cross into new blocks
// every 8 steps) in a pool of `paged_tokens` (0: max_batch x context).
struct layout {
  bool paged = false;
  int64_t paged_tokens = 0;
};

std::string name_of(const layout& l) {
  return l.paged ? "paged, " + std::to_string(l.paged_tokens) + " tokens" : "slots";
}

const layout both_layouts[] = {{false, 0}, {true, 0}};

std::unique_ptr<generation_engine> open_engine(bool overlap, int32_t max_batch, int32_t context, layout kv = {}) {
  engine_options o;
  o.model_dir = test_support::long_model();
  o.max_batch = max_batch;
  o.max_context = context;
  o.overlap = overlap;
  if (kv.paged) {
    o.kv_layout = kv_layout_kind::paged;
    o.kv_block_size = 8;
    o.kv_cache_tokens = kv.paged_tokens;
  }
  auto engine = generation_engine::open(o);
  EXPECT_TRUE(engine) << (engine ? "" : engine.error().message);
  return std::move(engine.value());
}

generation_request sampled(std::vector<int32_t> prompt, int32_t new_tokens, uint64_t seed) {
  generation_request r;
  r.prompt = std::move(prompt);
  r.max_new_tokens = new_tokens;
  r.sampling.temperature = 1.0f;
  r.seed = seed;
  return r;
}

// What happens before step k of a scripted run.
struct script {
  std::map<int, std::vector<generation_request>> submit;
  std::map<int, std::string> load_weights;  // checkpoint directory, staged as version k
  std::map<int, int> cancel;                // index (submission order) of the request to cancel
};

struct outcome {
  std::vector<generation_result> results;  // by submission order
  engine_stats stats;
};

outcome run(bool overlap, int32_t max_batch, int32_t context, const script& plan, layout kv = {}) {
  auto engine = open_engine(overlap, max_batch, context, kv);
  std::vector<uint64_t> ids;
  std::map<uint64_t, generation_result> by_id;
  int last = 0;
  for (const auto& [k, _] : plan.submit) last = std::max(last, k);
  for (const auto& [k, _] : plan.load_weights) last = std::max(last, k);
  for (const auto& [k, _] : plan.cancel) last = std::max(last, k);
  for (int step = 0; step <= last || !engine->idle(); ++step) {
    EXPECT_LT(step, 2000) << "the engine never went idle";
    if (step >= 2000) break;
    if (auto it = plan.submit.find(step); it != plan.submit.end())
      for (const auto& r : it->second) ids.push_back(engine->submit(r).value());
    if (auto it = plan.load_weights.find(step); it != plan.load_weights.end()) {
      EXPECT_TRUE(engine->load_weights(it->second, static_cast<uint64_t>(step)));
    }
    if (auto it = plan.cancel.find(step); it != plan.cancel.end()) {
      if (auto r = engine->cancel(ids.at(static_cast<size_t>(it->second)))) by_id[r->id] = std::move(*r);
    }
    auto done = engine->step();
    EXPECT_TRUE(done) << (done ? "" : done.error().message);
    if (!done) break;
    for (auto& r : done.value()) {
      EXPECT_FALSE(by_id.contains(r.id)) << "request " << r.id << " ended twice";
      by_id[r.id] = std::move(r);
    }
  }
  outcome out;
  for (uint64_t id : ids) {
    EXPECT_TRUE(by_id.contains(id)) << "request " << id << " never ended";
    out.results.push_back(by_id[id]);
  }
  out.stats = engine->stats();
  return out;
}

// The plan run plainly, then overlapped, in layout `kv`.
std::pair<outcome, outcome> both_ways(int32_t max_batch, int32_t context, const script& plan, layout kv) {
  return {run(false, max_batch, context, plan, kv), run(true, max_batch, context, plan, kv)};
}

void expect_same_runs(const outcome& plain, const outcome& overlapped) {
  ASSERT_EQ(plain.results.size(), overlapped.results.size());
  for (size_t i = 0; i < plain.results.size(); ++i) {
    const auto& a = plain.results[i];
    const auto& b = overlapped.results[i];
    const std::string where = "request " + std::to_string(i);
    expect_same(a, b, where);
    EXPECT_EQ(a.reason, b.reason) << where;
    EXPECT_EQ(a.policy_version, b.policy_version) << where;
    EXPECT_EQ(a.last_policy_version, b.last_policy_version) << where;
  }
  // The same keys computed and found again: kept prefixes are the same.
  EXPECT_EQ(plain.stats.prefilled_tokens, overlapped.stats.prefilled_tokens);
  EXPECT_EQ(plain.stats.reused_tokens, overlapped.stats.reused_tokens);
  EXPECT_EQ(plain.stats.prefix_hits, overlapped.stats.prefix_hits);
  EXPECT_EQ(plain.stats.overlapped_steps, 0u);
}

// Free-running greedy tokens of `prompt`, to pick stop tokens that occur.
std::vector<int32_t> free_run(std::vector<int32_t> prompt, int32_t n) {
  auto engine = open_engine(false, 1, 0);
  return test_support::run_one(*engine, greedy(std::move(prompt), n)).tokens;
}

}  // namespace

TEST(overlap, every_way_a_sequence_ends_gives_the_same_results_as_stepping_one_at_a_time) {
  const auto a = free_run({5, 6, 7}, 12);
  script plan;
  auto& first = plan.submit[0];
  auto stop = greedy({5, 6, 7}, 12);  // ends on a stop token drawn mid-run
  stop.stop_token_ids = {a[4]};
  first.push_back(stop);
  auto text = sampled({11, 12}, 30, 7);  // ends on a stop string after 5 tokens
  text.stop_check = [](const std::vector<int32_t>& generated) { return generated.size() == 5; };
  first.push_back(text);
  first.push_back(sampled({20, 21, 22, 23}, 9, 3));  // max_new_tokens
  auto forced = sampled({30, 31}, 40, 4);            // a forced reply ends with its last token
  forced.forced_tokens = {9, 8, 7, 6, 5, 4};
  first.push_back(forced);
  first.push_back(sampled({40}, 500, 5));    // runs into the context limit
  first.push_back(greedy({50, 51, 52}, 1));  // one token: ends at its admission
  for (const auto& kv : both_layouts) {
    SCOPED_TRACE(name_of(kv));
    const auto [plain, overlapped] = both_ways(8, 48, plan, kv);
    expect_same_runs(plain, overlapped);
    EXPECT_EQ(plain.results[0].reason, finish_reason::stop_token);
    EXPECT_EQ(plain.results[1].reason, finish_reason::stop_string);
    EXPECT_EQ(plain.results[2].reason, finish_reason::max_new_tokens);
    EXPECT_EQ(plain.results[3].tokens, std::vector<int32_t>({9, 8, 7, 6, 5, 4}));
    EXPECT_EQ(plain.results[4].reason, finish_reason::context_limit);
    EXPECT_GT(overlapped.stats.overlapped_steps, 20u);
    // The stop token's and the stop string's sequences each decoded one row more, dropped.
    const uint64_t dropped = 2;
    EXPECT_EQ(overlapped.stats.overlap_dropped_rows, dropped);
    EXPECT_EQ(overlapped.stats.decoded_tokens, plain.stats.decoded_tokens + dropped);
  }
}

// Requests arriving mid-run (more than the slots) are admitted while tokens are in flight; new
// weights and a cancel land those tokens first.
TEST(overlap, admissions_in_flight_new_weights_and_a_cancel_give_the_same_results) {
  script plan;
  for (int i = 0; i < 4; ++i) plan.submit[0].push_back(sampled(observation(i, 0, 12), 40, 10 + i));
  // Mid-run: a request arrives (its prompt shares a prefix with a running one), new weights are
  // staged, a running request is cancelled, and a second wave continues finished conversations.
  plan.submit[6].push_back(sampled(observation(1, 0, 12), 8, 21));
  plan.load_weights[12] = test_support::long_model_b();
  plan.cancel[15] = 2;
  for (int i = 0; i < 2; ++i) {
    auto next = observation(i, 0, 12);
    const auto more = observation(i, 1, 6);
    next.insert(next.end(), more.begin(), more.end());
    plan.submit[60].push_back(sampled(next, 10, 30 + i));
  }
  for (const auto& kv : both_layouts) {
    SCOPED_TRACE(name_of(kv));
    const auto [plain, overlapped] = both_ways(3, 256, plan, kv);
    expect_same_runs(plain, overlapped);
    EXPECT_EQ(plain.results[2].reason, finish_reason::aborted);
    EXPECT_EQ(plain.results[5].policy_version, 12u);  // the second wave ran on the new weights
    EXPECT_GT(overlapped.stats.overlapped_steps, 10u);
    EXPECT_GT(overlapped.stats.decode_steps, overlapped.stats.overlapped_steps);  // the weights' step was plain
  }
}

TEST(overlap, a_conversation_continued_after_overlapped_turns_reuses_the_same_kept_prefix) {
  // Turn 1 of three conversations overlapped, then turn 2: each continues its kept prefix.
  script plan;
  std::vector<std::vector<int32_t>> prompts;
  for (int i = 0; i < 3; ++i) plan.submit[0].push_back(greedy(observation(i, 0, 10), 6 + 3 * i));
  const auto plain_first = run(false, 3, 256, plan);
  for (int i = 0; i < 3; ++i) {
    auto p = observation(i, 0, 10);
    const auto& reply = plain_first.results[static_cast<size_t>(i)].tokens;
    p.insert(p.end(), reply.begin(), reply.end());
    const auto obs = observation(i, 1, 5);
    p.insert(p.end(), obs.begin(), obs.end());
    plan.submit[40].push_back(greedy(p, 5));
  }
  // Every continued prompt found its whole first turn but the last reply token kept.
  uint64_t expected_reuse = 0;
  for (int i = 0; i < 3; ++i) expected_reuse += 10 + static_cast<uint64_t>(6 + 3 * i) - 1;
  for (const auto& kv : both_layouts) {
    SCOPED_TRACE(name_of(kv));
    const auto [plain, overlapped] = both_ways(3, 256, plan, kv);
    expect_same_runs(plain, overlapped);
    EXPECT_EQ(overlapped.stats.reused_tokens, expected_reuse);
    EXPECT_EQ(overlapped.stats.prefix_hits, 3u);
  }
}

// Paged, a pool too small for its rows: a step that may need a preemption lands the tokens in
// flight and runs plainly, so the preempted sequence is requeued with every token it drew and
// recomputed as without overlap. 12 blocks of 8; three sequences of 10 + 40 tokens need 21.
TEST(overlap, a_paged_pool_that_preempts_gives_the_same_results_as_stepping_one_at_a_time) {
  script plan;
  for (int i = 0; i < 3; ++i) plan.submit[0].push_back(sampled(observation(20 + i, 0, 10), 40, 40 + i));
  const layout small{true, 96};
  const auto [plain, overlapped] = both_ways(3, 256, plan, small);
  for (size_t i = 0; i < plain.results.size(); ++i)
    expect_same(plain.results[i], overlapped.results[i], "request " + std::to_string(i));
  EXPECT_GT(plain.stats.preemptions, 0u);
  EXPECT_GT(overlapped.stats.preemptions, 0u);
  EXPECT_GT(overlapped.stats.overlapped_steps, 20u);
  EXPECT_GT(overlapped.stats.decode_steps, overlapped.stats.overlapped_steps);  // the preempting steps were plain
}
