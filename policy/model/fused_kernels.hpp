#pragma once
// fused_kernels: the CUDA kernels behind fused_ops.hpp, on raw device pointers (no torch types,
// so nvcc compiles them without LibTorch's headers). Each launch is asynchronous on `stream`
// and returns the launch's error (cudaSuccess as 0). Element types: bf16, fp16, fp32, named
// by `dtype` (0 bf16, 1 fp16, 2 fp32).
//
// Shape legend: x rows, d hidden, f intermediate, b decode rows, h query heads, k KV heads,
// e head_dim, n cache slots, c slot capacity, p table positions.

#include <cstdint>

namespace caf_agent::policy::kernels {

enum class element : int { bf16 = 0, fp16 = 1, fp32 = 2 };

/// sum_xd = residual_xd + delta_xd (when delta_xd is not null; else sum_xd is not written and
/// residual_xd is normalised), then normed_xd = weight_d * rms_norm(sum). Rows contiguous.
int add_rms_norm(element dtype, const void* residual_xd, const void* delta_xd, const void* weight_d, void* sum_xd,
                 void* normed_xd, int64_t x, int64_t d, float eps, void* stream);

/// out_xf = silu(gate_up_x2f[:, :f]) * gate_up_x2f[:, f:], rows contiguous.
int silu_mul(element dtype, const void* gate_up_x2f, void* out_xf, int64_t x, int64_t f, void* stream);

/// One decode step's RoPE and KV-cache write: qkv_bne [b, h + 2k, e] (q heads, k heads, v heads)
/// of rows at positions_b (int64); q rotated into q_bhe, k rotated and v as is into the caches
/// [n, k, c, e] at [row, head, position], or with rows_b (int64, not null) into paged caches
/// viewed as rows [k * c, e] (c a KV head's rows) at rows_b[row] + head * c.
/// cos_pe / sin_pe: [p, e] tables (duplicated halves). fp8_cache: the caches hold e4m3 bytes
/// (each key and value rounded to e4m3, saturated at +-448) instead of the element type.
int rope_kv_decode(element dtype, const void* qkv_bne, const int64_t* positions_b, const int64_t* rows_b,
                   const void* cos_pe, const void* sin_pe, void* q_bhe, void* k_cache_nkce, void* v_cache_nkce,
                   int64_t b, int64_t h, int64_t k, int64_t e, int64_t c, bool fp8_cache, void* stream);

}  // namespace caf_agent::policy::kernels

