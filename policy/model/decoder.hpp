#pragma once
// decoder: a Llama / Qwen2 / Qwen3 transformer in LibTorch, loaded from and saved to Hugging
// Face checkpoints (config.json + safetensors, parameter names as transformers writes them),
// with an optional value head for the critic. Plain tensors and functions, no torch::nn, so
// the same weights serve the learner (autograd through forward) and the generation engine
// (the KV-cache paths prefill / decode).
//
// Shape legend: b batch, t query positions, s key positions, d hidden, h query heads,
// k key/value heads, e head_dim, v vocab, n slots of the KV cache, c cache capacity (context).

#include <array>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <torch/types.h>

#include "policy/model/engine_choices.hpp"
#include "policy/model/layers.hpp"
#include "policy/model/model_config.hpp"
#include "policy/model/result.hpp"
#include "policy/model/safetensors.hpp"

namespace caf_agent::policy {

/// What to do about the critic's value head (value_head.weight [1, d], value_head.bias [1]).
enum class value_head_mode {
  none,             ///< Policy only; value_head.* tensors in the checkpoint are ignored.
  required,         ///< The checkpoint must contain the value head.
  init_if_missing,  ///< Load it when present, else start from zeros (critic from a policy).
};

/// The KV cache of the generation engine: one preallocated buffer per layer, either a row per
/// slot (a sequence's keys at positions 0..capacity-1 of its slot) or paged: fixed-size blocks
/// that a block table per sequence maps its positions to (position p in block table[p / block
/// size] at offset p % block size).
struct kv_cache {
  /// Keys per layer: slots [slots, kv heads, capacity, e]; paged [kv heads, blocks, block size, e].
  /// Rationale: KV heads outermost make a run of consecutive blocks, in one KV head, one run of
  /// rows that flash reads as one sequence of one KV head: its g query heads need no copy (with
  /// FA2's layout [blocks, block size, k, e] flash copied q, its output and its q back around its
  /// swap of query heads into rows: 72 copy kernels a 64-row step, 176 us on the H200), and a
  /// sequence whose blocks are consecutive is read as a slot's (flash over 256-token blocks as
  /// sequences of their own took the cached agent workload past 100 s against the slots' 46 s:
  /// bench/results/2026-12-04-policy-h200-paged-flash.md).
  std::vector<torch::Tensor> k_nkce;
  std::vector<torch::Tensor> v_nkce;  ///< Values per layer, same shape.
  bool paged = false;                 ///< Rows are blocks addressed through block tables.

