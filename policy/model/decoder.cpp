// decoder: the model (checkpoints, parameters, the forward pass and its training pieces, a
// layer's attention dispatch). KV-cache passes: decoder_cache.cpp; flash over the cache:
// decoder_flash.cpp. Shape legend: see decoder.hpp. g: query heads per key/value head.
#include "policy/model/decoder.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include <ATen/ATen.h>
#include <c10/util/Exception.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <tuple>

#include "policy/model/fused_ops.hpp"
#include "policy/model/host_copy.hpp"

namespace caf_agent::policy {
namespace {

std::string shape_text(c10::IntArrayRef shape) {
  std::ostringstream out;
  out << '[';
  for (size_t i = 0; i < shape.size(); ++i) out << (i ? ", " : "") << shape[i];
  out << ']';
  return out.str();
}

// Rationale: older checkpoints store RoPE's inv_freq buffer; it is recomputed from config.
bool ignorable_name(const std::string& name) {
  return name.ends_with("rotary_emb.inv_freq");
}

}  // namespace

std::map<std::string, std::vector<int64_t>> expected_parameter_shapes(const model_config& c) {
  std::map<std::string, std::vector<int64_t>> out;
  const int64_t d = c.hidden_size, q = c.num_attention_heads * c.head_dim;
  const int64_t kv = c.num_key_value_heads * c.head_dim, f = c.intermediate_size;
  out["model.embed_tokens.weight"] = {c.vocab_size, d};
  out["model.norm.weight"] = {d};
  if (!c.tie_word_embeddings) out["lm_head.weight"] = {c.vocab_size, d};
  for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
    const std::string p = "model.layers." + std::to_string(i) + ".";
    out[p + "input_layernorm.weight"] = {d};
    out[p + "post_attention_layernorm.weight"] = {d};
    out[p + "self_attn.q_proj.weight"] = {q, d};
    out[p + "self_attn.k_proj.weight"] = {kv, d};
    out[p + "self_attn.v_proj.weight"] = {kv, d};
    out[p + "self_attn.o_proj.weight"] = {d, q};
    if (c.attention_bias) {
      out[p + "self_attn.q_proj.bias"] = {q};
      out[p + "self_attn.k_proj.bias"] = {kv};
      out[p + "self_attn.v_proj.bias"] = {kv};
    }
    if (c.attention_output_bias) out[p + "self_attn.o_proj.bias"] = {d};
    if (c.qk_norm) {
      out[p + "self_attn.q_norm.weight"] = {c.head_dim};
      out[p + "self_attn.k_norm.weight"] = {c.head_dim};
    }
    out[p + "mlp.gate_proj.weight"] = {f, d};
    out[p + "mlp.up_proj.weight"] = {f, d};
    out[p + "mlp.down_proj.weight"] = {d, f};
    if (c.mlp_bias) {
      out[p + "mlp.gate_proj.bias"] = {f};
      out[p + "mlp.up_proj.bias"] = {f};
      out[p + "mlp.down_proj.bias"] = {d};
    }
  }
  return out;
}

result<decoder> decoder::load(const std::string& model_dir, torch::Device device, torch::ScalarType dtype,
                              value_head_mode heads) {
  auto config = load_model_config(model_dir);
  if (!config) return config.error();
  auto tensors = read_checkpoint_tensors(model_dir);
  if (!tensors) return tensors.error();
  return from_tensors(config.value(), tensors.value(), device, dtype, heads);
}

