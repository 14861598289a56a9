// Shape legend: see train_forward.hpp; r prediction rows (t - 1), c rows of one chunk.
#include "learner/train_forward.hpp"

#include <ATen/ATen.h>
#include <ATen/core/ivalue.h>
#include <c10/util/Exception.h>
#include <torch/csrc/autograd/autograd.h>
#include <torch/csrc/autograd/custom_function.h>

#include <array>
#include <memory>
#include <string>

#include "learner/aggregation.hpp"
#include "learner/fused_head.hpp"

namespace caf_agent::learner {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

/// Keeps the recompute function alive inside the autograd graph (saved_data holds IValues).
struct recompute_holder : torch::CustomClassHolder {
  explicit recompute_holder(recompute_fn f) : fn(std::move(f)) {}
  recompute_fn fn;
};

/// The autograd node of checkpointed(): forward without saving activations, backward by
/// recomputation. Custom Functions run their forward with grad mode off.
struct checkpoint_function : torch::autograd::Function<checkpoint_function> {
  static variable_list forward(AutogradContext* ctx, const c10::intrusive_ptr<recompute_holder>& holder,
                               at::TensorList inputs) {
    std::vector<torch::Tensor> in(inputs.begin(), inputs.end());
    ctx->saved_data["fn"] = c10::IValue::make_capsule(holder);
    ctx->save_for_backward(in);
    return holder->fn(in);
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    auto holder = c10::static_intrusive_pointer_cast<recompute_holder>(ctx->saved_data["fn"].toCapsule());
    auto saved = ctx->get_saved_variables();
    std::vector<torch::Tensor> in;
    std::vector<torch::Tensor> wrt;
    for (const auto& s : saved) {
      in.push_back(s.detach());
      if (s.requires_grad()) wrt.push_back(in.back().requires_grad_(true));
    }
    std::vector<torch::Tensor> outs;
    {
      torch::AutoGradMode grad_on(true);
      outs = holder->fn(in);
    }
    variable_list roots, root_grads;
    for (size_t i = 0; i < outs.size(); ++i) {
      if (!outs[i].requires_grad() || !grad_outputs[i].defined()) continue;
      roots.push_back(outs[i]);
      root_grads.push_back(grad_outputs[i]);
    }
    variable_list grads_in;
    if (!roots.empty() && !wrt.empty())
      grads_in = torch::autograd::grad(roots, wrt, root_grads, /*retain_graph=*/false,
                                       /*create_graph=*/false, /*allow_unused=*/true);
    variable_list result{torch::Tensor()};  // the holder argument has no gradient
    size_t next = 0;
    for (const auto& s : saved)
      result.push_back(s.requires_grad() && next < grads_in.size() ? grads_in[next++] : torch::Tensor());
    return result;
  }
};

/// The tensor fields of a block's weights, in a fixed order.
std::array<torch::Tensor*, 18> fields_of(policy::decoder::layer_refs& w) {
  return {&w.input_norm_d, &w.q_w,      &w.q_b,         &w.k_w,    &w.k_b,    &w.v_w,  &w.v_b,  &w.o_w,    &w.o_b,
          &w.q_norm_e,     &w.k_norm_e, &w.post_norm_d, &w.gate_w, &w.gate_b, &w.up_w, &w.up_b, &w.down_w, &w.down_b};
}

/// One block, recomputed in the backward: inputs are x then the block's defined weights.
torch::Tensor checkpointed_block(const std::shared_ptr<const policy::decoder>& model, int64_t layer,
                                 const torch::Tensor& x_1td, const torch::Tensor& positions_1t,
                                 const std::vector<int64_t>& offsets) {
  policy::decoder::layer_refs w = model->layer(layer);
  std::vector<torch::Tensor> inputs{x_1td};
  for (torch::Tensor* f : fields_of(w))
    if (f->defined()) inputs.push_back(*f);
  auto fn = [model, layer, positions_1t, offsets](const std::vector<torch::Tensor>& in) {
    policy::decoder::layer_refs w2 = model->layer(layer);
    size_t next = 1;
    for (torch::Tensor* f : fields_of(w2))
      if (f->defined()) *f = in[next++];
    return std::vector<torch::Tensor>{model->packed_block(w2, in[0], positions_1t, offsets)};
  };
  return checkpointed(fn, inputs)[0];
}

/// log-probability of `targets_c` and entropy under softmax(h W^T / temperature), fp32 [c].
std::vector<torch::Tensor> head_rows(const torch::Tensor& h_cd, const torch::Tensor& w_vd,
                                     const torch::Tensor& targets_c, double temperature, bool want_entropy) {
  auto logits_cv = torch::linear(h_cd, w_vd).to(torch::kFloat32);
  if (temperature != 1.0) logits_cv = logits_cv / temperature;
  auto lse_c = torch::logsumexp(logits_cv, -1);
  auto logp_c = logits_cv.gather(1, targets_c.unsqueeze(1)).squeeze(1) - lse_c;
  if (!want_entropy) return {logp_c};
  auto probs_cv = torch::exp(logits_cv - lse_c.unsqueeze(1));
  return {logp_c, lse_c - (probs_cv * logits_cv).sum(-1)};
}

/// The LM head over prediction rows, `chunk` rows at a time (recomputed in the backward).
std::vector<torch::Tensor> chunked_head(const torch::Tensor& h_rd, const torch::Tensor& w_vd,
                                        const torch::Tensor& targets_r, const train_forward_options& o) {
  const int64_t rows = h_rd.size(0);
  const int64_t chunk = o.logprob_chunk > 0 ? o.logprob_chunk : std::max<int64_t>(rows, 1);
  const bool recompute = o.logprob_chunk > 0 && o.recompute_head && torch::GradMode::is_enabled();
  std::vector<torch::Tensor> logp_parts, entropy_parts;
  for (int64_t begin = 0; begin < rows; begin += chunk) {
    const int64_t len = std::min(chunk, rows - begin);
    auto targets_c = targets_r.narrow(0, begin, len);
    auto h_cd = h_rd.narrow(0, begin, len);
    std::vector<torch::Tensor> out;
    if (o.fused_head && fused_head_applies(h_cd, w_vd)) {
      out = fused_head(h_cd, w_vd, targets_c, o.temperature, /*keep_logits=*/!recompute);
    } else if (recompute) {
      const double temperature = o.temperature;
      const bool want_entropy = o.want_entropy;
      out = checkpointed(
          [targets_c, temperature, want_entropy](const std::vector<torch::Tensor>& in) {
            return head_rows(in[0], in[1], targets_c, temperature, want_entropy);
          },
          {h_cd, w_vd});
    } else {
      out = head_rows(h_cd, w_vd, targets_c, o.temperature, o.want_entropy);
    }
    logp_parts.push_back(out[0]);
    if (o.want_entropy) entropy_parts.push_back(out[1]);
  }
  auto join = [&](std::vector<torch::Tensor>& parts) {
    if (parts.empty()) return torch::zeros({0}, h_rd.options().dtype(torch::kFloat32));
    return parts.size() == 1 ? parts.front() : torch::cat(parts);
  };
  return {join(logp_parts), o.want_entropy ? join(entropy_parts) : torch::Tensor()};
}

/// [x_0, ..., x_{r-1}] -> [0, x_0, ..., x_{r-1}] * not_start: aligns row i - 1 to token i.
torch::Tensor align_to_tokens(const torch::Tensor& rows_r, const torch::Tensor& not_start_t) {
  return torch::cat({torch::zeros({1}, rows_r.options()), rows_r}) * not_start_t;
}

status check_request(const policy::decoder& model, const torch::Tensor& tokens_t, const std::vector<int64_t>& offsets,
                     const train_forward_options& o) {
  const auto& c = model.config();
  if (tokens_t.dim() != 1 || tokens_t.scalar_type() != torch::kInt64)
    return fail("train_forward: tokens must be int64 [t]");
  if (tokens_t.size(0) == 0) return fail("train_forward: the batch has no tokens");
  if (o.compute_dtype != torch::kFloat32 && o.compute_dtype != torch::kBFloat16 && o.compute_dtype != torch::kFloat16)
    return fail("train_forward: compute dtype must be float32, bfloat16 or float16");
  if (o.want_values && !model.has_value_head()) return fail("train_forward: values need a value head");
  if (o.temperature <= 0) return fail("train_forward: temperature must be > 0");
  for (size_t i = 0; i + 1 < offsets.size(); ++i)
    if (offsets[i + 1] - offsets[i] > c.max_position_embeddings)
      return fail("train_forward: sequence " + std::to_string(i) + " has " +
                  std::to_string(offsets[i + 1] - offsets[i]) + " tokens, more than the model's context of " +
                  std::to_string(c.max_position_embeddings));
  auto range = torch::aminmax(tokens_t);
  const int64_t lo = std::get<0>(range).item<int64_t>(), hi = std::get<1>(range).item<int64_t>();
  if (lo < 0 || hi >= c.vocab_size)
    return fail("train_forward: token id " + std::to_string(lo < 0 ? lo : hi) + " is outside the vocabulary of " +
                std::to_string(c.vocab_size));
  return {};
}

}  // namespace