  /// Allocates zeroed buffers for `slots` sequences of up to `capacity` tokens.
  static kv_cache allocate(const model_config& config, int64_t slots, int64_t capacity, torch::Device device,
                           torch::ScalarType dtype);
  /// Allocates zeroed buffers of `blocks` blocks of `block_size` tokens (paged).
  static kv_cache allocate_blocks(const model_config& config, int64_t blocks, int64_t block_size, torch::Device device,
                                  torch::ScalarType dtype);
  /// The number of slots (paged: of blocks).
  int64_t slots() const { return k_nkce.empty() ? 0 : k_nkce.front().size(paged ? 1 : 0); }
  /// The capacity in tokens per slot (paged: per block).
  int64_t capacity() const { return k_nkce.empty() ? 0 : k_nkce.front().size(2); }
  /// The buffers hold e4m3 (torch::kFloat8_e4m3fn, engine_options::kv_cache_dtype): keys and values
  /// are rounded to it as they are written and read back in the model's dtype (or by the fp8
  /// decode kernel).
  bool fp8() const { return !k_nkce.empty() && k_nkce.front().scalar_type() == torch::kFloat8_e4m3fn; }
  /// A layer's buffer as ATen's index ops take it: an e4m3 one as its bytes (index_copy_,
  /// index_select, scatter_ and index_put_ take no float8 type), others as they are. A view:
  /// writes through it land in the buffer.
  static torch::Tensor entries(const torch::Tensor& buffer);
  /// A zeroed buffer of `shape` (e4m3 too).
  static torch::Tensor zeros(c10::IntArrayRef shape, torch::Device device, torch::ScalarType dtype);
};

/// How attention reads the KV cache (decode steps, and prefills that continue a cached prefix).
enum class cache_attention {
  /// One masked SDPA call over the slots' first `keys` positions (prefill from an offset: keys
  /// repeated per query head). Exact on every device; on CUDA the masked kernel runs one thread
  /// block per (row, KV head), slow at long context.
  sdpa,
  /// Decode as two batched matrix products with fp32 scores and a masked softmax between (cuBLAS
  /// spreads them over the key length); prefill as sdpa.
  matmul,
  /// The flash kernel's variable-length form over the cache in place: every (slot, KV head) is
  /// one sequence of the cache viewed as [slots * KV heads * capacity, 1, e] with its used length
  /// (seqused_k), so each row reads only its own keys, GQA needs no copy, and decode rows split
  /// the key length over thread blocks (flash-decoding). CUDA with bfloat16 / float16 only.
  /// A paged cache [k, blocks, block size, e] is read alike: each run of consecutive blocks of a
  /// decode row, in each KV head, is one sequence, the runs merged by log-sum-exp (merge_shares, as
  /// the shares of few long rows; one run needs no merge); a prefill gathers each part's cached
  /// keys into one contiguous run first. Rationale: torch's flash op takes
  /// no block table (its kernel's paged
  /// form is not exported).
  flash,
};

/// The torch dtype named by `d` (the engine's and the tools' model_dtype).
inline torch::ScalarType scalar_type_of(model_dtype d) {
  switch (d) {
    case model_dtype::bfloat16:
      return torch::kBFloat16;
    case model_dtype::float16:
      return torch::kFloat16;
    case model_dtype::float32:
      break;
  }
  return torch::kFloat32;
}

/// The transformer. Copyable handle semantics: copies share the parameter tensors.
class decoder {
 public:
  /// An empty decoder, usable only after assigning the result of load() or from_tensors().
  decoder() = default;
  /// Loads `<model_dir>/config.json` and its safetensors into `device` / `dtype`
  /// (kFloat32 or kBFloat16; kHalf also works).
  static result<decoder> load(const std::string& model_dir, torch::Device device, torch::ScalarType dtype,
                              value_head_mode heads = value_head_mode::none);

  /// Builds a decoder from a parsed config and tensors named as in the checkpoint; checks every
  /// expected name and shape.
  static result<decoder> from_tensors(const model_config& config, const tensor_map& tensors, torch::Device device,
                                      torch::ScalarType dtype, value_head_mode heads = value_head_mode::none);

  /// Writes config.json and the parameters (plus value head if present) to `model_dir`.
  status save(const std::string& model_dir, int64_t max_shard_bytes = 0) const;

  /// Final hidden states [b, t, d] of a causal pass over `tokens_bt` (int64), positions
  /// 0..t-1 unless `positions_bt` is given.
  torch::Tensor hidden(const torch::Tensor& tokens_bt, const torch::Tensor& positions_bt = {}) const;
  /// Logits [b, t, v] in fp32.
  torch::Tensor forward(const torch::Tensor& tokens_bt, const torch::Tensor& positions_bt = {}) const;
  /// log p(tokens[:, i+1] | tokens[:, :i+1]) under softmax(logits / temperature): [b, t-1] fp32.
  /// This is the quantity the engine reports as a sampled token's logprob.
  torch::Tensor token_logprobs(const torch::Tensor& tokens_bt, const torch::Tensor& positions_bt = {},
                               double temperature = 1.0) const;
  /// The critic's value per token [b, t] fp32; requires a value head.
  torch::Tensor values(const torch::Tensor& tokens_bt, const torch::Tensor& positions_bt = {}) const;