result<decoder> decoder::from_tensors(const model_config& config, const tensor_map& tensors, torch::Device device,
                                      torch::ScalarType dtype, value_head_mode heads) {
  if (auto valid = config.validate(); !valid) return valid.error();
  auto expected = expected_parameter_shapes(config);
  const bool has_head = tensors.count("value_head.weight") && tensors.count("value_head.bias");
  if (heads == value_head_mode::required && !has_head)
    return fail("checkpoint has no value head (value_head.weight / value_head.bias)");
  if (heads != value_head_mode::none && has_head) {
    expected["value_head.weight"] = {1, config.hidden_size};
    expected["value_head.bias"] = {1};
  }
  for (const auto& [name, tensor] : tensors) {
    const bool known = expected.count(name) || ignorable_name(name) || name.starts_with("value_head.") ||
                       (name == "lm_head.weight" && config.tie_word_embeddings);
    if (!known)
      return fail("unexpected tensor '" + name + "' for a " + family_name(config.family) + " checkpoint with " +
                  std::to_string(config.num_hidden_layers) + " layers");
  }
  decoder out;
  out.config_ = config;
  out.device_ = device;
  out.dtype_ = dtype;
  try {
    for (const auto& [name, shape] : expected) {
      auto it = tensors.find(name);
      if (it == tensors.end()) return fail("checkpoint is missing tensor '" + name + "'");
      if (it->second.sizes() != c10::IntArrayRef(shape))
        return fail("tensor '" + name + "' has shape " + shape_text(it->second.sizes()) + ", config.json implies " +
                    shape_text(shape));
      out.params_[name] = it->second.to(device, dtype).contiguous();
    }
    if (heads == value_head_mode::init_if_missing && !has_head) {
      auto options = torch::TensorOptions().device(device).dtype(dtype);
      out.params_["value_head.weight"] = torch::zeros({1, config.hidden_size}, options);
      out.params_["value_head.bias"] = torch::zeros({1}, options);
    }
    out.rope_ = rope_table::make(config.rope, config.head_dim, config.max_position_embeddings, device, dtype);
  } catch (const c10::Error& e) {
    return fail(std::string("cannot place the model on ") + device.str() + ": " + e.what_without_backtrace());
  }
  out.bind_layers();
  return out;
}

void decoder::bind_layers() {
  layers_.clear();
  for (int64_t i = 0; i < config_.num_hidden_layers; ++i) {
    const std::string p = "model.layers." + std::to_string(i) + ".";
    const std::string a = p + "self_attn.", m = p + "mlp.";
    layers_.push_back(layer_refs{
        params_.at(p + "input_layernorm.weight"), params_.at(a + "q_proj.weight"), optional_param(a + "q_proj.bias"),
        params_.at(a + "k_proj.weight"), optional_param(a + "k_proj.bias"), params_.at(a + "v_proj.weight"),
        optional_param(a + "v_proj.bias"), params_.at(a + "o_proj.weight"), optional_param(a + "o_proj.bias"),
        optional_param(a + "q_norm.weight"), optional_param(a + "k_norm.weight"),
        params_.at(p + "post_attention_layernorm.weight"), params_.at(m + "gate_proj.weight"),
        optional_param(m + "gate_proj.bias"), params_.at(m + "up_proj.weight"), optional_param(m + "up_proj.bias"),
        params_.at(m + "down_proj.weight"), optional_param(m + "down_proj.bias")});
    if (!fused_.empty()) {
      auto& w = layers_.back();
      const auto& f = fused_[static_cast<size_t>(i)];
      w.qkv_w = f[0];
      w.qkv_b = f[1];
      w.gate_up_w = f[2];
      w.gate_up_b = f[3];
    }
  }
}

void decoder::fuse_projections() {
  if (fused()) return;
  // One tensor holding `names` end to end along dim 0 (undefined if the first is absent); each
  // name's entry in params_ becomes a view of it, so assign() and the fused GEMM share storage.
  auto fuse = [&](const std::vector<std::string>& names) {
    if (!params_.count(names.front())) return torch::Tensor();
    std::vector<torch::Tensor> parts;
    for (const auto& name : names) parts.push_back(params_.at(name));
    auto joined = torch::cat(parts, 0);
    int64_t offset = 0;
    for (const auto& name : names) {
      const int64_t rows = params_.at(name).size(0);
      params_[name] = joined.narrow(0, offset, rows);
      offset += rows;
    }
    return joined;
  };
  at::NoGradGuard no_grad;
  std::vector<std::array<torch::Tensor, 4>> fused;
  for (int64_t i = 0; i < config_.num_hidden_layers; ++i) {
    const std::string a = "model.layers." + std::to_string(i) + ".self_attn.";
    const std::string m = "model.layers." + std::to_string(i) + ".mlp.";
    fused.push_back({fuse({a + "q_proj.weight", a + "k_proj.weight", a + "v_proj.weight"}),
                     fuse({a + "q_proj.bias", a + "k_proj.bias", a + "v_proj.bias"}),
                     fuse({m + "gate_proj.weight", m + "up_proj.weight"}),
                     fuse({m + "gate_proj.bias", m + "up_proj.bias"})});
  }
  fused_ = std::move(fused);
  bind_layers();
}

