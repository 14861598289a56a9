#pragma once
// Batched next-token sampling on the model's device: greedy, temperature, top-k, top-p, with
// randomness supplied by the caller (one uniform per row from each request's own seeded RNG),
// so a request's tokens do not depend on what else is in the batch or on the device's RNG.
//
// Shape legend: b rows (sequences), v vocabulary.

#include <vector>

#include <torch/types.h>

#include "policy/model/generation_types.hpp"

namespace caf_agent::policy {

/// Sampled tokens and their logprobs, still on the device.
struct sampled_tokens {
  torch::Tensor tokens_b;    ///< int64 token ids.
  torch::Tensor logprobs_b;  ///< fp32 log softmax(logits / temperature) at the token.
};

/// Draws one token per row of `logits_bv` (any floating dtype; the composite works on its fp32
/// copy, so a bf16 row samples as its fp32 copy does). `params[i]` and `uniforms[i]` (in [0, 1))
/// belong to row i. Inverse-CDF sampling over the filtered distribution; the logprob is taken
/// from the unfiltered temperature-scaled distribution (see generation_result::logprobs).
/// `forced` (empty, or one entry per row): an entry >= 0 is taken as row i's token instead of
/// the draw (teacher forcing), its logprob from the same distribution.
/// `fused`: where no row filters (top-k, top-p) and the logits are on CUDA, fused kernels
/// (fused_ops.hpp's sample_rows) with the same rules; the draw can differ from the composite's
/// only where rounding in the order of its sums moves the target across a token's boundary.
sampled_tokens sample_tokens(const torch::Tensor& logits_bv, const std::vector<sampling_params>& params,
                             const std::vector<double>& uniforms, const std::vector<int64_t>& forced = {},
                             bool fused = false);

/// Inverse-CDF draw from unnormalised non-negative weights [b, v]: per row, the first index
/// whose cumulative weight exceeds uniform_b[i] * the row's total, in two levels (blocks of
/// `block` entries, then within the chosen block). An entry of weight zero is never drawn; a
/// row needs some weight. Int64 [b, 1].
torch::Tensor draw_inverse_cdf(const torch::Tensor& weights_bv, const torch::Tensor& uniform_b, int64_t block = 1024);

}  // namespace caf_agent::policy