  /// Runs `tokens_t` of one sequence into cache slot `slot` at positions start..start+t-1 and
  /// returns the logits [v] of its last position (the model's dtype, as decode()'s). With start > 0 the slot's keys at
  /// 0..start-1 are those of the sequence's earlier tokens (a cached prefix: an earlier turn of
  /// the same conversation); the new tokens attend to them and to each other causally.
  torch::Tensor prefill(const torch::Tensor& tokens_t, int64_t slot, kv_cache& cache, int64_t start = 0) const;
  /// One sequence's share of a packed prefill: `length` new tokens for cache slot `slot` at
  /// positions start..start+length-1 (its keys before `start` are cached). A paged cache
  /// ignores `slot` and reads and writes through `blocks`, the sequence's block table, which
  /// covers positions 0..start+length-1.
  struct prefill_part {
    int64_t slot = 0;
    int64_t start = 0;
    int64_t length = 0;
    std::vector<int64_t> blocks;
  };
  /// A packed prefill's cache sequences for flash over the slot layout, one per (KV head j,
  /// part i) in head-major order (x = j * parts + i). `seqs` holds cu_q [x + 1] (part i's
  /// queries under head j start at j * T + the part's offset among the T new tokens), cu_k
  /// [x + 1] (the part's slot's keys of head j start at row (slot * k + j) * c of the flat cache
  /// [slots * k * c, e]; the last entry is unread) and used_k [x] (start + length); `rows`
  /// [k * T] is the flat cache row of each new key, head-major. Offsets must fit int32.
  struct packed_flash_layout {
    std::vector<int32_t> seqs;
    std::vector<int64_t> rows;
    int64_t max_q = 1, max_k = 0;
  };
  /// `paged`: the cache is paged [k, blocks = slots, block size = capacity, e] and each part's
  /// blocks are one run (checked): head j's keys start at row (j * blocks + first block) * c.
  static packed_flash_layout describe_packed_flash(const std::vector<prefill_part>& parts, int64_t kv_heads,
                                                   int64_t capacity, int64_t slots, bool paged = false);
  /// A gathering prefill's rows of the flat cache (one per KV head, token-major, parts end to
  /// end), int64 on `device`: `rows_t` [T * k] those of each part's new tokens (positions
  /// start..start+length-1), `keys_s` [S * k] those of its keys 0..start+length-1. Slots [slots, k,
  /// c, e]: position p of head j of slot s at (s * k + j) * c + p; paged [k, slots = blocks, c =
  /// block size, e]: at (j * blocks + block of p) * c + p % c. Built on the device from the parts'
  /// block tables (one small copy; a 16k-token context was 32k host-built rows a step).
  struct gather_layout {
    torch::Tensor rows_t, keys_s;
  };
  static gather_layout describe_gather(const std::vector<prefill_part>& parts, int64_t kv_heads, int64_t capacity,
                                       int64_t slots, bool paged, torch::Device device);
  /// A paged decode step's flash sequences (decode() with flash over a paged cache of `blocks`
  /// blocks of `block_size` tokens, `kv_heads` KV heads, runs_br3 as decode() takes them, `keys`
  /// its attended-key bound): one per (run l, share c, row i, KV head j) in that order (share-major:
  /// the shares s = l * cut + c of every (row, KV head) y = i * k + j), run l's keys below
  /// positions_b[i] + 1 cut into `cut` consecutive shares (each ceil(used / cut) keys, the last
  /// shorter, none past the run). cu_q [x + 1] = 0..x (one query each), cu_k [x + 1] their first
  /// row in a KV head-major flat cache [k * blocks * block size, e] (the last entry unread),
  /// used_k [x] their key counts, all int32 on positions_b's device; shares = runs x cut (merged
  /// per (row, KV head)); max_k the longest share's bound. call_shares: the shares one flash call
  /// takes (decode makes ceil(shares / call_shares) calls), as many as keep a call's sequences at
  /// most `split_sequences` (at least 1), or all of them when one share's already exceed it or
  /// split_sequences is 0. Rationale: torch's flash splits a decode's keys over thread blocks only
  /// below about 0.8 x 2 x SMs sequences (flash_split_sequences); past it, it runs its 128-query
  /// tile kernel, whose wasted work over a decode's few queries made 64 rows x 2 runs (a shared
  /// prefix) 11.5 ms a step at 16k keys against the slots' 3.4 ms on the H200
  /// (bench/results/2026-12-04-policy-h200-paged-flash.md).
  struct paged_decode_layout {
    torch::Tensor cu_q, cu_k, used_k;
    int64_t shares = 1, max_k = 0, call_shares = 1;
  };
  static paged_decode_layout describe_paged_decode(const torch::Tensor& positions_b, const torch::Tensor& runs_br3,
                                                   int64_t kv_heads, int64_t blocks, int64_t block_size, int64_t keys,
                                                   int64_t cut, int64_t split_sequences);
  /// Prefills several sequences in one pass: `tokens_t` holds the parts' new tokens end to end
  /// (int64, on the model's device), each part in its own slot. Every projection, norm and MLP
  /// runs once over all of them; no part sees another's keys (flash over the slot layout: one
  /// call a layer over every part's cache sequences; otherwise attention per part, as prefill()
  /// does for one sequence). Returns the logits [parts, v] of each part's last token (the model's
  /// dtype, as decode()'s).
  torch::Tensor prefill(const torch::Tensor& tokens_t, const std::vector<prefill_part>& parts, kv_cache& cache) const;
  /// One decoding step for slots 0..b-1: token `tokens_b[i]` at position `positions_b[i]`
  /// (int64, on the model's device), attending to keys 0..positions_b[i] of its slot;
  /// `keys_s` bounds the attended cache length (max position + 1). Returns logits [b, v] in the
  /// model's dtype, rounded as the LM head rounds them (as transformers' are before .float();
  /// sample_tokens reads them as they are, without an fp32 copy of the whole vocabulary).
  /// A paged cache needs `block_tables_bm` (int64 [b, m], on the model's device): row i's
  /// blocks, covering positions 0..positions_b[i] (pad with any valid block id); row i is then
  /// sequence i, not slot i. With flash it also needs `runs_br3` (int64 [b, r, 3], on the model's
  /// device; paged_block_runs()): row i's blocks as runs of consecutive block ids, each its first
  /// block, its first position and its block count (0 for a padding run); the width r sets the
  /// step's kernels.
  torch::Tensor decode(const torch::Tensor& tokens_b, const torch::Tensor& positions_b, int64_t keys_s, kv_cache& cache,
                       const torch::Tensor& block_tables_bm = {}, const torch::Tensor& runs_br3 = {}) const;