torch::Tensor decoder::optional_param(const std::string& name) const {
  auto it = params_.find(name);
  return it == params_.end() ? torch::Tensor() : it->second;
}

status decoder::save(const std::string& model_dir, int64_t max_shard_bytes) const {
  std::error_code ec;
  std::filesystem::create_directories(model_dir, ec);
  std::ofstream config_file(std::filesystem::path(model_dir) / "config.json");
  config_file << model_config_to_json(config_);
  if (!config_file.flush()) return fail("cannot write " + model_dir + "/config.json");
  return write_checkpoint_tensors(model_dir, params_, max_shard_bytes);
}

std::pair<torch::Tensor, torch::Tensor> decoder::attention(int64_t layer, const torch::Tensor& residual_btd,
                                                           const torch::Tensor& delta_btd, const rope_angles& angles,
                                                           const cache_use& use) const {
  const auto& w = layers_[static_cast<size_t>(layer)];
  const int64_t b = residual_btd.size(0), t = residual_btd.size(1), e = config_.head_dim;
  const int64_t h = config_.num_attention_heads;
  torch::Tensor sum_btd, out_bhte;
  if (auto [sum, q_bh1e] = fused_decode_qkv(layer, residual_btd, delta_btd, use); q_bh1e.defined()) {
    sum_btd = std::move(sum);
    out_bhte = decode_attention(layer, q_bh1e, use);
  } else {
    torch::Tensor normed_btd;
    std::tie(sum_btd, normed_btd) =
        add_rms_norm(residual_btd, delta_btd, w.input_norm_d, config_.rms_norm_eps, fused_kernels_);
    auto [q_bhte, k_bkte, v_bkte] = project_qkv(w, normed_btd, angles, /*fused=*/true);
    out_bhte = unfused_attention(layer, q_bhte, k_bkte, v_bkte, use);
  }
  return {sum_btd, linear_rows(out_bhte.transpose(1, 2).reshape({b, t, h * e}), w.o_w, w.o_b, gemv_rows_of(use),
                               mma_rows_of(use))};
}

std::array<torch::Tensor, 3> decoder::project_qkv(const layer_refs& w, const torch::Tensor& x_btd,
                                                  const rope_angles& angles, bool fused) const {
  const int64_t b = x_btd.size(0), t = x_btd.size(1), e = config_.head_dim;
  const int64_t h = config_.num_attention_heads, k = config_.num_key_value_heads;
  torch::Tensor q_bthe, k_btke, v_bkte;
  if (fused && w.qkv_w.defined()) {
    // One GEMM; q, k and v are views of its output (heads h + 2k: q's, then k's, then v's).
    auto qkv_btne = torch::linear(x_btd, w.qkv_w, w.qkv_b).view({b, t, h + 2 * k, e});
    v_bkte = qkv_btne.narrow(2, h + k, k).transpose(1, 2);
    if (!config_.qk_norm) {  // q and k rotated in one pass over their h + k heads
      auto qk_btne = apply_rope_bthe(qkv_btne.narrow(2, 0, h + k), angles);
      return {qk_btne.narrow(2, 0, h).transpose(1, 2), qk_btne.narrow(2, h, k).transpose(1, 2), v_bkte};
    }
    q_bthe = qkv_btne.narrow(2, 0, h);
    k_btke = qkv_btne.narrow(2, h, k);
  } else {
    q_bthe = torch::linear(x_btd, w.q_w, w.q_b).view({b, t, h, e});
    k_btke = torch::linear(x_btd, w.k_w, w.k_b).view({b, t, k, e});
    v_bkte = torch::linear(x_btd, w.v_w, w.v_b).view({b, t, k, e}).transpose(1, 2);
  }
  if (config_.qk_norm) {  // Qwen3: per-head RMSNorm before RoPE.
    q_bthe = rms_norm(q_bthe, w.q_norm_e, config_.rms_norm_eps);
    k_btke = rms_norm(k_btke, w.k_norm_e, config_.rms_norm_eps);
  }
  return {apply_rope(q_bthe.transpose(1, 2), angles), apply_rope(k_btke.transpose(1, 2), angles), v_bkte};
}

