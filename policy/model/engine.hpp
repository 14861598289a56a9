#pragma once
// generation_engine: continuous-batching generation over a LibTorch decoder. The rollout calls
// submit() for each request and step() in a loop; each step advances every running sequence by
// one token, admits waiting requests into free KV-cache slots (at most max_batch running), and
// returns the sequences that finished. New weights staged by load_weights() (any thread) are
// applied at the start of a step, so no step mixes two versions.
// No torch types in this header (pimpl): actor translation units include it without LibTorch.

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "policy/model/engine_choices.hpp"
#include "policy/model/generation_types.hpp"
#include "policy/model/result.hpp"

namespace caf_agent::policy {

/// Options of generation_engine::open.
struct engine_options {
  std::string model_dir;                     ///< Hugging Face checkpoint directory (config.json + safetensors).
  std::string device = "cpu";                ///< "cpu", "cuda" or "cuda:N".
  model_dtype dtype = model_dtype::float32;  ///< float32, bfloat16 or float16.
  int32_t max_batch = 8;                     ///< Sequences decoded together (KV-cache slots).
  /// Tokens per sequence, prompt plus generated; 0 means min(max_position_embeddings, 4096).
  /// Rationale: 4096 bounds the preallocated cache (slots x context x layers) by default.
  int32_t max_context = 0;
  /// Requests that may wait for a slot; submit() beyond that fails (retry after step()).
  int32_t max_waiting = 4096;
  /// Replay the decode step from CUDA graphs on a CUDA device (one launch instead of ~50 per
  /// layer). Off only for debugging.
  bool cuda_graphs = true;
  /// Run the decoder's fused CUDA kernels where they apply (policy/model/fused_ops.hpp: residual
  /// add + RMSNorm, SiLU x up, a decode step's RoPE + KV write); false runs the ATen composites
  /// (for comparison). No effect on the CPU or in builds without the kernels.
  bool fused_kernels = true;
  /// Overlapped decoding (slots and paged layouts): launch each step from the tokens the last one
  /// drew, still on the device, and land those tokens on the host (stop checks, results, kept
  /// prefixes) while the new step runs, so the GPU does not wait for the host's bookkeeping between
  /// steps. Tokens, logprobs and finish reasons are the same as without it; step() returns a
  /// sequence one call later, a slot it frees takes a new request a step later, a sequence that
  /// ended on a stop token or stop string decodes one more row whose result is dropped
  /// (engine_stats::overlap_dropped_rows), and a step that applies new weights lands the tokens in
  /// flight first, as does a paged step that might have to preempt (it then runs plainly: the
  /// preempted sequence keeps every token). Rationale: off until measured on the H200.
  bool overlap = false;
  /// Each result carries the logit of every generated token (generation_result::logits): the
  /// model's own output at the token, before the temperature. One gather a step more. For
  /// comparing two engines' logprobs in the spacing of the logit's dtype (their rounding's unit).
  bool report_logits = false;
  /// Flash decode steps of few long rows (at most half this many (row, KV head) sequences, at
  /// least 8,192 keys) cut each row's keys into shares that make this many sequences, merged by
  /// log-sum-exp (decoder::set_flash_decode_shares); 0: no cut. Rationale: flash's split-KV combine
  /// kernel runs 2 blocks at one row of 131k keys (662 us of a 2.08 ms step on the H200); cut into
  /// 64 sequences the combine and the merge took 209 us and the 131k decode went from 441 to 532
  /// tok/s with decode_gemv_rows 1 (16: 500, 256: 503; bench/results/2026-12-04-policy-h200-shares-gemv.md).
  int32_t flash_decode_shares = 64;
  /// Decode steps of at most this many rows (0-8) run the layers' projections as matrix-vector
  /// kernels instead of cuBLAS (decoder::set_decode_gemv_rows; CUDA builds with the kernels, with
  /// fused_kernels on); 0: cuBLAS. Rationale: 1, measured: at one row of 131k keys the kernels
  /// took 463 us of a step where cuBLAS's took 543 us, and the decode went from 439 to 459 tok/s
  /// on the H200 (bench/results/2026-12-04-policy-h200-shares-gemv.md); 2-8 rows not yet measured.
  int32_t decode_gemv_rows = 1;
  /// Decode steps of more rows than decode_gemv_rows and at most this many (0-64) run the layers'
  /// projections as tensor-core kernels of our own (decoder::set_decode_mma_rows; bf16 or fp16,
  /// CUDA builds with the kernels, with fused_kernels on): the first weights load before the
  /// programmatic wait and SwiGLU is the gate/up kernel's epilogue. 0: cuBLAS. Off: a 64-row layer's
  /// four projections take 72 us at the best shares against cuBLAS's 26 on an H100; too few warps
  /// (bench/results/2026-12-06-policy-h100-mma-ncu.md).
  int32_t decode_mma_rows = 0;
  /// The fused kernels launch as programmatic dependents of the kernel before them (Hopper:
  /// fused_kernels.hpp set_programmatic_launch): each may start during the last one's tail, and
  /// the matrix-vector kernels load their first weights before waiting for its results. The same
  /// tokens either way. Process-wide (the last engine opened sets it). Rationale: on the H200 the
  /// 1-row 131k decode over e4m3 went from 663 to 724 tok/s and the cached agent workload from
  /// 43.76 to 42.22 s (bench/results/2026-12-05-policy-h200-e4m3-fused-gemv.md, call 1).
  bool programmatic_launch = true;
  /// Keep a finished sequence's keys in its slot, so that a later request whose prompt starts
  /// with the same tokens (the next turn of the same conversation) prefills only what is new.
  /// Kept prefixes yield to new sequences (least recently used first) and are dropped when new
  /// weights are applied.
  bool prefix_cache = true;
  /// Prompt tokens prefilled per step, over all sequences being admitted; a longer prompt is
  /// prefilled over several steps while the running sequences go on decoding, so one long
  /// observation does not stall them. 0: each prompt at once. Rationale: 8,192, not 2,048: the
  /// cached agent workload on an H100 took 35.23 and 35.27 s (two calls) against 38.34 s, its
  /// prefilling steps 8.1 s against 13.9 s (bench/results/2026-12-06-policy-h100-prefill-chunk.md);
  /// 16,384: 34.61-34.66 s (three runs, two calls) against 35.05-35.13 s with 8,192, its prefilling
  /// steps 6.4 s against 8.1 s (bench/results/2026-12-06-policy-h100-early-tiles-rope-gemv.md). A
  /// step that carries a full chunk is longer, which the decoding rows see as one slower token;
  /// 32,768 ran 34.33 s once, its decode steps slower again (1,442 us a step besides attention).
  int32_t prefill_chunk = 16384;
  /// While others decode, prompts waiting to be prefilled are held for up to this many steps so
  /// that one prefill pass takes several of them (a pass runs at once when they fill
  /// prefill_chunk, when nothing decodes, or when requests wait for a slot). 0: every step
  /// prefills what has arrived. Rationale: prefilling steps run eagerly and are bound by the
  /// host's launches; in the cached agent workload 960 of them carried ~1,035 tokens each as the
  /// 64 conversations' turns arrived a few at a time, 11.1 s of a 38.25 s run on an H100 beyond
  /// their decode (bench/results/2026-12-06-policy-h100-mma-rows.md). Off: measured, held passes
  /// cut the prefill passes but the held rows' wait moved the time into the decode steps (4 steps:
  /// 36.69 s against 38.34; 8 steps with chunks of 8,192: 35.23, as the chunks alone;
  /// bench/results/2026-12-06-policy-h100-prefill-chunk.md).
  int32_t prefill_wait_steps = 0;
  /// How decode steps and prefills after a cached prefix read the KV cache (policy::cache_attention):
  /// sdpa, matmul, flash (CUDA, bfloat16 / float16), or automatic ("auto"): flash where it
  /// applies, else sdpa. Rationale: flash reads only each row's used keys and splits long rows over
  /// thread blocks (bench/results/2026-12-01-policy-h200-decode.md).
  cache_attention_choice cache_attention = cache_attention_choice::automatic;
  /// How keys are stored: slots (a preallocated row of max_context tokens per sequence) or
  /// paged (blocks of kv_block_size tokens taken from one pool as a sequence grows, returned
  /// when a kept prefix is evicted; a request is admitted only when the free blocks cover its
  /// prompt plus a block of decode headroom per running sequence, and a sequence that needs a
  /// block when none is left preempts the most recently admitted one, which is recomputed later).
  /// Paged reads keys in place with flash (runs of consecutive blocks as flash sequences) and
  /// replays CUDA graphs; sdpa and matmul gather them. Rationale: slots stays the default: on the
  /// H200 the two are within 1-3% on every bench workload (64 x 512, the cached agent workload,
  /// 131k decode: bench/results/2026-12-04-policy-h200-paged-in-place.md), slots has the longer
  /// record, and on the CPU paged gathers its keys (docs/POLICY_MODEL.md).
  kv_layout_kind kv_layout = kv_layout_kind::slots;
  /// Paged: tokens per block. Rationale: 256 keeps the runs of a shared prefix whole in few
  /// blocks; 1,024 halved the 64 x 512 bench on the H200 (a block of decode headroom per running
  /// sequence admits fewer at once: bench/results/2026-12-04-policy-h200-paged-flash.md).
  int32_t kv_block_size = 256;
  /// The KV cache's element type: the model's (auto) or e4m3 bytes (fp8_e4m3), half of bf16's.
  /// e4m3 needs a bf16 or fp16 model. With flash cache attention (auto's choice on CUDA) and the
  /// kernels, decode steps read it with fused_ops.hpp's fp8_decode_attention (tensor cores, slots
  /// or paged blocks of a multiple of 16 tokens) and prefills gather each part's keys into the
  /// model's dtype for flash; otherwise attention reads its keys converted (sdpa, matmul). Rationale: decode at
  /// long context reads the cache, not the weights: the cached agent workload's bound is 82%
  /// key traffic in bf16 (docs/POLICY_MODEL.md). Off by default: it changes the model's outputs
  /// (keys and values lose 5 mantissa bits), where auto keeps HF parity.
  kv_cache_dtype_kind kv_cache_dtype = kv_cache_dtype_kind::automatic;
  /// Paged: tokens of KV storage in all (rounded up to whole blocks); 0 means max_batch x
  /// max_context with each seat's share rounded up to whole blocks (at least the slot layout's
  /// memory: every seat can hold a max_context sequence). max_context may exceed it / max_batch
  /// (up to max_position_embeddings): one sequence may use every block.
  int64_t kv_cache_tokens = 0;