namespace caf_agent::policy::kernels {

/// One token per row of logits_bv (fp32, bf16 or fp16, each read as its fp32 value; rows
/// contiguous, row stride v), the composite's rules (sampling.cpp, no top-k / top-p): params_4b holds per row, fp32,
/// its temperature (1 for greedy rows), its uniform in [0, 1), 1 for a greedy row (argmax, first index on ties) else 0,
/// and a forced token (>= 0) or -1. Inverse-CDF draw over softmax(logits / temperature); logprob_b = log softmax(logits
/// / temperature) at the token. Three launches (each row cut into up to 32 segments of at least 4,096 entries);
/// segments_work: sample_rows_work_bytes(b, v) bytes of device scratch, 8-byte aligned. b <= 65535.
int64_t sample_rows_work_bytes(int64_t b, int64_t v);
int sample_rows(element dtype, const void* logits_bv, const float* params_4b, int64_t* tokens_b, float* logprobs_b,
                void* segments_work, int64_t b, int64_t v, void* stream);

/// Attention over a row's keys cut into `shares` consecutive shares, merged: out_xge [x, g, e]
/// (x = y * shares) holds each share's attention output (row r's shares at r * shares ..; with
/// share_major, share s of row r at s * y + r), lse_gx
/// its log-sum-exp per query (fp32, [g, x]: flash's layout), used_x its key count (int32; a share
/// of 0 keys is left out). merged_yge [y, g, e] = sum_s exp(lse_s - max) out_s / sum_s exp(lse_s -
/// max), in fp32, rounded once to the element type.
int merge_shares(element dtype, const void* out_xge, const float* lse_gx, const int32_t* used_x, void* merged_yge,
                 int64_t y, int64_t shares, int64_t g, int64_t e, bool share_major, void* stream);

/// Whether this process's kernels launch as programmatic dependents of the kernel before them
/// (programmatic_launch.cuh: each may start during the last one's tail, waiting for its results
/// before reading them; the same bits either way). Off by default. Process-wide: engines of one
/// process share it, the last one set wins (it changes timing only).
void set_programmatic_launch(bool on);

/// The current CUDA device's multiprocessor count, read once a process; 0 where it cannot be read.
int multiprocessor_count();

/// Rows gemv_rows takes at most.
constexpr int64_t gemv_max_rows = 8;

/// y_bn = x_bd w_nd^T + bias_n (bias_n may be null) for b <= gemv_max_rows rows: one to eight warps
/// per output feature (more when there are few features) reading the weight once in 16-byte
/// vectors, fp32 sums, one rounding to the element type.
/// x and w contiguous and 16-byte aligned, d a multiple of 16 bytes' worth of elements; y rows
/// contiguous. `silu_mul`: w_nd is a fused gate/up projection (n even: gate rows, then up rows)
/// and y is silu_mul's [b, n / 2] of its output: the bits of silu_mul over the plain y wherever
/// the plain kernel splits a feature over at most 4 warps (it splits over 8 only for fewer than
/// ~4 x SMs features of at least 512 vectors).
int gemv_rows(element dtype, const void* x_bd, const void* w_nd, const void* bias_n, void* y_bn, int64_t b, int64_t n,
              int64_t d, bool silu_mul, void* stream);

/// Rows mma_rows takes at most.
constexpr int64_t mma_max_rows = 64;

/// Whether mma_rows takes these shapes: bf16 or fp16, 1 <= b <= mma_max_rows, d a multiple of 8
/// elements (16 bytes), n even with `silu_mul`.
bool mma_rows_fits(element dtype, int64_t b, int64_t n, int64_t d, bool silu_mul);

/// Readies mma_rows' kernels (their shared memory over the default, their occupancy) outside a
/// graph capture: an mma_rows call first made while its stream captures fails otherwise. Once a
/// process is enough; mma_rows readies a kernel itself when its stream is not capturing.
int mma_rows_prepare();

/// gemv_rows' product and silu_mul form for up to mma_max_rows rows on tensor cores (mma_kernels.cu):
/// y_bn = x_bd w_nd^T + bias_n, fp32 sums of a fixed order whatever the timing, the bias added and
/// the sum rounded once (silu_mul: as gemv_rows'). x and w contiguous and 16-byte aligned. Blocks of
/// 8 warps, each warp 32 weight rows (32 features, or 16 pairs with silu_mul) over part of d: fw
/// warps along the features, 8 / fw along d, the weights loaded into registers (the first before the
/// programmatic wait), the block's share of x copied once into shared memory; d is cut into up to 8
/// shares, a thread-block cluster each of whose blocks adds every share's sums, in rank order, for a
/// slice of the outputs. The launch (fw, shares) is chosen from (b, n, d) and the device.
/// At most this many shares of d (1-8; 8 by default): process-wide, for measuring the kernel (a
/// bench's --mma-shares); results change in their last bits with the shares' count.
void set_mma_max_shares(int shares);

/// Every mma_rows launch with `feature_warps` (1, 2, 4 or 8) warps along the features and d cut
/// into `shares` (1-8), whatever the shape; (0, 0) gives the choice back to the kernel. For
/// measuring (linear-rows --mma-launch); 0, or a CUDA error code for values out of range.
int set_mma_launch(int feature_warps, int shares);

/// How mma_rows launches a shape: its tiles (feature slices of 32 x feature_warps weight rows; the
/// grid's x), the shares of d (the grid's y: a cluster of that many blocks), the warps along the
/// features, the blocks a multiprocessor holds, and how many of its clusters (blocks, without a
/// cluster) the device runs at once (cudaOccupancyMaxActiveClusters): fewer than `tiles` and the
/// clusters run in waves. For measuring; not during a graph capture. err: a CUDA error code, 0 if
/// none.
struct mma_plan {
  int64_t tiles = 0;
  int shares = 0;
  int feature_warps = 0;
  int blocks_per_sm = 0;
  int clusters_at_once = 0;
  int err = 0;
};
mma_plan mma_rows_plan(element dtype, int64_t b, int64_t n, int64_t d, bool silu_mul);

int mma_rows(element dtype, const void* x_bd, const void* w_nd, const void* bias_n, void* y_bn, int64_t b, int64_t n,
             int64_t d, bool silu_mul, void* stream);

/// Bytes of normed rows add_rms_norm_gemv_rows makes in each block's shared memory at most (b x d
/// elements).
constexpr int64_t gemv_staged_bytes = 48 * 1024;

/// Whether add_rms_norm_gemv_rows takes b rows of d elements: they fit gemv_staged_bytes and
/// add_rms_norm's one-read form takes d (d / (16 bytes' worth of elements) <= 512).
bool gemv_stages(element dtype, int64_t b, int64_t d);

/// gemv_rows of add_rms_norm's normed rows in one kernel, the same bits as the two: y_bn = the rows
/// normed from residual_bd + delta_bd (delta_bd null: residual_bd alone) times w_nd^T + bias_n
/// (`silu_mul`: then as gemv_rows' silu_mul); the sums to sum_bd (null exactly when delta_bd is).
/// All 16-byte aligned. Each block norms the rows into its shared memory before its product.
int add_rms_norm_gemv_rows(element dtype, const void* residual_bd, const void* delta_bd, const void* norm_d, float eps,
                           void* sum_bd, const void* w_nd, const void* bias_n, void* y_bn, int64_t b, int64_t n,
                           int64_t d, bool silu_mul, void* stream);

/// add_rms_norm_gemv_rows of a fused q/k/v projection w_nd [(h + 2k) e, d] followed by
/// rope_kv_decode of its output, in one kernel and with the bits of the kernels one by one: the
/// rotated q to q_bhe [b, h, e]; k rotated and v as is into the caches at the rows' positions
/// (rope_kv_decode's layouts, rows_b, tables and fp8_cache). Each block pairs entries i and i +
/// e/2 of a head, so the rotation needs no second pass.
int add_rms_norm_gemv_rope_kv(element dtype, const void* residual_bd, const void* delta_bd, const void* norm_d,
                              float eps, void* sum_bd, const void* w_nd, const void* bias_n, void* q_bhe, int64_t b,
                              int64_t d, const int64_t* positions_b, const int64_t* rows_b, const void* cos_pe,
                              const void* sin_pe, void* k_cache, void* v_cache, int64_t h, int64_t k, int64_t e,
                              int64_t c, bool fp8_cache, void* stream);

}  // namespace caf_agent::policy::kernels