decoder decoder::cast(torch::ScalarType dtype) const {
  if (dtype == dtype_) return *this;
  decoder out;
  out.config_ = config_;
  out.device_ = device_;
  out.dtype_ = dtype;
  for (const auto& [name, tensor] : params_) out.params_[name] = tensor.to(dtype);
  // Rationale: rope_table::make computes in fp32 and casts, so casting the fp32 table is equal.
  out.rope_ = rope_table{rope_.cos_pe.to(dtype), rope_.sin_pe.to(dtype)};
  out.bind_layers();
  return out;
}

result<decoder> decoder::with_parameters(const tensor_map& params) const {
  if (params.size() != params_.size())
    return fail("with_parameters: " + std::to_string(params.size()) + " tensors, the model has " +
                std::to_string(params_.size()));
  const torch::ScalarType dtype = params.empty() ? dtype_ : params.begin()->second.scalar_type();
  if (!at::isFloatingType(dtype)) return fail("with_parameters: the tensors are not of a floating dtype");
  for (const auto& [name, tensor] : params_) {
    auto it = params.find(name);
    if (it == params.end()) return fail("with_parameters: tensor '" + name + "' is missing");
    if (it->second.sizes() != tensor.sizes())
      return fail("with_parameters: tensor '" + name + "' has shape " + shape_text(it->second.sizes()) +
                  ", the model has " + shape_text(tensor.sizes()));
    // A tensor on CUDA reports its index ("cuda:0"); the model's device may have none ("cuda").
    const auto& d = it->second.device();
    const bool same_device =
        d.type() == device_.type() && (!d.has_index() || !device_.has_index() || d.index() == device_.index());
    if (it->second.scalar_type() != dtype || !same_device)
      return fail("with_parameters: tensor '" + name + "' differs in dtype or device from the others");
  }
  decoder out;
  out.config_ = config_;
  out.device_ = device_;
  out.dtype_ = dtype;
  out.params_ = params;
  // Rationale: rope_table::make computes in fp32 and casts, so casting the fp32 table is equal.
  out.rope_ = dtype == dtype_ ? rope_ : rope_table{rope_.cos_pe.to(dtype), rope_.sin_pe.to(dtype)};
  out.bind_layers();
  return out;
}

torch::Tensor decoder::embed(const torch::Tensor& tokens_1t) const {
  return torch::embedding(params_.at("model.embed_tokens.weight"), tokens_1t);
}

torch::Tensor decoder::final_norm(const torch::Tensor& x_xd) const {
  return rms_norm(x_xd, params_.at("model.norm.weight"), config_.rms_norm_eps);
}

const torch::Tensor& decoder::lm_head_weight() const {
  return config_.tie_word_embeddings ? params_.at("model.embed_tokens.weight") : params_.at("lm_head.weight");
}