  /// Checks ranges and the rules between settings.
  status validate() const;
};

/// What the engine did since open(): the work of prefills and decode steps, and the prefix
/// cache's hits, copies and evictions. Keys computed = prefilled_tokens + decoded_tokens.
struct engine_stats {
  uint64_t admissions = 0;           ///< Requests that entered a slot.
  uint64_t prefilled_tokens = 0;     ///< Prompt tokens run through prefill (their keys computed).
  uint64_t reused_tokens = 0;        ///< Prompt tokens whose keys came from the prefix cache.
  uint64_t copied_tokens = 0;        ///< Of those, keys copied from another slot's kept prefix (paged: shared).
  uint64_t decoded_tokens = 0;       ///< Tokens run through decode steps (one key each).
  uint64_t decode_steps = 0;         ///< Steps that ran a decode pass.
  uint64_t attended_keys = 0;        ///< Keys read by decode rows, summed (the KV traffic of decoding).
  uint64_t prefix_hits = 0;          ///< Admissions that reused at least one cached key.
  uint64_t evictions = 0;            ///< Kept prefixes given up (wholly or in part) to make room.
  uint64_t invalidations = 0;        ///< Kept prefixes dropped because new weights were applied.
  uint64_t graph_replays = 0;        ///< Decode steps replayed from a CUDA graph (the others ran eagerly).
  uint64_t graph_captures = 0;       ///< CUDA graphs captured for decode steps (one per new bucket).
  double graph_capture_seconds = 0;  ///< Host time capturing them, once earlier work is done (the GPU idles meanwhile).
  uint64_t overlapped_steps = 0;     ///< Decode steps launched before the last step's tokens reached the host.
  uint64_t prefill_passes = 0;       ///< Steps that ran a prefill pass (packed parts of the prompts being admitted).
  uint64_t prefill_holds = 0;        ///< Steps whose prefill was held for more prompts (prefill_wait_steps).
  /// Host time inside prefill passes. On a GPU nothing in a pass waits for the device, so this is
  /// the time to launch its kernels: near the pass's device time, the passes are bound by the host.
  /// On the CPU it is the pass's compute.
  double prefill_host_seconds = 0;
  /// Host time blocked until a step's drawn tokens reached it (the step's one synchronisation,
  /// overlapped or not): the device was behind the host for that long. Zero on the CPU.
  double wait_seconds = 0;
  uint64_t overlap_dropped_rows =
      0;  ///< Overlapped rows of sequences that had ended the step before (a stop token or string).
  // Paged layout only (zero for slots):
  uint64_t preemptions = 0;        ///< Running sequences put back to wait because no block was left.
  uint64_t recomputed_tokens = 0;  ///< Prefilled tokens whose keys had been computed before (preempted or evicted).
  uint64_t moved_tokens = 0;       ///< Keys copied to keep a sequence's blocks one run (admission, decode growth).
  /// Runs of consecutive blocks of decode rows, summed (/ decoded_tokens: runs a row; flash reads
  /// each run as a sequence of its own).
  uint64_t decode_block_runs = 0;
  uint64_t kv_blocks = 0;       ///< Blocks in the pool (now).
  uint64_t kv_blocks_free = 0;  ///< Of those, on the free list (now).
  uint64_t kv_blocks_kept = 0;  ///< Of those, held by kept prefixes (now; the rest are running sequences').
};

/// A field of engine_stats counts up from open() (a difference of two snapshots is the work between
/// them) or is a value of now (the pool's block counts).
enum class stat_kind { count, now };

/// Calls f(name, member pointer, kind) for every field of engine_stats, in declaration order (name:
/// the field's). Code that reports, subtracts or exports them all goes through here, so that a new
/// field is one line here and reaches every report.
template <class F>
constexpr void for_each_stat(F&& f) {
  f("admissions", &engine_stats::admissions, stat_kind::count);
  f("prefilled_tokens", &engine_stats::prefilled_tokens, stat_kind::count);
  f("reused_tokens", &engine_stats::reused_tokens, stat_kind::count);
  f("copied_tokens", &engine_stats::copied_tokens, stat_kind::count);
  f("decoded_tokens", &engine_stats::decoded_tokens, stat_kind::count);
  f("decode_steps", &engine_stats::decode_steps, stat_kind::count);
  f("attended_keys", &engine_stats::attended_keys, stat_kind::count);
  f("prefix_hits", &engine_stats::prefix_hits, stat_kind::count);
  f("evictions", &engine_stats::evictions, stat_kind::count);
  f("invalidations", &engine_stats::invalidations, stat_kind::count);
  f("graph_replays", &engine_stats::graph_replays, stat_kind::count);
  f("graph_captures", &engine_stats::graph_captures, stat_kind::count);
  f("graph_capture_seconds", &engine_stats::graph_capture_seconds, stat_kind::count);
  f("overlapped_steps", &engine_stats::overlapped_steps, stat_kind::count);
  f("prefill_passes", &engine_stats::prefill_passes, stat_kind::count);
  f("prefill_holds", &engine_stats::prefill_holds, stat_kind::count);
  f("prefill_host_seconds", &engine_stats::prefill_host_seconds, stat_kind::count);
  f("wait_seconds", &engine_stats::wait_seconds, stat_kind::count);
  f("overlap_dropped_rows", &engine_stats::overlap_dropped_rows, stat_kind::count);
  f("preemptions", &engine_stats::preemptions, stat_kind::count);
  f("recomputed_tokens", &engine_stats::recomputed_tokens, stat_kind::count);
  f("moved_tokens", &engine_stats::moved_tokens, stat_kind::count);
  f("decode_block_runs", &engine_stats::decode_block_runs, stat_kind::count);
  f("kv_blocks", &engine_stats::kv_blocks, stat_kind::now);
  f("kv_blocks_free", &engine_stats::kv_blocks_free, stat_kind::now);
  f("kv_blocks_kept", &engine_stats::kv_blocks_kept, stat_kind::now);
}
// Every field is 8 bytes and listed above (a field added without its line fails here).
static_assert(sizeof(engine_stats) == 8 * [] {
  int n = 0;
  for_each_stat([&](const char*, auto, stat_kind) { ++n; });
  return n;
}());

/// Generates tokens for many sequences at once. One thread calls submit / step / cancel;
/// load_weights and policy_version may be called from any thread.
class generation_engine {
 public:
  /// Loads the model and allocates the KV cache.
  static result<std::unique_ptr<generation_engine>> open(const engine_options& options);
  ~generation_engine();
  generation_engine(const generation_engine&) = delete;
  generation_engine& operator=(const generation_engine&) = delete;