  /// The tensors of one decoder block, handles sharing storage with named_parameters().
  struct layer_refs {
    torch::Tensor input_norm_d, q_w, q_b, k_w, k_b, v_w, v_b, o_w, o_b, q_norm_e, k_norm_e;
    torch::Tensor post_norm_d, gate_w, gate_b, up_w, up_b, down_w, down_b;
    /// Set by fuse_projections() only: q, k, v as one weight [(h + 2k) e, d] (bias or undefined),
    /// gate and up as one [2f, d]; the separate fields above are views of them.
    torch::Tensor qkv_w, qkv_b, gate_up_w, gate_up_b;
  };

  /// For inference: every block's q, k and v weights (and biases) become views of one tensor, and
  /// gate and up of another, so that decode and prefill run one GEMM for each group (and RoPE
  /// rotates q and k in one pass). named_parameters() keeps every name and shape (views now), so
  /// assign() writes new weights into the fused storage in place. Training (packed_block, and the
  /// decoders cast() returns) keeps the separate weights. Idempotent.
  void fuse_projections();
  /// True after fuse_projections().
  bool fused() const { return !fused_.empty(); }

  /// Training entry points (learner/train_forward): the pieces of a causal pass over packed
  /// sequences, so that a caller can checkpoint each block and chunk the LM head.
  ///
  /// A decoder whose parameters are `p.to(dtype)` of this one's: differentiable casts, so
  /// gradients of a bf16 compute copy reach fp32 master weights. Same tensors when the dtype
  /// already matches.
  decoder cast(torch::ScalarType dtype) const;
  /// A decoder of this one's config whose parameters are `params`, used as given (no copy, so
  /// autograd reaches whatever they were computed from): every name of named_parameters() with
  /// its shape, all of one floating dtype on this device. The learner's compute copy passes
  /// views of one flat bf16 buffer (learner/flat_params). The RoPE table is shared when the
  /// dtype is this one's, else cast. Errors name a missing, extra or misshapen tensor.
  result<decoder> with_parameters(const tensor_map& params) const;
  /// Token embeddings [1, t, d] of `tokens_1t`.
  torch::Tensor embed(const torch::Tensor& tokens_1t) const;
  /// The weights of block `index` (0 <= index < num_hidden_layers).
  const layer_refs& layer(int64_t index) const { return layers_.at(static_cast<size_t>(index)); }
  /// One block (pre-norm attention and SwiGLU MLP with residuals) with weights `w` over packed
  /// sequences: `x_1td` holds them end to end, `seq_offsets` (n + 1 cumulative lengths from 0
  /// to t) their boundaries, `positions_1t` the positions (restarting at 0 per sequence).
  /// Attention is causal within each sequence and never crosses one (one attention call per
  /// sequence, so CUDA runs the flash kernel with is_causal).
  torch::Tensor packed_block(const layer_refs& w, const torch::Tensor& x_1td, const torch::Tensor& positions_1t,
                             const std::vector<int64_t>& seq_offsets) const;
  /// The final RMSNorm.
  torch::Tensor final_norm(const torch::Tensor& x_xd) const;
  /// The LM head's weight [v, d] (the embedding when tied).
  const torch::Tensor& lm_head_weight() const;

