// Shape legend: see layers.hpp.
#include "policy/model/layers.hpp"

#include <cmath>
#include <numbers>

#include <ATen/ATen.h>
#include <torch/types.h>

namespace caf_agent::policy {

torch::Tensor rms_norm(const torch::Tensor& x_xd, const torch::Tensor& weight_d, double eps) {
  // x * rsqrt(mean(x^2) + eps) in fp32 by ATen's rms_norm without weight (one fused kernel on CUDA
  // where the composite took five), then scaled in the model's dtype like transformers.
  // ATen's rms_norm computes in fp32 for bf16 / fp16 input and rounds its result to the input's
  // dtype, which is what the cast in, normalise, cast back sequence does, in one kernel not three.
  return weight_d * at::rms_norm(x_xd, {x_xd.size(-1)}, std::nullopt, eps);
}

torch::Tensor rope_inv_freq(const rope_config& rope, int64_t head_dim) {
  auto exponent_r = torch::arange(0, head_dim, 2, torch::kInt64).to(torch::kFloat32) / static_cast<double>(head_dim);
  auto inv_freq_r = 1.0 / torch::pow(rope.theta, exponent_r);
  if (rope.type == "linear") return inv_freq_r / rope.factor;
  if (rope.type != "llama3") return inv_freq_r;
  // llama3: long wavelengths (low frequencies) are divided by `factor`, short ones kept, and
  // the band between is interpolated smoothly (Llama 3.1's published schedule).
  const double old_ctx = static_cast<double>(rope.original_max_position_embeddings);
  const double low_freq_wavelen = old_ctx / rope.low_freq_factor;
  const double high_freq_wavelen = old_ctx / rope.high_freq_factor;
  auto wavelen_r = 2.0 * std::numbers::pi / inv_freq_r;
  auto scaled_r = torch::where(wavelen_r > low_freq_wavelen, inv_freq_r / rope.factor, inv_freq_r);
  auto smooth_r = (old_ctx / wavelen_r - rope.low_freq_factor) / (rope.high_freq_factor - rope.low_freq_factor);
  auto smoothed_r = (1.0 - smooth_r) * scaled_r / rope.factor + smooth_r * scaled_r;
  auto medium_r = (wavelen_r >= high_freq_wavelen).logical_and(wavelen_r <= low_freq_wavelen);
  return torch::where(medium_r, smoothed_r, scaled_r);
}

rope_table rope_table::make(const rope_config& rope, int64_t head_dim, int64_t max_positions, torch::Device device,
                            torch::ScalarType dtype) {
  auto inv_freq_r = rope_inv_freq(rope, head_dim);
  auto positions_p = torch::arange(max_positions, torch::kInt64).to(torch::kFloat32);
  auto freqs_pr = torch::outer(positions_p, inv_freq_r);
  auto angles_pe = torch::cat({freqs_pr, freqs_pr}, -1);
  return rope_table{angles_pe.cos().to(device, dtype), angles_pe.sin().to(device, dtype)};
}

rope_angles rope_angles::gather(const torch::Tensor& positions_bt, const rope_table& table) {
  const auto b = positions_bt.size(0);
  const auto t = positions_bt.size(1);
  const auto e = table.cos_pe.size(1);
  auto flat_p = positions_bt.reshape({-1});
  // [b, 1, t, e]: broadcast over heads. sign_e = (-1, ..., -1, 1, ..., 1).
  auto sign_e = torch::ones({e}, table.sin_pe.options());
  sign_e.narrow(0, 0, e / 2).fill_(-1);
  return rope_angles{table.cos_pe.index_select(0, flat_p).view({b, 1, t, e}),
                     (table.sin_pe.index_select(0, flat_p) * sign_e).view({b, 1, t, e})};
}

namespace {

// x * cos + swap_halves(x) * sin for angles broadcastable to x. swap_halves(x) = cat(second, first);
// times (-sin, sin) that is cat(-second, first) * sin. A cat of two views is one kernel on any
// strides, where roll copies a non-contiguous input first.
torch::Tensor rotate(const torch::Tensor& x, const torch::Tensor& cos, const torch::Tensor& sin) {
  const int64_t half = x.size(-1) / 2;
  return x * cos + torch::cat({x.narrow(-1, half, half), x.narrow(-1, 0, half)}, -1) * sin;
}

}  // namespace

torch::Tensor apply_rope(const torch::Tensor& x_bhte, const rope_angles& angles) {
  return rotate(x_bhte, angles.cos_b1te, angles.sin_b1te);
}

torch::Tensor apply_rope_bthe(const torch::Tensor& x_bthe, const rope_angles& angles) {
  return rotate(x_bthe, angles.cos_b1te.transpose(1, 2), angles.sin_b1te.transpose(1, 2));
}

torch::Tensor apply_rope(const torch::Tensor& x_bhte, const torch::Tensor& positions_bt, const rope_table& table) {
  return apply_rope(x_bhte, rope_angles::gather(positions_bt, table));
}

torch::Tensor swiglu(const torch::Tensor& x_btd, const torch::Tensor& gate_fd, const torch::Tensor& gate_bias_f,
                     const torch::Tensor& up_fd, const torch::Tensor& up_bias_f, const torch::Tensor& down_df,
                     const torch::Tensor& down_bias_d) {
  auto gate_btf = torch::silu(torch::linear(x_btd, gate_fd, gate_bias_f));
  auto up_btf = torch::linear(x_btd, up_fd, up_bias_f);
  return torch::linear(gate_btf * up_btf, down_df, down_bias_d);
}

torch::Tensor swiglu_fused(const torch::Tensor& x_btd, const torch::Tensor& gate_up_wd, const torch::Tensor& gate_up_b,
                           const torch::Tensor& down_df, const torch::Tensor& down_bias_d) {
  auto gate_up_btw = torch::linear(x_btd, gate_up_wd, gate_up_b);
  const int64_t f = gate_up_btw.size(-1) / 2;
  return torch::linear(torch::silu(gate_up_btw.narrow(-1, 0, f)) * gate_up_btw.narrow(-1, f, f), down_df, down_bias_d);
}

}  // namespace caf_agent::policy