torch::Tensor decoder::packed_block(const layer_refs& w, const torch::Tensor& x_1td, const torch::Tensor& positions_1t,
                                    const std::vector<int64_t>& seq_offsets) const {
  const double eps = config_.rms_norm_eps;
  const int64_t t = x_1td.size(1), e = config_.head_dim;
  const int64_t h = config_.num_attention_heads, k = config_.num_key_value_heads;
  auto [q_1hte, k_1kte, v_1kte] =
      project_qkv(w, rms_norm(x_1td, w.input_norm_d, eps), rope_angles::gather(positions_1t, rope_), /*fused=*/false);
  // Rationale: causal attention per sequence instead of a block-diagonal mask: no [t, t] mask
  // (17 G entries at 131k tokens), and is_causal keeps CUDA on the flash kernel. Sequences of
  // equal length share one batched call (many short trajectories would otherwise cost one call
  // each); a single sequence is attended in place without any gather.
  std::map<int64_t, std::vector<int64_t>> by_length;  // length -> first token of each sequence
  for (size_t i = 0; i + 1 < seq_offsets.size(); ++i)
    if (seq_offsets[i + 1] > seq_offsets[i]) by_length[seq_offsets[i + 1] - seq_offsets[i]].push_back(seq_offsets[i]);
  // One length (a single trajectory, or equal ones): the buckets are already in token order.
  bool identity = by_length.size() == 1;
  std::vector<int64_t> order;  // token indices in bucket order
  if (!identity) {
    order.reserve(static_cast<size_t>(t));
    for (const auto& [len, starts] : by_length)
      for (int64_t start : starts)
        for (int64_t j = 0; j < len; ++j) order.push_back(start + j);
  }
  torch::Tensor order_t;
  if (!identity) {
    order_t = to_device(order, x_1td.device());
    q_1hte = q_1hte.index_select(2, order_t);
    k_1kte = k_1kte.index_select(2, order_t);
    v_1kte = v_1kte.index_select(2, order_t);
  }
  std::vector<torch::Tensor> parts_1hse;
  int64_t begin = 0;
  for (const auto& [len, starts] : by_length) {
    const int64_t m = static_cast<int64_t>(starts.size());
    auto batch = [&](const torch::Tensor& x_1xte, int64_t heads) {  // -> [m, heads, len, e]
      return x_1xte.narrow(2, begin, m * len).reshape({heads, m, len, e}).transpose(0, 1);
    };
    auto out_mhle = at::scaled_dot_product_attention(batch(q_1hte, h), batch(k_1kte, k), batch(v_1kte, k), {}, 0.0,
                                                     /*is_causal=*/true, std::nullopt, /*enable_gqa=*/h != k);
    parts_1hse.push_back(m == 1 ? out_mhle : out_mhle.transpose(0, 1).reshape({1, h, m * len, e}));
    begin += m * len;
  }
  auto out_1hte = parts_1hse.size() == 1 ? parts_1hse.front() : torch::cat(parts_1hse, 2);
  if (!identity) out_1hte = torch::empty_like(out_1hte).index_copy(2, order_t, out_1hte);
  auto attn_1td = torch::linear(out_1hte.transpose(1, 2).reshape({1, t, h * e}), w.o_w, w.o_b);
  auto x2_1td = x_1td + attn_1td;
  return x2_1td + swiglu(rms_norm(x2_1td, w.post_norm_d, eps), w.gate_w, w.gate_b, w.up_w, w.up_b, w.down_w, w.down_b);
}