  /// Checks a request without queueing it (const: safe beside other threads' const calls):
  /// empty or too long prompt (paged: more blocks than the whole cache), token ids outside the
  /// vocabulary, bad sampling parameters.
  status check(const generation_request& request) const;
  /// Queues a request and returns its id; fails for an empty or too long prompt, token ids
  /// outside the vocabulary, bad sampling parameters, or a full waiting queue.
  result<uint64_t> submit(generation_request request);
  /// Applies staged weights, advances all running sequences one token, admits waiting ones,
  /// and returns those that finished. Fails only on a device error (e.g. out of memory).
  result<std::vector<generation_result>> step();
  /// Steps until nothing runs or waits; returns every finished sequence in finishing order.
  result<std::vector<generation_result>> run_until_idle();
  /// Ends a waiting or running request now; its partial result has reason aborted.
  std::optional<generation_result> cancel(uint64_t id);

  /// Reads a checkpoint (same architecture), or the tensors staged in this process when
  /// `model_dir` is "inproc:<key>" (policy/model/weight_exchange.hpp), places it on the device and stages it; the next
  /// step() swaps it in and reports `version`. A later call replaces a still-pending one.
  /// Fails, changing nothing, on missing files, shape mismatch or a version older than the
  /// current one.
  status load_weights(const std::string& model_dir, uint64_t version);
  /// The version of the weights that the next step uses (0 for the weights open() loaded).
  uint64_t policy_version() const;

