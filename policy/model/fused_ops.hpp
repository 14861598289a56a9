#pragma once
// fused_ops: the decoder's per-layer elementwise work in fewer kernels. On CUDA, where this
// build has its kernels (policy/model/fused_kernels.cu; cmake/cuda_kernels.cmake), each op is
// one kernel; elsewhere, or when `fused` is false, it is the ATen composite the decoder ran
// before (layers.hpp), so CPU results are unchanged, as are tensors that require grad. The decode step of a small model
// is bound by its ~23 kernels per layer (bench/results/2026-12-02-policy-h200-3calls.md: 568 launches, 2.06 ms of
// device time for 64 rows of Qwen2-0.5B); these take it to ~10.
//
// Shape legend: see layers.hpp; n cache slots, c slot capacity.

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <torch/types.h>

#include "policy/model/fused_kernels.hpp"
#include "policy/model/layers.hpp"

namespace caf_agent::policy {

/// True when this build has the CUDA kernels.
bool fused_kernels_built();

/// {residual + delta, weight_d * rms_norm(residual + delta)}: the residual add and the next
/// norm in one pass. `delta_xd` undefined: {residual, its norm}.
std::pair<torch::Tensor, torch::Tensor> add_rms_norm(const torch::Tensor& residual_xd, const torch::Tensor& delta_xd,
                                                     const torch::Tensor& weight_d, double eps, bool fused);

/// silu(gate) * up of a fused gate/up projection's output [.., 2f] (gate first).
torch::Tensor silu_mul(const torch::Tensor& gate_up_x2f, bool fused);

/// True when rope_kv_decode runs as one kernel: this build has the kernels, every tensor is on
/// one CUDA device in one dtype, the caches are contiguous [n, k, c, e] (`paged`: [k, blocks,
/// block size, e]).
bool rope_kv_decode_fuses(const torch::Tensor& qkv_bne, const torch::Tensor& k_cache_nkce,
                          const torch::Tensor& v_cache_nkce, const rope_table& table, bool paged = false);

/// One decode step's RoPE and KV write (requires rope_kv_decode_fuses): qkv_bne [b, h + 2k, e],
/// row i at positions_b[i] (int64) of cache slot i. Rotates q (returned, [b, h, e]) and k, and
/// writes k and v into the caches at [i, head, positions_b[i]]. With `rows_b` (int64 [b]) the
/// caches are paged [k, blocks, block size, e] and row i's keys go to rows rows_b[i] + head x
/// blocks x block size of their [k * blocks * block size, e] view (rows_b[i] = block x block
/// size + offset).
torch::Tensor rope_kv_decode(const torch::Tensor& qkv_bne, const torch::Tensor& positions_b, const rope_table& table,
                             torch::Tensor& k_cache_nkce, torch::Tensor& v_cache_nkce, int64_t h,
                             const torch::Tensor& rows_b = {});

/// Attention outputs over consecutive shares of each row's keys merged into one: out_xge [x, g, e]
/// (x = y * S; row r's S shares at r * S ..; with share_major, share s of row r at s * y + r, as
/// flash calls of one share each, joined, leave them), lse_gx [g, x] their fp32 log-sum-exps (the layout
/// flash's varlen forward returns), used_x [x] their key counts (a share of 0 keys is left out;
/// each row needs one with keys). Returns [y, g, e] in out's dtype: sum_s exp(lse_s - max) out_s /
/// sum_s exp(lse_s - max), in fp32, rounded once. One kernel where `fused` and the kernels apply,
/// else the ATen composite (the same sums, in another order).
torch::Tensor merge_shares(const torch::Tensor& out_xge, const torch::Tensor& lse_gx, const torch::Tensor& used_x,
                           int64_t shares, bool fused, bool share_major = false);

/// Whether this process's fused kernels launch as programmatic dependents (fused_kernels.hpp
/// set_programmatic_launch: each may start during the tail of the kernel before it; the same
/// bits either way). No effect in builds without the kernels.
void set_programmatic_launch(bool on);

/// Multiprocessors of the current CUDA device; 0 on a CPU-only build or in builds without the
/// kernels.
int64_t cuda_multiprocessors();

/// policy_model_tool boundary-chain (boundary_kernels.hpp): `calls` chains of `phases` streaming
/// phases of bytes_per_phase bytes each, their boundaries kernels ("kernels": programmatic launch as
/// set_programmatic_launch says, one CUDA graph) or counters in one persistent launch ("flags"), on
/// random bytes made on `device`. blocks 0: as many as are resident at once. Throws naming the bad
/// argument, or where the build has no kernels.
struct boundary_timing {
  double us_per_chain = 0;
  int64_t blocks = 0;    ///< the chain's blocks a phase
  int64_t resident = 0;  ///< blocks the device holds at once
  double last_sums = 0;  ///< the sum of the last phase's block sums (a check: the same in both modes)
};
boundary_timing time_boundary_chain(const std::string& mode, int64_t bytes_per_phase, int64_t phases, int64_t blocks,
                                    int64_t calls, const torch::Device& device);

/// True when fp8_decode_attention runs here: a build with the kernels, a CUDA e4m3 KV cache
/// (slots [n, k, c, e], or paged [k, blocks, block size, e] with a block size that is a multiple
/// of 16), q in bf16 or fp16, h / k <= 8 query heads per KV head, head size 64 or 128.
bool fp8_decode_attention_fuses(const torch::Tensor& k_cache, torch::ScalarType q_dtype, int64_t h, bool paged);
/// One decode step's attention over an e4m3 KV cache (fp8_kernels.hpp): row r of q_bhe [b, h, e]
/// attends its keys 0..positions_b[r], scaled 1 / sqrt(e); `keys` bounds every row's (checked
/// only: the launch is the same for any, fp8_attention_splits). Slots (tables_bm undefined): row r is slot r, and a row
/// at the cache's last position (a dummy row) attends key 0 only. Paged: tables_bm int64 [b, m] holds row r's blocks.
/// Returns [b, h, e] in q's dtype. Throws where fp8_decode_attention_fuses does not hold.
torch::Tensor fp8_decode_attention(const torch::Tensor& q_bhe, const torch::Tensor& k_cache,
                                   const torch::Tensor& v_cache, const torch::Tensor& positions_b, int64_t keys,
                                   const torch::Tensor& tables_bm = {});

/// torch::linear(x, w, bias) for x [.., d] of at most `max_rows` rows (max_rows <= 8): one
/// matrix-vector kernel (a warp per output feature, the weight read once in 16-byte vectors, fp32
/// sums rounded once) where the kernels apply (CUDA, one dtype, x and w contiguous and 16-byte
/// aligned, d a multiple of 16 bytes' worth, no autograd). Else, for more rows, at most `mma_rows`
/// (<= 64) in bf16 or fp16: one tensor-core kernel (fused_kernels.hpp mma_rows; the same
/// conditions, fp32 sums of a fixed order rounded once). Else torch::linear. Returns [.., n].
torch::Tensor linear_rows(const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& bias, int64_t max_rows,
                          int64_t mma_rows = 0);
/// True when linear_rows(x, w, bias, max_rows) runs the matrix-vector kernel.
bool linear_rows_fuses(const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& bias, int64_t max_rows);
/// True when linear_rows(x, w, bias, max_rows, mma_rows) runs the tensor-core kernel: the
/// matrix-vector kernel does not, and x has at most mma_rows rows (and 64) of bf16 or fp16 with
/// linear_rows_fuses' other conditions.
bool linear_mma_fuses(const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& bias, int64_t max_rows,
                      int64_t mma_rows);
/// Readies the tensor-core kernel (fused_kernels.hpp mma_rows_prepare) outside a graph capture;
/// a no-op without the kernels or a CUDA device.
void prepare_linear_mma();
/// The tensor-core kernel's shares of d at most (fused_kernels.hpp set_mma_max_shares; 1-8, 8 by
/// default; process-wide, for benches); a no-op without the kernels.
void set_linear_mma_max_shares(int shares);
/// Every tensor-core launch with `feature_warps` warps along the features and d in `shares`
/// (fused_kernels.hpp set_mma_launch; (0, 0): the kernel's own choice), for benches; false for
/// values out of range or without the kernels.
bool set_linear_mma_launch(int feature_warps, int shares);
/// How the tensor-core kernel launches for x [b, d] and w [n, d] (silu_mul: a fused gate/up w),
/// for measuring: fused_kernels.hpp mma_rows_plan (its tiles, the shares of d, the blocks a
/// multiprocessor holds, the clusters the device runs at once; err 0). Empty without the kernels
/// or a CUDA x, or for a shape the kernel does not take; a CUDA error is thrown.
std::optional<kernels::mma_plan> linear_mma_plan(const torch::Tensor& x, const torch::Tensor& w, bool silu_mul);

/// silu_mul(linear_rows(x, w, bias, max_rows, mma_rows), fused) for a fused gate/up projection w
/// [2f, d] (gate rows, then up rows): [.., f]. Where `fused` and linear_rows runs a kernel of its
/// own, one kernel whose blocks pair gate and up features and write silu(gate) * up
/// (fused_kernels.hpp gemv_rows' and mma_rows' silu_mul); else the two.
torch::Tensor linear_silu_mul(const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& bias,
                              int64_t max_rows, bool fused, int64_t mma_rows = 0);

/// add_rms_norm then linear_rows of its normed rows: {residual + delta (residual where delta is
/// undefined), linear(normed, w, bias)}; `silu_mul_after`: linear_silu_mul's output instead. One
/// kernel (fused_kernels.hpp add_rms_norm_gemv_rows: each block norms the rows into shared memory
/// before its share of the product) where `fused` and add_rms_norm_linear_fuses hold; else the
/// kernels one by one (with `mma_rows`, linear_rows' tensor-core kernel after the norm's).
std::pair<torch::Tensor, torch::Tensor> add_rms_norm_linear(const torch::Tensor& residual_xd,
                                                            const torch::Tensor& delta_xd, const torch::Tensor& norm_d,
                                                            double eps, const torch::Tensor& w,
                                                            const torch::Tensor& bias, int64_t max_rows, bool fused,
                                                            bool silu_mul_after = false, int64_t mma_rows = 0);
/// True when add_rms_norm_linear(.., fused = true) runs its one kernel: add_rms_norm and linear_rows
/// would run theirs (16-byte aligned tensors) and the rows fit (kernels::gemv_stages: b x d
/// elements in 48 KiB, d at most 512 vectors).
bool add_rms_norm_linear_fuses(const torch::Tensor& residual_xd, const torch::Tensor& delta_xd,
                               const torch::Tensor& norm_d, const torch::Tensor& w, const torch::Tensor& bias,
                               int64_t max_rows);

/// One decode step's input norm, q/k/v projection, RoPE and KV write in one kernel (fused_kernels.hpp
/// add_rms_norm_gemv_rope_kv; requires add_rms_norm_qkv_rope_kv_fuses): add_rms_norm_linear of the
/// rows with the fused projection qkv_w [(h + 2k) e, d], then rope_kv_decode of its output, with
/// their bits. {residual + delta (residual where delta is undefined), q [b, h, e]}; keys and values
/// go to the caches as rope_kv_decode writes them (rows_b defined: paged).
std::pair<torch::Tensor, torch::Tensor> add_rms_norm_qkv_rope_kv(
    const torch::Tensor& residual_xd, const torch::Tensor& delta_xd, const torch::Tensor& norm_d, double eps,
    const torch::Tensor& qkv_w, const torch::Tensor& qkv_b, int64_t max_rows, const torch::Tensor& positions_b,
    const rope_table& table, torch::Tensor& k_cache_nkce, torch::Tensor& v_cache_nkce, int64_t h,
    const torch::Tensor& rows_b = {});
/// True when add_rms_norm_qkv_rope_kv runs: add_rms_norm_linear_fuses of the rows and qkv_w (so at
/// most max_rows rows), qkv_w's rows (h + 2k) e of the caches' shape, and rope_kv_decode_fuses of
/// its output.
bool add_rms_norm_qkv_rope_kv_fuses(const torch::Tensor& residual_xd, const torch::Tensor& delta_xd,
                                    const torch::Tensor& norm_d, const torch::Tensor& qkv_w, const torch::Tensor& qkv_b,
                                    int64_t max_rows, const torch::Tensor& k_cache_nkce,
                                    const torch::Tensor& v_cache_nkce, const rope_table& table, int64_t h, bool paged);

/// True when sample_rows runs as fused kernels: this build has the kernels, CUDA logits [b, v]
/// (fp32, bf16 or fp16: the kernels read each entry's fp32 value, so bf16 logits sample exactly as
/// their fp32 copy would) with contiguous rows, b <= 65535.
bool sample_rows_fuses(const torch::Tensor& logits_bv);

/// One token per row in three launches (requires sample_rows_fuses): `params_4b` on the host, per
/// row: temperature (1 for a greedy row), uniform in [0, 1), 1 for greedy else 0, forced token
/// or -1 (see fused_kernels.hpp). {tokens_b int64, logprobs_b fp32} on the device.
std::pair<torch::Tensor, torch::Tensor> sample_rows(const torch::Tensor& logits_bv,
                                                    const std::vector<float>& params_4b);

}  // namespace caf_agent::policy