torch::Tensor decoder::run_layers(torch::Tensor x_btd, const torch::Tensor& positions_bt, const cache_use& use) const {
  const double eps = config_.rms_norm_eps;
  const auto angles = rope_angles::gather(positions_bt, rope_);  // the same for every layer
  // Each residual add is fused with the norm that follows it (add_rms_norm): the block's input
  // norm (the first block's over the embeddings alone), the post-attention norm, and after the last
  // block the final norm. In a decode step of few rows the norms also run in the projections after
  // them, and silu_mul in the gate/up projection (add_rms_norm_linear).
  const bool fused = fused_kernels_;
  const int64_t n = config_.num_hidden_layers;
  torch::Tensor residual_btd = std::move(x_btd), delta_btd;
  for (int64_t i = 0; i < n; ++i) {
    const auto& w = layers_[static_cast<size_t>(i)];
    auto [sum_btd, attention_btd] = attention(i, residual_btd, delta_btd, angles, use);
    if (w.gate_up_w.defined()) {
      const int64_t gemv = gemv_rows_of(use), mma = mma_rows_of(use);
      torch::Tensor hidden_btf;  // silu(gate) * up
      std::tie(residual_btd, hidden_btf) = add_rms_norm_linear(sum_btd, attention_btd, w.post_norm_d, eps, w.gate_up_w,
                                                               w.gate_up_b, gemv, fused, /*silu_mul_after=*/true, mma);
      delta_btd = linear_rows(hidden_btf, w.down_w, w.down_b, gemv, mma);
    } else {
      torch::Tensor normed_btd;
      std::tie(residual_btd, normed_btd) = add_rms_norm(sum_btd, attention_btd, w.post_norm_d, eps, fused);
      delta_btd = swiglu(normed_btd, w.gate_w, w.gate_b, w.up_w, w.up_b, w.down_w, w.down_b);
    }
  }
  return add_rms_norm(residual_btd, delta_btd, params_.at("model.norm.weight"), eps, fused).second;
}

torch::Tensor decoder::lm_head(const torch::Tensor& hidden_btd, bool to_float) const {
  const auto& weight_vd =
      config_.tie_word_embeddings ? params_.at("model.embed_tokens.weight") : params_.at("lm_head.weight");
  auto logits = torch::linear(hidden_btd, weight_vd);
  return to_float ? logits.to(torch::kFloat32) : logits;
}

torch::Tensor decoder::hidden(const torch::Tensor& tokens_bt, const torch::Tensor& positions_bt) const {
  auto positions = positions_bt.defined() ? positions_bt
                                          : torch::arange(tokens_bt.size(1), tokens_bt.options().dtype(torch::kInt64))
                                                .unsqueeze(0)
                                                .expand_as(tokens_bt);
  auto x_btd = torch::embedding(params_.at("model.embed_tokens.weight"), tokens_bt);
  return run_layers(x_btd, positions, cache_use{});
}

torch::Tensor decoder::forward(const torch::Tensor& tokens_bt, const torch::Tensor& positions_bt) const {
  return lm_head(hidden(tokens_bt, positions_bt));
}

torch::Tensor decoder::token_logprobs(const torch::Tensor& tokens_bt, const torch::Tensor& positions_bt,
                                      double temperature) const {
  const int64_t t = tokens_bt.size(1);
  auto logits_btv = forward(tokens_bt, positions_bt).narrow(1, 0, t - 1);
  auto logp_btv = torch::log_softmax(logits_btv / temperature, -1);
  return logp_btv.gather(2, tokens_bt.narrow(1, 1, t - 1).unsqueeze(-1)).squeeze(-1);
}

torch::Tensor decoder::values(const torch::Tensor& tokens_bt, const torch::Tensor& positions_bt) const {
  auto hidden_btd = hidden(tokens_bt, positions_bt);
  return torch::linear(hidden_btd, params_.at("value_head.weight"), params_.at("value_head.bias"))
      .squeeze(-1)
      .to(torch::kFloat32);
}

status decoder::assign(const tensor_map& tensors) {
  for (const auto& [name, tensor] : params_) {
    auto it = tensors.find(name);
    if (it == tensors.end()) return fail("new weights lack tensor '" + name + "'");
    if (it->second.sizes() != tensor.sizes())
      return fail("new tensor '" + name + "' has shape " + shape_text(it->second.sizes()) + ", the model has " +
                  shape_text(tensor.sizes()));
  }
  try {
    at::NoGradGuard no_grad;
    for (auto& [name, tensor] : params_) tensor.copy_(tensors.at(name));
  } catch (const c10::Error& e) {
    return fail(std::string("copying new weights failed: ") + e.what_without_backtrace());
  }
  return {};
}

}  // namespace caf_agent::policy