  /// Counters since open(); call from the thread that calls step().
  engine_stats stats() const;
  /// Slots holding a finished sequence's kept prefix (not running).
  size_t kept_prefixes() const;
  /// Forgets every kept prefix: their slots or blocks are free again, and later prompts are
  /// prefilled in full. Returns how many were dropped. For a warm-up whose keys no later request
  /// shares: left kept, a paged one holds the first blocks of a seat's share of the pool and
  /// pushes that seat's sequence into the next seat's (kv_block_pool::take_run). Call from the
  /// thread that calls step().
  size_t forget_prefixes();

  /// Sequences holding a KV-cache slot.
  size_t running() const;
  /// Requests waiting for a slot.
  size_t waiting() const;
  /// True when nothing runs or waits.
  bool idle() const { return running() == 0 && waiting() == 0; }
  /// The context limit in tokens (prompt plus generated).
  int32_t max_context() const;
  /// Tokens of KV storage: max_batch x max_context (slots), or blocks x block size (paged).
  /// Fixed at open(), so safe from any thread.
  int64_t kv_capacity_tokens() const;
  /// The vocabulary size of the model.
  int32_t vocab_size() const;

 private:
  struct impl;
  explicit generation_engine(std::unique_ptr<impl> impl);
  std::unique_ptr<impl> impl_;
};

}  // namespace caf_agent::policy
