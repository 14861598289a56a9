// Shape legend: see layers.hpp.
#include "policy/model/layers.hpp"

#include <cmath>
#include <numbers>

#include <torch/types.h>

namespace caf_agent::policy {

torch::Tensor rms_norm(const torch::Tensor& x_xd, const torch::Tensor& weight_d, double eps) {
  auto x32_xd = x_xd.to(torch::kFloat32);
  auto variance_x1 = x32_xd.pow(2).mean(-1, /*keepdim=*/true);
  auto normed_xd = x32_xd * torch::rsqrt(variance_x1 + eps);
  return weight_d * normed_xd.to(x_xd.scalar_type());
}

torch::Tensor rope_inv_freq(const rope_config& rope, int64_t head_dim) {
  auto exponent_r =
      torch::arange(0, head_dim, 2, torch::kInt64).to(torch::kFloat32) / static_cast<double>(head_dim);
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
  auto smooth_r = (old_ctx / wavelen_r - rope.low_freq_factor) /
                  (rope.high_freq_factor - rope.low_freq_factor);
  auto smoothed_r = (1.0 - smooth_r) * scaled_r / rope.factor + smooth_r * scaled_r;
  auto medium_r = (wavelen_r >= high_freq_wavelen).logical_and(wavelen_r <= low_freq_wavelen);
  return torch::where(medium_r, smoothed_r, scaled_r);
}

rope_table rope_table::make(const rope_config& rope, int64_t head_dim, int64_t max_positions,
                            torch::Device device, torch::ScalarType dtype) {
  auto inv_freq_r = rope_inv_freq(rope, head_dim);
  auto positions_p = torch::arange(max_positions, torch::kInt64).to(torch::kFloat32);
  auto freqs_pr = torch::outer(positions_p, inv_freq_r);
  auto angles_pe = torch::cat({freqs_pr, freqs_pr}, -1);
  return rope_table{angles_pe.cos().to(device, dtype), angles_pe.sin().to(device, dtype)};
}

namespace {

torch::Tensor rotate_half(const torch::Tensor& x_bhte) {
  const int64_t half = x_bhte.size(-1) / 2;
  auto first = x_bhte.narrow(-1, 0, half);
  auto second = x_bhte.narrow(-1, half, half);
  return torch::cat({-second, first}, -1);
}

}  // namespace

torch::Tensor apply_rope(const torch::Tensor& x_bhte, const torch::Tensor& positions_bt,
                         const rope_table& table) {
  const auto b = positions_bt.size(0);
  const auto t = positions_bt.size(1);
  auto flat_p = positions_bt.reshape({-1});
  // [b, 1, t, e]: broadcast over heads.
  auto cos_b1te = table.cos_pe.index_select(0, flat_p).view({b, 1, t, -1});
  auto sin_b1te = table.sin_pe.index_select(0, flat_p).view({b, 1, t, -1});
  return x_bhte * cos_b1te + rotate_half(x_bhte) * sin_b1te;
}

torch::Tensor swiglu(const torch::Tensor& x_btd, const torch::Tensor& gate_fd,
                     const torch::Tensor& gate_bias_f, const torch::Tensor& up_fd,
                     const torch::Tensor& up_bias_f, const torch::Tensor& down_df,
                     const torch::Tensor& down_bias_d) {
  auto gate_btf = torch::silu(torch::linear(x_btd, gate_fd, gate_bias_f));
  auto up_btf = torch::linear(x_btd, up_fd, up_bias_f);
  return torch::linear(gate_btf * up_btf, down_df, down_bias_d);
}

}  // namespace caf_agent::policy
