#pragma once
// Stateless building blocks of the decoder: RMSNorm, rotary position embedding (RoPE) with
// linear / llama3 frequency scaling, SwiGLU. Each matches transformers' Llama/Qwen code.
//
// Shape legend: b batch, t query positions, s key positions, h heads, e head_dim,
// d hidden, f intermediate, p positions (flattened), r rotary frequencies (e / 2).

#include <torch/types.h>

#include "policy/model/model_config.hpp"

namespace caf_agent::policy {

/// RMSNorm as in transformers: normalise in fp32, cast back, then scale by `weight_d`.
torch::Tensor rms_norm(const torch::Tensor& x_xd, const torch::Tensor& weight_d, double eps);

/// The inverse frequencies of RoPE after scaling (fp32, on CPU): theta^(-2i/e), then divided
/// by `factor` (linear) or by the llama3 wavelength-dependent schedule. Assumes a validated
/// rope_config (parse_model_config rejects unknown types).
torch::Tensor rope_inv_freq(const rope_config& rope, int64_t head_dim);

/// cos and sin tables for positions [0, max_positions): each [max_positions, e] fp32, laid out
/// as cat(freqs, freqs) the way transformers' rotate_half convention expects.
struct rope_table {
  torch::Tensor cos_pe;  ///< cos(position * inv_freq), duplicated halves.
  torch::Tensor sin_pe;  ///< sin(position * inv_freq), duplicated halves.

  /// Builds the table on `device` in `dtype` (the model's compute dtype).
  static rope_table make(const rope_config& rope, int64_t head_dim, int64_t max_positions, torch::Device device,
                         torch::ScalarType dtype);
};

/// The rows of a rope_table for the positions of one pass, shared by every layer (gathered once
/// per pass instead of once per layer and projection).
struct rope_angles {
  torch::Tensor cos_b1te;  ///< cos of each position's angles, broadcast over heads.
  torch::Tensor sin_b1te;  ///< sin with the first half negated: rotate_half becomes a roll.

  /// Gathers the angles of `positions_bt` (int64 [b, t]).
  static rope_angles gather(const torch::Tensor& positions_bt, const rope_table& table);
};

/// Rotates `x_bhte` (heads second) by the angles of `positions_bt`: x*cos + rotate_half(x)*sin.
torch::Tensor apply_rope(const torch::Tensor& x_bhte, const torch::Tensor& positions_bt, const rope_table& table);
/// The same with gathered angles. Bit-identical to transformers' rotate_half form: the roll moves
/// the halves and the sign sits in the sin table (negation is exact).
torch::Tensor apply_rope(const torch::Tensor& x_bhte, const rope_angles& angles);
/// The same for heads third ([b, t, h, e], any strides), e.g. the query and key heads of a fused
/// projection's output rotated in one pass.
torch::Tensor apply_rope_bthe(const torch::Tensor& x_bthe, const rope_angles& angles);

/// SwiGLU MLP: down(silu(gate(x)) * up(x)); biases may be undefined tensors.
torch::Tensor swiglu(const torch::Tensor& x_btd, const torch::Tensor& gate_fd, const torch::Tensor& gate_bias_f,
                     const torch::Tensor& up_fd, const torch::Tensor& up_bias_f, const torch::Tensor& down_df,
                     const torch::Tensor& down_bias_d);
/// The same with gate and up as one weight [2f, d] (gate rows first) and bias [2f] (or undefined):
/// one GEMM for both.
torch::Tensor swiglu_fused(const torch::Tensor& x_btd, const torch::Tensor& gate_up_wd, const torch::Tensor& gate_up_b,
                           const torch::Tensor& down_df, const torch::Tensor& down_bias_d);

}  // namespace caf_agent::policy
