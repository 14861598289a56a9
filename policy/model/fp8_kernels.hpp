#pragma once
// fp8_kernels: decode attention over a KV cache stored as 8-bit floats (e4m3, no scale: each
// key and value element is its bf16 value rounded to e4m3 and saturated at +-448), on raw device
// pointers like fused_kernels.hpp (nvcc compiles them without LibTorch's headers). The torch
// entry point is fused_ops.hpp's fp8_decode_attention.
//
// Shape legend: b decode rows, h query heads, k KV heads, g = h / k, e head_dim, c slot capacity
// (paged: block size), m block-table width.

#include <cstdint>

#include "policy/model/fused_kernels.hpp"

namespace caf_agent::policy::kernels {

/// Query heads per KV head fp8_decode_attention takes at most (one tensor-core tile's 16 rows
/// hold them; more would need a second tile).
constexpr int64_t fp8_attention_max_g = 8;
/// Splits of a (row, KV head) fp8_decode_attention takes at most (its join keeps their weights
/// in shared memory).
constexpr int64_t fp8_attention_max_splits = 2048;
/// Warps of a split of fp8_decode_attention.
constexpr int64_t fp8_attention_warps = 4;

/// Splits of each (row, KV head) when `pairs` pairs of head_dim e attend rows of at most
/// `row_keys` keys (a slot's capacity, or a block table's keys): as many as let the step's split
/// blocks fit the current device at once (one wave), fewer where a full row would leave some
/// empty, at most fp8_attention_max_splits. It depends on the rows and the cache, not on the keys
/// they attend: a row's keys are cut over the splits on the device, from its position (so a decode
/// graph of e4m3 attention is captured once per row count, decoder::keys_free_decode). `stream`:
/// the launch's (no occupancy query is made while it captures a graph).
int64_t fp8_attention_splits(int64_t pairs, int64_t row_keys, int64_t e, void* stream);
/// True when fp8_decode_attention takes g query heads per KV head of head_dim e (64 or 128).
bool fp8_attention_supports(int64_t g, int64_t e);

/// One decode step's attention over an e4m3 KV cache. Row r of q_bhe [b, h, e] (bf16 or fp16,
/// `dtype`; heads kh * g .. kh * g + g - 1 share KV head kh) attends its keys 0..positions_b[r]
/// (int64), scaled 1 / sqrt(e); out_bhe [b, h, e] in q's dtype.
/// Slots (tables_bm null): the caches are [n, k, c, e], row r's keys in slot r; a row at position
/// c - 1 (a dummy row) attends key 0 only. Paged (tables_bm int64 [b, m]): the caches are
/// [k, blocks, c, e] (c the block size, a multiple of 16), row r's position p in block
/// tables_bm[r][p / c] at offset p % c; keys past m * c are not read.
/// Each (row, KV head) is cut into `splits` splits of fp8_attention_warps warps, each warp the
/// row's keys over the splits' warps (a multiple of 32 from 64 up; later splits may have none);
/// part_o [b * k * splits * g * e] and part_lse [b * k * splits * g] are fp32 scratch. Scores q.k and weights x values
/// on tensor cores (fp16 operands: e4m3 keys and values convert exactly; q and the weights round to fp16), fp32 sums,
/// one rounding at the end. Two launches: the splits, then their join by log-sum-exp.
int fp8_decode_attention(element dtype, const void* q_bhe, const uint8_t* k_cache, const uint8_t* v_cache,
                         const int64_t* positions_b, const int64_t* tables_bm, void* out_bhe, float* part_o,
                         float* part_lse, int64_t b, int64_t k, int64_t g, int64_t e, int64_t c, int64_t blocks,
                         int64_t m, int64_t splits, void* stream);

}  // namespace caf_agent::policy::kernels
