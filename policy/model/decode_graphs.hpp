#pragma once
// decode_graphs: the engine's decoding step replayed from CUDA graphs. On a GPU the step of a
// small model is bound by launching ~50 kernels per layer from the host; a captured graph
// launches them all at once. One graph per (rows, attended keys) bucket (paged: rows, block
// table width; slots over an e4m3 cache, decoder::keys_free_decode: rows alone), captured lazily and
// sharing one memory pool; the weights and the KV cache are read in place, so a weight swap
// (copy into the same storage) needs no recapture.
//
// Shape legend: b decode rows (slots 0..b-1), v vocabulary.

#include <cstdint>
#include <memory>
#include <vector>

#include <torch/types.h>

#include "policy/model/decoder.hpp"

namespace caf_agent::policy {

/// The attended-key bound a decode step of `keys` keys runs with (and its graph is captured
/// for): `keys` rounded up to a multiple of 256, at most `capacity`. Rationale: every attention
/// mode's cost follows this bound, flash's too (its seqused_k limits what each row reads, yet on
/// the H200 a step's time rose by ~1.2 and ~3 ms at 64 rows when the bound went from 8k to 16k
/// and from 16k to 32k keys with powers-of-two buckets: bench/results/2026-12-01-policy-h200-graphs.md),
/// so the bucket stays fine and a conversation captures a graph every 256 tokens (~33 ms each).
int64_t decode_key_bucket(int64_t keys, int64_t capacity);

/// The block table width a paged decode step of tables up to `width` blocks of `block_size` runs
/// with (and its graph is captured for): rounded up to cover 256 keys more at a time.
int64_t decode_table_width(int64_t width, int64_t block_size);

/// Replays captured decode steps of one decoder over one KV cache.
class decode_graphs {
 public:
  /// True when this build has CUDA graph support and `device` is a CUDA device.
  static bool supported(torch::Device device);
  /// Graphs of `model` decoding into `cache`; both must outlive this object.
  decode_graphs(const decoder& model, kv_cache& cache);
  ~decode_graphs();
  decode_graphs(const decode_graphs&) = delete;
  decode_graphs& operator=(const decode_graphs&) = delete;

  /// Same contract as decoder::decode with host inputs: token and position per slot 0..b-1,
  /// `keys` = max position + 1. Returns fp32 logits [b, v] (a view valid until the next call).
  torch::Tensor decode(const std::vector<int64_t>& tokens, const std::vector<int64_t>& positions, int64_t keys);
  /// The same with the tokens already on the device (int64 [b], e.g. the last step's draw):
  /// nothing waits for the host to know them.
  torch::Tensor decode(const torch::Tensor& tokens_b, const std::vector<int64_t>& positions, int64_t keys);
  /// A paged cache's step (kv_cache::paged): row i decodes tokens[i] at positions[i] through its
  /// block table *tables[i]. Graphs are kept per (rows, table width), the width rounded up to
  /// cover 256 keys more at a time; tables are padded with the cache's last block, which the
  /// engine never hands to a sequence (padding rows write their key there, at offset 0).
  /// Returns fp32 logits [b, v] (a view valid until the next call).
  torch::Tensor decode(const std::vector<int64_t>& tokens, const std::vector<int64_t>& positions,
                       const std::vector<const std::vector<int64_t>*>& tables);
  /// The same with the tokens already on the device (int64 [b], overlapped decoding).
  torch::Tensor decode(const torch::Tensor& tokens_b, const std::vector<int64_t>& positions,
                       const std::vector<const std::vector<int64_t>*>& tables);
  /// Graphs captured so far and the host seconds their captures took.
  int64_t captures() const;
  double capture_seconds() const;

 private:
  struct state;
  torch::Tensor replay_paged(const std::vector<int64_t>& tokens, const torch::Tensor* tokens_b,
                             const std::vector<int64_t>& positions,
                             const std::vector<const std::vector<int64_t>*>& tables);
  std::unique_ptr<state> state_;
};

}  // namespace caf_agent::policy