  /// How attention reads the KV cache in decode steps and in prefills that continue a cached
  /// prefix (see cache_attention). Default sdpa.
  void set_cache_attention(cache_attention mode) { cache_attention_ = mode; }
  cache_attention cache_attention_mode() const { return cache_attention_; }
  /// Whether a paged decode step over `cache` needs its rows' block runs (decode()'s runs_br3):
  /// flash over a cache of the model's dtype reads runs; the e4m3 kernel follows the tables.
  bool decode_takes_runs(const kv_cache& cache) const {
    return cache_attention_ == cache_attention::flash && !cache.fp8();
  }
  /// Whether decode steps over `cache` attend through the e4m3 kernel (fused_ops.hpp's
  /// fp8_decode_attention): flash mode, fused kernels, an e4m3 cache the kernel takes.
  bool fp8_decode_kernel(const kv_cache& cache) const;
  /// Whether a decode step over `cache` launches the same kernels whatever `keys` decode() is
  /// given (the e4m3 kernel over slots: each row's keys are cut over the splits on the device), so
  /// that decode_graphs captures one graph a row count instead of one a key bucket: the cached
  /// agent workload captured 3 graphs instead of 95 on an H100
  /// (bench/results/2026-12-06-policy-h100-keys-free-graphs.md).
  bool keys_free_decode(const kv_cache& cache) const { return !cache.paged && fp8_decode_kernel(cache); }
  /// Whether inference passes (forward, prefill, decode) run the fused CUDA kernels where they
  /// apply (fused_ops.hpp): the residual add with the next RMSNorm, SiLU x up, and a decode
  /// step's RoPE with its KV write. Default on; off runs the ATen composites (the parity tests
  /// compare both). No effect on the CPU or in builds without the kernels.
  void set_fused_kernels(bool on) { fused_kernels_ = on; }
  bool fused_kernels() const { return fused_kernels_; }
  /// Flash decode steps of few long rows: when the step's (row, KV head) sequences number at most
  /// half of `sequences` and attend at least 8,192 keys, each is cut into sequences / (rows x KV
  /// heads) shares of consecutive keys that flash attends as sequences of their own, merged by
  /// log-sum-exp (fused_ops.hpp merge_shares). 0 (the decoder's default; an engine sets
  /// engine_options::flash_decode_shares): no cut.
  void set_flash_decode_shares(int64_t sequences) { flash_decode_shares_ = sequences; }
  /// Decode steps of at most `rows` rows (<= 8) run the layers' fused projections (q/k/v, o,
  /// gate/up, down) as matrix-vector kernels (fused_ops.hpp linear_rows) instead of cuBLAS where
  /// the kernels apply and the fused kernels are on (set_fused_kernels). 0 (the decoder's default;
  /// an engine sets engine_options::decode_gemv_rows): cuBLAS.
  void set_decode_gemv_rows(int64_t rows) { decode_gemv_rows_ = rows; }
  /// Decode steps of more rows than set_decode_gemv_rows and at most `rows` (<= 64) run them as
  /// tensor-core kernels of our own (fused_ops.hpp linear_rows' mma_rows) where those apply (bf16
  /// or fp16) and the fused kernels are on. 0 (the decoder's default): cuBLAS.
  void set_decode_mma_rows(int64_t rows) { decode_mma_rows_ = rows; }

