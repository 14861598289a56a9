// Shape legend: see sampling.hpp.
#include "policy/model/sampling.hpp"

#include <ATen/ATen.h>

#include <algorithm>

#include "policy/model/fused_ops.hpp"
#include "policy/model/host_copy.hpp"

namespace caf_agent::policy {
namespace {

// The index of the last true entry of each row of `mask_bn`, or 0 for a row without one.
torch::Tensor last_true(const torch::Tensor& mask_bn) {
  auto index_1n = torch::arange(mask_bn.size(1), torch::TensorOptions().dtype(torch::kInt64).device(mask_bn.device()));
  return (mask_bn.to(torch::kInt64) * index_1n.unsqueeze(0)).amax(1, /*keepdim=*/true);
}

}  // namespace

torch::Tensor draw_inverse_cdf(const torch::Tensor& weights_bv, const torch::Tensor& uniform_b, int64_t block) {
  // Rationale: two levels, not one cumsum over the vocabulary. A scan along a 152k-entry row
  // runs one thread block per row (0.25 ms of a 2.2 ms decode step on an H200 at 64 rows);
  // block sums are a plain reduction, and the two scans left are over n blocks and one block.
  const int64_t b = weights_bv.size(0), v = weights_bv.size(1);
  const int64_t n = (v + block - 1) / block;
  auto padded_bv = v == n * block ? weights_bv : at::constant_pad_nd(weights_bv, {0, n * block - v}, 0.0);
  auto blocks_bnk = padded_bv.view({b, n, block});
  auto sums_bn = blocks_bnk.sum(-1);
  auto cdf_bn = sums_bn.cumsum(-1);
  auto target_b1 = (uniform_b * cdf_bn.select(1, -1)).unsqueeze(1);
  // The first block whose cumulative weight exceeds the target; never past the last block with
  // weight (u * total can round up to total).
  auto chosen_b1 = torch::minimum(torch::searchsorted(cdf_bn, target_b1, /*out_int32=*/false, /*right=*/true),
                                  last_true(sums_bn > 0));
  auto before_b1 =
      torch::where(chosen_b1 > 0, cdf_bn.gather(1, (chosen_b1 - 1).clamp_min(0)), torch::zeros_like(target_b1));
  auto inside_bk = blocks_bnk.gather(1, chosen_b1.view({b, 1, 1}).expand({b, 1, block})).squeeze(1);
  auto rest_b1 = (target_b1 - before_b1).clamp_min(0.0);
  // Within the block the same rule; never past its last entry with weight, so a zero-weight
  // entry (a filtered token, the padding) is never drawn.
  auto offset_b1 =
      torch::minimum(torch::searchsorted(inside_bk.cumsum(-1), rest_b1, /*out_int32=*/false, /*right=*/true),
                     last_true(inside_bk > 0));
  return chosen_b1 * block + offset_b1;
}

sampled_tokens sample_tokens(const torch::Tensor& logits_bv, const std::vector<sampling_params>& params,
                             const std::vector<double>& uniforms, const std::vector<int64_t>& forced, bool fused) {
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
  if (fused && !filter && sample_rows_fuses(logits_bv)) {
    // Per row: temperature, uniform (below 1 in float, as below), greedy, forced token or -1.
    const size_t b = params.size();
    std::vector<float> packed(4 * b);
    for (size_t i = 0; i < b; ++i) {
      packed[i] = temperature[i];
      packed[b + i] = std::min(static_cast<float>(uniforms[i]), 0.99999994f);
      packed[2 * b + i] = params[i].temperature <= 0.0f ? 1.0f : 0.0f;
      packed[3 * b + i] = i < forced.size() && forced[i] >= 0 ? static_cast<float>(forced[i]) : -1.0f;
    }
    auto [tokens_b, logprobs_b] = sample_rows(logits_bv, packed);
    return sampled_tokens{tokens_b, logprobs_b};
  }
  const auto logits_f32_bv = logits_bv.to(torch::kFloat32);  // no copy when fp32 already
  auto temperature_b1 = to_device(temperature, torch::kFloat32, device).unsqueeze(1);
  auto logp_bv = torch::log_softmax(logits_f32_bv / temperature_b1, -1);
  auto greedy_b1 = logits_f32_bv.argmax(-1, /*keepdim=*/true);
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
      drawn_b1 = order_bv.gather(1, draw_inverse_cdf(sorted_bv * keep_bv, uniform_b));
    } else {
      drawn_b1 = draw_inverse_cdf(probs_bv, uniform_b);
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