std::vector<torch::Tensor> checkpointed(recompute_fn fn, const std::vector<torch::Tensor>& inputs) {
  auto holder = c10::make_intrusive<recompute_holder>(std::move(fn));
  return checkpoint_function::apply(holder, at::TensorList(inputs));
}

torch::Tensor packed_positions(const std::vector<int64_t>& seq_offsets, torch::Device device) {
  std::vector<int64_t> positions;
  positions.reserve(static_cast<size_t>(seq_offsets.empty() ? 0 : seq_offsets.back()));
  for (size_t i = 0; i + 1 < seq_offsets.size(); ++i)
    for (int64_t p = 0; p < seq_offsets[i + 1] - seq_offsets[i]; ++p) positions.push_back(p);
  return torch::tensor(positions, torch::kInt64).to(device);
}

result<train_forward_output> train_forward(const policy::decoder& model, const torch::Tensor& tokens_t,
                                           const torch::Tensor& seq_offsets_n1, const train_forward_options& options) {
  if (!tokens_t.defined() || tokens_t.dim() != 1) return fail("train_forward: tokens must be int64 [t]");
  if (auto ok = check_offsets(seq_offsets_n1, tokens_t.size(0), "train_forward"); !ok) return ok.error();
  auto offsets_cpu = seq_offsets_n1.to(torch::kCPU).contiguous();
  std::vector<int64_t> offsets(offsets_cpu.data_ptr<int64_t>(), offsets_cpu.data_ptr<int64_t>() + offsets_cpu.numel());
  if (auto ok = check_request(model, tokens_t, offsets, options); !ok) return ok.error();
  try {
    const int64_t t = tokens_t.size(0);
    auto compute = std::make_shared<const policy::decoder>(model.cast(options.compute_dtype));
    auto positions_1t = packed_positions(offsets, model.device()).unsqueeze(0);
    auto x_1td = compute->embed(tokens_t.unsqueeze(0));
    const bool recompute = options.checkpoint_layers && torch::GradMode::is_enabled();
    for (int64_t i = 0; i < model.config().num_hidden_layers; ++i)
      x_1td = recompute ? checkpointed_block(compute, i, x_1td, positions_1t, offsets)
                        : compute->packed_block(compute->layer(i), x_1td, positions_1t, offsets);
    auto h_td = compute->final_norm(x_1td)[0];
    std::vector<float> not_start(static_cast<size_t>(t), 1.0f);
    for (size_t i = 0; i + 1 < offsets.size(); ++i)
      if (offsets[i] < t) not_start[static_cast<size_t>(offsets[i])] = 0.0f;
    auto not_start_t = torch::tensor(not_start).to(model.device());
    train_forward_output out;
    if (options.want_logprobs) {
      auto head =
          chunked_head(h_td.narrow(0, 0, t - 1), compute->lm_head_weight(), tokens_t.narrow(0, 1, t - 1), options);
      out.logp_t = align_to_tokens(head[0], not_start_t);
      if (options.want_entropy) out.entropy_t = align_to_tokens(head[1], not_start_t);
    }
    if (options.want_values) {
      const auto& params = compute->named_parameters();
      auto v_t = torch::linear(h_td.narrow(0, 0, t - 1), params.at("value_head.weight"), params.at("value_head.bias"))
                     .squeeze(-1)
                     .to(torch::kFloat32);
      out.values_t = align_to_tokens(v_t, not_start_t);
    }
    return out;
  } catch (const c10::Error& e) {
    return fail(std::string("train_forward: ") + e.what_without_backtrace());
  }
}

}  // namespace caf_agent::learner