  /// Copies `tensors` (checkpoint names) into the existing parameters after checking that the
  /// set of names and every shape match; nothing is changed when the check fails.
  status assign(const tensor_map& tensors);

  /// Every parameter by checkpoint name (the LM head is absent when tied).
  const tensor_map& named_parameters() const { return params_; }
  /// The parsed config.
  const model_config& config() const { return config_; }
  /// The device the parameters live on.
  torch::Device device() const { return device_; }
  /// The parameters' dtype.
  torch::ScalarType dtype() const { return dtype_; }
  /// True when a value head is loaded.
  bool has_value_head() const { return params_.count("value_head.weight") != 0; }

 private:
  /// flash: per (slot, KV head) cache sequence, the query offsets, key offsets into the flat cache
  /// and used key counts (int32, on the device), and the longest used count.
  struct flash_seqs {
    torch::Tensor cu_q, cu_k, used_k;
    int64_t max_q = 1, max_k = 0;
    /// Decode: each (row, KV head) cut into this many consecutive shares of its keys, each a
    /// sequence of its own, merged by log-sum-exp (merge_shares); 1: no cut. See decode().
    int64_t shares = 1;
    /// Decode, paged: the sequences are share-major (describe_paged_decode) and each flash call
    /// takes this many shares; 0: row-major, one call.
    int64_t call_shares = 0;
  };
  /// How attention reads and writes keys: no cache, prefill parts, or a decode step.
  struct cache_use {
    kv_cache* cache = nullptr;        ///< Null for a plain causal pass.
    bool decode = false;              ///< A decode step (else, with a cache, a prefill of `parts`).
    std::vector<prefill_part> parts;  ///< Prefill: the sequences, their tokens end to end.
    flash_seqs prefill_seqs;          ///< Prefill, flash (slots): every part's (slot, KV head) sequences.
    torch::Tensor prefill_rows_kt;    ///< Prefill, flash in place: each new key's row in the flat cache.
    torch::Tensor positions_b;        ///< Decode: where each slot's new key goes.
    torch::Tensor tables_bm;          ///< Decode, paged cache: each row's block table.
    /// Decode, paged cache: each row's new key's row of KV head 0 in the flat cache [k * blocks *
    /// block size, e] (head j's: + j x blocks x block size).
    torch::Tensor rows_b;
    int64_t keys = 0;           ///< Decode: attended cache length (max position + 1).
    torch::Tensor mask_b11s;    ///< Decode, sdpa / matmul: which cached keys each slot may attend to.
    flash_seqs decode_seqs;     ///< Decode, flash.
    bool fp8_kernel = false;    ///< Decode, e4m3 cache: fused_ops.hpp's fp8_decode_attention.
    bool flash_decode = false;  ///< Decode: flash over the cache (flash mode, not an e4m3 cache).
    /// Prefill, paged cache, per part: the block and offset of each new token, and the block
    /// table [1, m] of its keys 0..start+length-1.
    struct paged_part {
      torch::Tensor blocks_t, offsets_t, table_1m;
    };
    std::vector<paged_part> part_pages;
    /// Prefill, flash, gathering (an e4m3 cache, or a paged one some part of which is in more than
    /// one run): each new token's rows in the flat cache (one per KV head, token-major), and the
    /// rows of every part's keys 0..start+length-1 alike, parts end to end (prefill_seqs then
    /// describes the parts over those keys gathered).
    torch::Tensor gather_rows_t, gather_keys_s;
  };
  void bind_layers();
  /// A block's attention half of residual_btd + delta_btd (delta undefined: residual alone, the
  /// first block's embeddings): {that sum, the o projection's output}.
  std::pair<torch::Tensor, torch::Tensor> attention(int64_t layer, const torch::Tensor& residual_btd,
                                                    const torch::Tensor& delta_btd, const rope_angles& angles,
                                                    const cache_use& use) const;
  /// A decode step's {residual + delta, q [b, h, 1, e]}: the input norm and the q/k/v projection
  /// (add_rms_norm_linear), then one fused kernel that rotates q and k and writes k and v into the
  /// cache (fused_ops.hpp's rope_kv_decode); {} where it does not apply (kernels off or not
  /// built, unfused weights, Qwen3's q/k norm, a cache the kernel does not take).
  std::pair<torch::Tensor, torch::Tensor> fused_decode_qkv(int64_t layer, const torch::Tensor& residual_btd,
                                                           const torch::Tensor& delta_btd, const cache_use& use) const;
  /// Attention of projected, rotated q/k/v: writes the keys of a decode step or prefill parts
  /// into the cache and attends; returns [b, h, t, e].
  torch::Tensor unfused_attention(int64_t layer, const torch::Tensor& q_bhte, const torch::Tensor& k_bkte,
                                  const torch::Tensor& v_bkte, const cache_use& use) const;
  /// A decode step's attention of q [b, h, 1, e] over the cache, the step's keys already written.
  torch::Tensor decode_attention(int64_t layer, const torch::Tensor& q_bh1e, const cache_use& use) const;
  /// flash attention of q [x, g, e] (the queries of the cache sequences `seqs` describes end to
  /// end, g query heads per KV head) over those sequences, causal from the bottom right when a
  /// sequence has more than one query; returns [x, g, e]. `lse`: also flash's fp32 log-sum-exp of
  /// each query, [g, x].
  torch::Tensor flash_over_cache(int64_t layer, const torch::Tensor& q_xge, const kv_cache& cache,
                                 const flash_seqs& seqs, torch::Tensor* lse = nullptr) const;
  /// A paged decode step's attention of q [y = b * k, g, e] over the share-major sequences
  /// `seqs` (seqs.call_shares > 0): ceil(shares / call_shares) flash calls, their outputs merged
  /// per (row, KV head) by log-sum-exp; returns [b, h, 1, e].
  torch::Tensor paged_flash_decode(int64_t layer, const torch::Tensor& q_yge, const kv_cache& cache,
                                   const flash_seqs& seqs) const;
  /// A packed prefill's attention with flash over keys gathered (an e4m3 cache, which flash cannot
  /// read, or a paged cache some part of which has blocks in more than one run; else
  /// packed_flash_prefill reads them in place): writes every part's keys, gathers each part's
  /// keys 0..start+length-1 into one contiguous run in the model's dtype (a copy of the whole
  /// context each layer), then one flash call over them. q [1, h, T, e], k and v [1, k, T, e];
  /// returns [1, h, T, e].
  torch::Tensor gathered_flash_prefill(int64_t layer, const torch::Tensor& q_1hte, const torch::Tensor& k_1kte,
                                       const torch::Tensor& v_1kte, const cache_use& use) const;
  /// A packed prefill's attention with flash over the slot layout, or a paged cache whose parts'
  /// blocks are one run each: writes every part's keys into its slot or run (one indexed copy
  /// each for k and v), then one flash call over the parts' (slot or run, KV head) sequences. q [1, h, T, e], k and v
  /// [1, k, T, e]; returns [1, h, T, e].
  torch::Tensor packed_flash_prefill(int64_t layer, const torch::Tensor& q_1hte, const torch::Tensor& k_1kte,
                                     const torch::Tensor& v_1kte, const cache_use& use) const;
  /// One prefill part's attention (sdpa, or a paged cache): writes its keys into its slot,
  /// attends over the slot's cached keys and its own causally. q [1, h, t, e], k and v
  /// [1, k, t, e]; returns [1, h, t, e]. `page`: where its keys go in a paged cache (null for slots).
  torch::Tensor prefill_attention(int64_t layer, const torch::Tensor& q_1hte, const torch::Tensor& k_1kte,
                                  const torch::Tensor& v_1kte, const prefill_part& part, kv_cache& cache,
                                  const cache_use::paged_part* page) const;
  /// q [b, h, t, e], k and v [b, k, t, e] of one block: projections, Qwen3 q/k norm, RoPE.
  /// `fused`: use the fused weights where fuse_projections() made them.
  std::array<torch::Tensor, 3> project_qkv(const layer_refs& w, const torch::Tensor& x_btd, const rope_angles& angles,
                                           bool fused) const;
  torch::Tensor run_layers(torch::Tensor x_btd, const torch::Tensor& positions_bt, const cache_use& use) const;
  /// Logits of the model's dtype as the LM head rounds them; `to_float`: then their fp32 copy.
  torch::Tensor lm_head(const torch::Tensor& hidden_btd, bool to_float = true) const;
  torch::Tensor optional_param(const std::string& name) const;

