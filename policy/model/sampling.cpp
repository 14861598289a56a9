// Shape legend: see sampling.hpp.
#include "policy/model/sampling.hpp"

#include <ATen/ATen.h>

#include <algorithm>

namespace caf_agent::policy {
namespace {

// A small host vector as a device tensor. On CUDA the copy goes through pinned memory and does
// not block the host (a pageable copy would wait for the queued forward pass).
template <class T>
torch::Tensor to_device(const std::vector<T>& host, torch::ScalarType dtype, torch::Device device) {
  auto view = torch::from_blob(const_cast<T*>(host.data()), {static_cast<int64_t>(host.size())},
                               torch::TensorOptions().dtype(dtype));
  if (!device.is_cuda()) return view.clone();
  return view.pin_memory().to(device, /*non_blocking=*/true);
}

// Inverse-CDF draw from unnormalised non-negative weights: the first index whose cumulative
// weight exceeds u * total. Zero-weight entries can never be picked.
torch::Tensor draw(const torch::Tensor& weights_bv, const torch::Tensor& uniform_b) {
  auto cdf_bv = weights_bv.cumsum(-1);
  auto target_b1 = (uniform_b * cdf_bv.select(1, -1)).unsqueeze(1);
  return torch::searchsorted(cdf_bv, target_b1, /*out_int32=*/false, /*right=*/true).clamp_max(weights_bv.size(1) - 1);
}

}  // namespace

sampled_tokens sample_tokens(const torch::Tensor& logits_bv, const std::vector<sampling_params>& params,
                             const std::vector<double>& uniforms, const std::vector<int64_t>& forced) {
  const auto device = logits_bv.device();
  const int64_t v = logits_bv.size(1);
  std::vector<float> temperature, top_p, uniform;
  std::vector<int64_t> top_k;
  bool all_greedy = true, filter = false;
  for (const auto& p : params) {
    const bool greedy = p.temperature <= 0.0f;
    all_greedy = all_greedy && greedy;
    temperature.push_back(greedy ? 1.0f : p.temperature);
    top_k.push_back(p.top_k > 0 && p.top_k < v ? p.top_k : v);
    top_p.push_back(p.top_p);
    filter = filter || (!greedy && (top_k.back() < v || p.top_p < 1.0f));
  }
  auto temperature_b1 = to_device(temperature, torch::kFloat32, device).unsqueeze(1);
  auto logp_bv = torch::log_softmax(logits_bv / temperature_b1, -1);
  auto greedy_b1 = logits_bv.argmax(-1, /*keepdim=*/true);
  torch::Tensor tokens_b1 = greedy_b1;
  if (!all_greedy) {
    // Rationale: u must stay below 1 after rounding to float, else the draw could land past
    // the last kept token.
    for (double u : uniforms) uniform.push_back(std::min(static_cast<float>(u), 0.99999994f));
    auto uniform_b = to_device(uniform, torch::kFloat32, device);
    auto probs_bv = logp_bv.exp();
    torch::Tensor drawn_b1;
    if (filter) {
      auto [sorted_bv, order_bv] = probs_bv.sort(-1, /*descending=*/true);
      auto rank_1v = torch::arange(v, torch::TensorOptions().device(device)).unsqueeze(0);
      auto keep_bv = rank_1v < to_device(top_k, torch::kInt64, device).unsqueeze(1);
      auto mass_before_bv = sorted_bv.cumsum(-1) - sorted_bv;
      keep_bv = keep_bv.logical_and(mass_before_bv < to_device(top_p, torch::kFloat32, device).unsqueeze(1));
      drawn_b1 = order_bv.gather(1, draw(sorted_bv * keep_bv, uniform_b));
    } else {
      drawn_b1 = draw(probs_bv, uniform_b);
    }
    std::vector<uint8_t> greedy_rows;
    for (const auto& p : params) greedy_rows.push_back(p.temperature <= 0.0f ? 1 : 0);
    auto greedy_mask_b1 = to_device(greedy_rows, torch::kBool, device).unsqueeze(1);
    tokens_b1 = torch::where(greedy_mask_b1, greedy_b1, drawn_b1);
  }
  if (std::any_of(forced.begin(), forced.end(), [](int64_t t) { return t >= 0; })) {
    auto forced_b1 = to_device(forced, torch::kInt64, device).unsqueeze(1);
    tokens_b1 = torch::where(forced_b1 >= 0, forced_b1, tokens_b1);
  }
  return sampled_tokens{tokens_b1.squeeze(1), logp_bv.gather(1, tokens_b1).squeeze(1)};
}

}  // namespace caf_agent::policy
