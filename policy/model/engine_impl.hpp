#pragma once
// engine_impl: the state of generation_engine (its pimpl), shared by engine.cpp (the public
// calls, admission and decoding in the slot layout, sampling), engine_paged.cpp (the paged
// layout's decoding, admission and preemption) and engine_overlap.cpp (overlapped decoding).
// Internal to policy/model.

#include <atomic>
#include <chrono>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <vector>

#include <c10/core/Event.h>
#include <torch/types.h>

#include "policy/model/decode_graphs.hpp"
#include "policy/model/decoder.hpp"
#include "policy/model/engine.hpp"
#include "policy/model/kv_block_pool.hpp"

namespace caf_agent::policy {
namespace engine_detail {

// One request from submit() to its result.
struct sequence {
  uint64_t id = 0;
  generation_request request;
  std::mt19937_64 rng;
  int64_t slot = -1;
  int64_t cached = 0;       // tokens whose keys are in the cache
  bool prefilling = false;  // holds a slot, prompt keys not all computed yet (chunked prefill)
  generation_result out;
  // What prefill computes keys for: the prompt, or after a preemption (paged) the prompt and
  // every generated token but the last, which the next decode step then takes as its input.
  std::vector<int32_t> target;
  // Paged: this sequence's blocks (its block table), when it was admitted, and the positions
  // below which keys had been computed before (preempted or evicted: prefilling them is recomputation).
  std::vector<int64_t> blocks;
  uint64_t admitted_at = 0;
  // The engine's admit_calls when it joined the prefill queue (prefill_wait_steps).
  uint64_t prefill_queued = 0;
  int64_t recompute_below = 0;
  // Overlapped decoding: tokens drawn for this sequence that have not reached the host yet (0-2).
  int64_t unlanded = 0;
};

// Overlapped decoding: a launched step whose tokens are still on their way to the host.
struct flight {
  std::vector<std::pair<int64_t, uint64_t>> rows;  // slot and sequence id, in tokens_b's order
  torch::Tensor tokens_b;                          // on the device: the next step's inputs
  torch::Tensor host_nr;                           // host_rows, copied asynchronously
  std::optional<c10::Event> copied;                // CUDA: recorded after the copy
};

// The keys a finished sequence left in its slot: its tokens whose keys are cached.
struct kept_prefix {
  std::vector<int32_t> tokens;
  uint64_t last_used = 0;
};

// Where an admitted request goes and which of its prompt's keys it finds cached.
struct slot_choice {
  int64_t slot = -1;       // -1: no slot can take it now
  int64_t reuse = 0;       // prompt tokens whose keys will be in the slot before prefill
  int64_t copy_from = -1;  // slot whose first `reuse` keys are copied in, or -1
};

/// Seconds of the host's clock since `start`.
inline double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace engine_detail

struct generation_engine::impl {
  using sequence = engine_detail::sequence;
  using kept_prefix = engine_detail::kept_prefix;
  using slot_choice = engine_detail::slot_choice;

  engine_options options;
  decoder model;
  kv_cache cache;
  std::unique_ptr<decode_graphs> graphs;  // set on CUDA devices unless disabled
  int64_t context = 0;
  std::deque<sequence> waiting;
  std::vector<std::optional<sequence>> slots;
  std::vector<std::optional<kept_prefix>> kept;  // per slot, only where no sequence runs
  std::deque<int64_t> prefilling;                // slots whose prompts are partly prefilled, in admission order
  uint64_t clock = 0;                            // orders kept prefixes by last use
  engine_stats stats;
  uint64_t next_id = 1;
  std::atomic<uint64_t> version{0};
  std::mutex pending_mutex;  // guards pending / pending_version
  std::optional<tensor_map> pending;
  uint64_t pending_version = 0;
  // Paged layout: the block pool (free list, kept prefixes), admissions so far (orders the
  // running sequences for preemption), and sequences that ended outside sample_and_advance.
  std::optional<kv_block_pool> pool;
  uint64_t admission_clock = 0;
  std::vector<generation_result> ended;
  std::optional<engine_detail::flight> in_flight;  // overlapped decoding's last launched step

  size_t running() const {
    return static_cast<size_t>(std::count_if(slots.begin(), slots.end(), [](const auto& s) { return s.has_value(); }));
  }
  void apply_pending();
  torch::Tensor decode_running(std::vector<sequence*>& rows);
  torch::Tensor admit(std::vector<sequence*>& rows);
  // Whether this step's prefill pass waits for more prompts (prefill_wait_steps), given the
  // step's decode rows and its token budget.
  bool hold_prefill(const std::vector<sequence*>& rows, int64_t budget) const;
  uint64_t admit_calls = 0;  // admit() calls so far: the steps a queued prompt has waited
  void claim_slot(const slot_choice& choice);
  slot_choice choose_slot(const std::vector<int32_t>& prompt) const;
  void keep_prefix(sequence& seq);
  // Paged layout.
  // `from_flight`: an overlapped step's, each row's input its pending token where it has one.
  torch::Tensor decode_paged(std::vector<sequence*>& rows, bool from_flight = false);
  // Paged overlap: whether this step's rows find their next blocks without a preemption.
  bool paged_overlap_fits() const;
  bool admit_paged();
  // Paged: the first block of seat `seat`'s share of the pool (blocks / max_batch a seat), where
  // a new sequence there starts if it can (kv_block_pool::take).
  int64_t seat_base(size_t seat) const;
  /// Paged: whether placement keeps each row's blocks one run, moving keys to do so. Flash reads a
  /// row's runs as sequences of its own (a cache of the model's dtype; the CPU's modes keep the
  /// same placement). An e4m3 cache's decode kernel follows the tables and its prefills gather, so
  /// nothing reads runs there and no key is moved.
  bool keeps_runs() const { return !cache.fp8(); }
  /// Paged: copies the keys of blocks `from` into the first from.size() blocks of `to`, every layer.
  void copy_blocks(const std::vector<int64_t>& from, const std::vector<int64_t>& to);
  void preempt(size_t seat);
  void requeue(size_t seat);
  std::vector<generation_result> sample_and_advance(const torch::Tensor& logits_rv, const std::vector<sequence*>& rows);
  // A step's draws for the host, [2 or 3, rows] fp32: the tokens (exact below 2^24), their
  // logprobs and, with report_logits, their logits.
  torch::Tensor host_rows(const torch::Tensor& logits_rv, const torch::Tensor& tokens_r,
                          const torch::Tensor& logprobs_r) const;
  // Appends row i of host_rows' copy to seq's result.
  void append_drawn(sequence& seq, const at::TensorAccessor<float, 2>& host, int64_t i) const;
  bool finished(sequence& seq) const;
  // Overlapped decoding (engine_overlap.cpp).
  bool can_overlap();
  bool ends_before_decoding(const sequence& seq) const;
  torch::Tensor decode_from_flight(std::vector<sequence*>& rows);
  // Each decode row's input token on the device (null rows: 0): its pending token in the last
  // flight's draw, else its last landed token.
  torch::Tensor flight_inputs(const std::vector<const sequence*>& rows);
  std::vector<generation_result> overlapped_step();
  std::vector<generation_result> land(engine_detail::flight f);
};

}  // namespace caf_agent::policy