  model_config config_;
  tensor_map params_;
  std::vector<layer_refs> layers_;
  /// Per block after fuse_projections(): qkv_w, qkv_b, gate_up_w, gate_up_b (empty before).
  std::vector<std::array<torch::Tensor, 4>> fused_;
  rope_table rope_;
  torch::Device device_ = torch::kCPU;
  torch::ScalarType dtype_ = torch::kFloat32;
  cache_attention cache_attention_ = cache_attention::sdpa;
  bool fused_kernels_ = true;
  int64_t flash_decode_shares_ = 0;
  int64_t decode_gemv_rows_ = 0;
  /// decode_gemv_rows_ in a decode step with the fused kernels on, else 0 (linear_rows' max_rows).
  int64_t gemv_rows_of(const cache_use& use) const { return use.decode && fused_kernels_ ? decode_gemv_rows_ : 0; }
  int64_t decode_mma_rows_ = 0;
  /// decode_mma_rows_ in a decode step with the fused kernels on, else 0 (linear_rows' mma_rows).
  int64_t mma_rows_of(const cache_use& use) const { return use.decode && fused_kernels_ ? decode_mma_rows_ : 0; }
};

/// Block tables `tables` (row i's blocks, in order) as runs of consecutive block ids, `width` runs
/// a row (at least the most any row has; padding runs (pad, 0, 0)): per run its first block, its
/// first position and its block count, row-major [rows * width * 3], decoder::decode's runs_br3.
std::vector<int64_t> paged_block_runs(const std::vector<const std::vector<int64_t>*>& tables, int64_t block_size,
                                      int64_t width, int64_t pad);
/// The most runs of consecutive block ids any of `tables` has.
int64_t paged_block_run_count(const std::vector<const std::vector<int64_t>*>& tables);
/// The most sequences (of one query head each) a decode call of torch's flash may have and still
/// split their keys over thread blocks, on a device of `multiprocessors` SMs: FA2's split-KV
/// heuristic splits below 0.8 x 2 x SMs (211 on the H200's 132); 0 when the count is unknown.
int64_t flash_split_sequences(int64_t multiprocessors);

/// The names and shapes a checkpoint of `config` must contain (value head excluded).
std::map<std::string, std::vector<int64_t>> expected_parameter_shapes(const model_config& config);

}  // namespace caf_agent::policy
