// Masked reductions over packed trajectories (see aggregation.hpp).
//
// Shape legend: t tokens, n trajectories, n1 = n + 1 offsets.

#include "learner/aggregation.hpp"

#include <string>

#include <torch/torch.h>

namespace caf_agent::learner {

namespace {

// Masked-out tokens may hold anything (NaN from a padded head, garbage): select, never multiply.
torch::Tensor masked_values(const torch::Tensor& values_t, const torch::Tensor& mask_b_t) {
  return torch::where(mask_b_t, values_t, torch::zeros({}, values_t.options()));
}

}  // namespace

torch::Tensor single_sequence_offsets(int64_t length) {
  return torch::tensor({int64_t{0}, length}, torch::kInt64);
}

status check_offsets(const torch::Tensor& seq_offsets_n1, int64_t tokens, const char* what) {
  const std::string where = std::string(what) + ": seq_offsets ";
  if (!seq_offsets_n1.defined()) return fail(where + "is undefined");
  if (seq_offsets_n1.scalar_type() != torch::kInt64 || seq_offsets_n1.dim() != 1)
    return fail(where + "must be a 1-d int64 tensor [n + 1]");
  if (seq_offsets_n1.numel() < 1) return fail(where + "is empty (it needs at least the leading 0)");
  const auto offsets_n1 = seq_offsets_n1.to(torch::kCPU).contiguous();
  const auto* o = offsets_n1.data_ptr<int64_t>();
  const int64_t n1 = offsets_n1.numel();
  if (o[0] != 0) return fail(where + "must start at 0, not " + std::to_string(o[0]));
  for (int64_t i = 1; i < n1; ++i) {
    if (o[i] < o[i - 1])
      return fail(where + "decrease at entry " + std::to_string(i) + " (" + std::to_string(o[i - 1]) + " -> " +
                  std::to_string(o[i]) + ")");
  }
  if (o[n1 - 1] != tokens)
    return fail(where + "end at " + std::to_string(o[n1 - 1]) + " but the batch has " + std::to_string(tokens) +
                " tokens");
  return {};
}

torch::Tensor segment_ids(const torch::Tensor& seq_offsets_n1, torch::Device device) {
  const auto offsets_n1 = seq_offsets_n1.to(torch::kCPU);
  const int64_t n = offsets_n1.numel() - 1;
  const auto lengths_n = offsets_n1.slice(0, 1) - offsets_n1.slice(0, 0, n);
  return torch::repeat_interleave(torch::arange(n, torch::kInt64), lengths_n).to(device);
}

double aggregation_count(const torch::Tensor& loss_mask_t, const torch::Tensor& seq_offsets_n1, aggregation_mode mode) {
  const auto mask_b_t = loss_mask_t.to(torch::kCPU) != 0;
  if (mode == aggregation_mode::token_mean) return static_cast<double>(mask_b_t.sum().item<int64_t>());
  const int64_t n = seq_offsets_n1.numel() - 1;
  const auto seg_t = segment_ids(seq_offsets_n1, torch::kCPU);
  const auto count_n = torch::zeros({n}, torch::kInt64).index_add(0, seg_t, mask_b_t.to(torch::kInt64));
  return static_cast<double>((count_n > 0).sum().item<int64_t>());
}

result<torch::Tensor> masked_aggregate(const torch::Tensor& values_t, const torch::Tensor& loss_mask_t,
                                       const torch::Tensor& seq_offsets_n1, const aggregation& agg) {
  if (!values_t.defined() || values_t.dim() != 1) return fail("masked_aggregate: values must be a 1-d tensor [t]");
  if (!loss_mask_t.defined() || loss_mask_t.sizes() != values_t.sizes())
    return fail("masked_aggregate: loss_mask must have the values' shape [" + std::to_string(values_t.numel()) + "]");
  if (auto ok = check_offsets(seq_offsets_n1, values_t.numel(), "masked_aggregate"); !ok) return ok.error();
  if (agg.denominator < 0) return fail("masked_aggregate: denominator must be >= 0 (0: this batch's own count)");

  const auto v_t = values_t.to(torch::kFloat32);
  const auto mask_b_t = loss_mask_t.to(v_t.device()) != 0;
  const auto picked_t = masked_values(v_t, mask_b_t);
  torch::Tensor numerator;
  torch::Tensor count;
  if (agg.mode == aggregation_mode::token_mean) {
    numerator = picked_t.sum();
    count = mask_b_t.sum();
  } else {
    const int64_t n = seq_offsets_n1.numel() - 1;
    const auto seg_t = segment_ids(seq_offsets_n1, v_t.device());
    const auto zeros_n = torch::zeros({n}, v_t.options());
    const auto sum_n = zeros_n.index_add(0, seg_t, picked_t);
    const auto tokens_n = zeros_n.index_add(0, seg_t, mask_b_t.to(torch::kFloat32));
    // An empty trajectory has sum 0 and count 0: 0 / 1 keeps it out of the numerator.
    numerator = (sum_n / tokens_n.clamp_min(1.0)).sum();
    count = (tokens_n > 0).sum();
  }
  const auto own_count = count.item<int64_t>();
  if (own_count == 0) return fail("masked_aggregate: the batch has no sampled token (all masked)");
  const double denominator = agg.denominator > 0 ? agg.denominator : static_cast<double>(own_count);
  return numerator / denominator;
}

bool all_finite(const std::vector<torch::Tensor>& tensors) {
  // Rationale: a fp64 sum is non-finite exactly when an element is NaN or +-Inf (fp32/bf16
  // magnitudes times any realistic element count stay far below fp64's range), and it needs no
  // tensor-sized temporary, unlike isfinite(t).all() over a 0.5B-element gradient.
  std::vector<torch::Tensor> flags;
  flags.reserve(tensors.size());
  for (const auto& t : tensors) {
    if (!t.defined() || t.numel() == 0 || !t.is_floating_point()) continue;
    flags.push_back(torch::isfinite(t.sum(torch::kFloat64)).to(torch::kCPU));
  }
  if (flags.empty()) return true;
  return torch::stack(flags).all().item<bool>();
}

result<double> explained_variance(const torch::Tensor& values_t, const torch::Tensor& returns_t,
                                  const torch::Tensor& mask_t) {
  if (!values_t.defined() || !returns_t.defined() || !mask_t.defined() || values_t.sizes() != returns_t.sizes() ||
      values_t.sizes() != mask_t.sizes())
    return fail("explained_variance: values, returns and mask must be defined and of one shape");
  const auto mask_b_t = mask_t.to(torch::kCPU) != 0;
  const auto v_k = values_t.detach().to(torch::kCPU, torch::kFloat64).masked_select(mask_b_t);
  const auto r_k = returns_t.detach().to(torch::kCPU, torch::kFloat64).masked_select(mask_b_t);
  if (r_k.numel() < 2) return fail("explained_variance: needs at least two masked tokens");
  const double var_returns = r_k.var(/*unbiased=*/false).item<double>();
  if (!(var_returns > 0)) return fail("explained_variance: the returns have zero variance (undefined)");
  const double var_residual = (r_k - v_k).var(/*unbiased=*/false).item<double>();
  return 1.0 - var_residual / var_returns;
}

}  // namespace caf_agent::learner
