// Shape legend: see decoder.hpp. g: query heads per key/value head.
#include "policy/model/decoder.hpp"

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

// A decode step's flash cut into shares (decode(), set_flash_decode_shares) only over at least
// this many keys.
constexpr int64_t flash_share_min_keys = 8192;

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

bool is_fp8(const torch::Tensor& cache) {
  return cache.scalar_type() == torch::kFloat8_e4m3fn;
}

// Keys or values of the model's dtype as `cache` holds them (kv_cache::entries()): for an e4m3 cache each
// value saturated at +-448 and rounded to e4m3 (ATen's cast alone turns what exceeds the range
// into NaN), as bytes; otherwise as they are.
torch::Tensor stored(const torch::Tensor& x, const torch::Tensor& cache) {
  if (!is_fp8(cache)) return x;
  return x.clamp(-448.0, 448.0).to(torch::kFloat8_e4m3fn).view(torch::kUInt8);
}

// Entries read from `cache` (its own type or kv_cache::entries()' bytes) in `dtype`.
torch::Tensor loaded(const torch::Tensor& x, const torch::Tensor& cache, torch::ScalarType dtype) {
  return is_fp8(cache) ? x.view(torch::kFloat8_e4m3fn).to(dtype) : x;
}

// Paged cache: the blocks `table_bm` [b, m] of one layer's cache [k, blocks, block size, e] as
// [b, k, m * block size, e] in `dtype`, the shape slot rows have in place (a copy, viewed).
// Rationale: a gather keeps the sdpa and matmul modes' code unchanged; flash reads the blocks in place.
torch::Tensor gather_blocks(const torch::Tensor& cache_knse, const torch::Tensor& table_bm, torch::ScalarType dtype) {
  const int64_t b = table_bm.size(0), m = table_bm.size(1);
  const int64_t k = cache_knse.size(0), bs = cache_knse.size(2), e = cache_knse.size(3);
  return loaded(kv_cache::entries(cache_knse).index_select(1, table_bm.reshape({b * m})), cache_knse, dtype)
      .view({k, b, m * bs, e})
      .transpose(0, 1);
}

// Paged cache: writes x_xke (x positions' keys or values, every KV head) into block blocks_x[i]
// at offset offsets_x[i] of one layer's cache [k, blocks, block size, e].
void write_blocks(torch::Tensor& cache_knse, const torch::Tensor& blocks_x, const torch::Tensor& offsets_x,
                  const torch::Tensor& x_xke) {
  kv_cache::entries(cache_knse)
      .index_put_({torch::indexing::Slice(), blocks_x, offsets_x}, stored(x_xke.transpose(0, 1), cache_knse));
}

// Paged cache [k, blocks, block size, e] as rows [k * blocks * block size, e]: the rows of each
// (x, KV head) of flat_x (KV head 0's row: block * block size + offset; a KV head's rows are
// `stride` = blocks * block size), x-major: [x * k].
torch::Tensor head_rows(const torch::Tensor& flat_x, int64_t k, int64_t stride) {
  return (flat_x.view({-1, 1}) + torch::arange(k, flat_x.options()).view({1, k}) * stride).view({-1});
}

// Whether the blocks holding positions 0..end-1 (blocks of `block_size` tokens) are consecutive
// block ids, so that each KV head's keys lie in one stretch of the flat paged cache.
bool one_run(const std::vector<int64_t>& blocks, int64_t block_size, int64_t end) {
  const auto used = std::min(blocks.size(), static_cast<size_t>((end + block_size - 1) / block_size));
  for (size_t i = 1; i < used; ++i)
    if (blocks[i] != blocks[i - 1] + 1) return false;
  return true;
}

// flash's variable-length forward: q [x_q, heads, e] over k, v [x_k, KV heads, e], sequence i's
// queries from row cu_q[i] and its used_k[i] keys from row cu_k[i] (int32); causal from the bottom
// right when a sequence has more than one query. `lse`: also its fp32 log-sum-exps [heads, x_q].
torch::Tensor flash_varlen(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                           const torch::Tensor& cu_q, const torch::Tensor& cu_k, const torch::Tensor& used_k,
                           int64_t max_q, int64_t max_k, torch::Tensor* lse) {
  auto out = at::_flash_attention_forward(q, k, v, cu_q, cu_k, max_q, max_k, /*dropout_p=*/0.0, /*is_causal=*/max_q > 1,
                                          /*return_debug_mask=*/false, std::nullopt, std::nullopt, std::nullopt,
                                          used_k.defined() ? std::optional<torch::Tensor>(used_k) : std::nullopt);
  if (lse != nullptr) *lse = std::get<1>(out);
  return std::get<0>(out);
}

}  // namespace

std::vector<int64_t> paged_block_runs(const std::vector<const std::vector<int64_t>*>& tables, int64_t block_size,
                                      int64_t width, int64_t pad) {
  std::vector<int64_t> out;
  out.reserve(tables.size() * static_cast<size_t>(width) * 3);
  for (const auto* blocks : tables) {
    int64_t runs = 0;
    for (size_t i = 0; i < blocks->size(); ++i) {
      if (i > 0 && (*blocks)[i] == (*blocks)[i - 1] + 1) {
        ++out.back();  // the run goes on
        continue;
      }
      out.insert(out.end(), {(*blocks)[i], static_cast<int64_t>(i) * block_size, 1});
      ++runs;
    }
    for (; runs < width; ++runs) out.insert(out.end(), {pad, 0, 0});
  }
  return out;
}

int64_t flash_split_sequences(int64_t multiprocessors) {
  return multiprocessors > 0 ? (16 * multiprocessors + 9) / 10 - 1 : 0;
}

int64_t paged_block_run_count(const std::vector<const std::vector<int64_t>*>& tables) {
  int64_t most = 1;
  for (const auto* blocks : tables) {
    int64_t runs = blocks->empty() ? 0 : 1;
    for (size_t i = 1; i < blocks->size(); ++i) runs += (*blocks)[i] != (*blocks)[i - 1] + 1;
    most = std::max(most, runs);
  }
  return most;
}

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

torch::Tensor kv_cache::entries(const torch::Tensor& buffer) {
  return is_fp8(buffer) ? buffer.view(torch::kUInt8) : buffer;
}

torch::Tensor kv_cache::zeros(c10::IntArrayRef shape, torch::Device device, torch::ScalarType dtype) {
  const auto options = torch::TensorOptions().device(device);
  // Rationale: zero bytes are e4m3 zeros; filling a float8 tensor is not every build's kernel.
  if (dtype == torch::kFloat8_e4m3fn) return torch::zeros(shape, options.dtype(torch::kUInt8)).view(dtype);
  return torch::zeros(shape, options.dtype(dtype));
}

kv_cache kv_cache::allocate(const model_config& config, int64_t slots, int64_t capacity, torch::Device device,
                            torch::ScalarType dtype) {
  kv_cache cache;
  for (int64_t i = 0; i < config.num_hidden_layers; ++i) {
    for (auto* buffers : {&cache.k_nkce, &cache.v_nkce})
      buffers->push_back(zeros({slots, config.num_key_value_heads, capacity, config.head_dim}, device, dtype));
  }
  return cache;
}

kv_cache kv_cache::allocate_blocks(const model_config& config, int64_t blocks, int64_t block_size, torch::Device device,
                                   torch::ScalarType dtype) {
  kv_cache cache;
  cache.paged = true;
  for (int64_t i = 0; i < config.num_hidden_layers; ++i) {
    for (auto* buffers : {&cache.k_nkce, &cache.v_nkce})
      buffers->push_back(zeros({config.num_key_value_heads, blocks, block_size, config.head_dim}, device, dtype));
  }
  return cache;
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

torch::Tensor decoder::flash_over_cache(int64_t layer, const torch::Tensor& q_xge, const kv_cache& cache,
                                        const flash_seqs& seqs, torch::Tensor* lse) const {
  const int64_t e = q_xge.size(2);
  const auto& k_cache = cache.k_nkce[static_cast<size_t>(layer)];
  const auto& v_cache = cache.v_nkce[static_cast<size_t>(layer)];
  // Slots [n, k, c, e] as one sequence per (slot, KV head): [n * k * c, 1 head, e], a view; paged
  // [blocks, k, block size, e] alike, one sequence per (block, KV head).
  return flash_varlen(q_xge, k_cache.view({-1, 1, e}), v_cache.view({-1, 1, e}), seqs.cu_q, seqs.cu_k, seqs.used_k,
                      seqs.max_q, seqs.max_k, lse);
}

torch::Tensor decoder::paged_flash_decode(int64_t layer, const torch::Tensor& q_yge, const kv_cache& cache,
                                          const flash_seqs& seqs) const {
  // Share-major sequences (describe_paged_decode): the call over shares s0..s0+n-1 reads entries
  // s0 * y .. of cu_k and used_k, every (row, KV head)'s g queries once per share.
  const int64_t y = q_yge.size(0), g = q_yge.size(1), e = q_yge.size(2);
  std::vector<torch::Tensor> outs, lses;
  for (int64_t s0 = 0; s0 < seqs.shares; s0 += seqs.call_shares) {
    const int64_t n = std::min(seqs.call_shares, seqs.shares - s0);
    flash_seqs call;
    call.cu_q = seqs.cu_q.narrow(0, 0, n * y + 1);
    call.cu_k = seqs.cu_k.narrow(0, s0 * y, n * y + 1);
    call.used_k = seqs.used_k.narrow(0, s0 * y, n * y);
    call.max_k = seqs.max_k;
    auto q_xge = n == 1 ? q_yge : q_yge.unsqueeze(0).expand({n, y, g, e}).reshape({n * y, g, e});
    torch::Tensor lse;
    outs.push_back(flash_over_cache(layer, q_xge, cache, call, &lse));
    // flash's varlen forward returns the log-sum-exps as [g, x] (query head, sequence).
    TORCH_CHECK(lse.dim() == 2 && lse.size(0) == g && lse.size(1) == n * y, "decode: flash returned a log-sum-exp of ",
                lse.sizes(), " for ", n * y, " sequences of ", g, " queries");
    lses.push_back(lse);
  }
  auto out_xge = outs.size() == 1 ? outs.front() : torch::cat(outs, 0);
  auto lse_gx = lses.size() == 1 ? lses.front() : torch::cat(lses, 1);
  return merge_shares(out_xge, lse_gx.contiguous(), seqs.used_k, seqs.shares, fused_kernels_, /*share_major=*/true)
      .view({y / config_.num_key_value_heads, config_.num_attention_heads, 1, e});
}

torch::Tensor decoder::packed_flash_prefill(int64_t layer, const torch::Tensor& q_1hte, const torch::Tensor& k_1kte,
                                            const torch::Tensor& v_1kte, const cache_use& use) const {
  const int64_t t = q_1hte.size(2), e = config_.head_dim;
  const int64_t h = config_.num_attention_heads, k = config_.num_key_value_heads, g = h / k;
  auto& k_cache = use.cache->k_nkce[static_cast<size_t>(layer)];
  auto& v_cache = use.cache->v_nkce[static_cast<size_t>(layer)];
  // Every part's new keys into its slot at once: row (slot * k + head) * c + position.
  k_cache.view({-1, e}).index_copy_(0, use.prefill_rows_kt, k_1kte[0].reshape({k * t, e}));
  v_cache.view({-1, e}).index_copy_(0, use.prefill_rows_kt, v_1kte[0].reshape({k * t, e}));
  // Sequences in (KV head, part) order: head j's queries are q's heads j*g..j*g+g-1 over all T
  // tokens, so [k, g, T, e] -> [k, T, g, e] lays them out end to end.
  auto q_xge = q_1hte[0].view({k, g, t, e}).permute({0, 2, 1, 3}).reshape({k * t, g, e});
  return flash_over_cache(layer, q_xge, *use.cache, use.prefill_seqs)
      .view({k, t, g, e})
      .permute({0, 2, 1, 3})
      .reshape({1, h, t, e});
}

torch::Tensor decoder::paged_flash_prefill(int64_t layer, const torch::Tensor& q_1hte, const torch::Tensor& k_1kte,
                                           const torch::Tensor& v_1kte, const cache_use& use) const {
  const int64_t e = config_.head_dim, k = config_.num_key_value_heads;
  const auto& k_cache = use.cache->k_nkce[static_cast<size_t>(layer)];
  const auto& v_cache = use.cache->v_nkce[static_cast<size_t>(layer)];
  auto k_rows = kv_cache::entries(k_cache).view({-1, e});
  auto v_rows = kv_cache::entries(v_cache).view({-1, e});
  // Rows token-major ([T * k], [S * k]): keys [T, k, e] in, [S, k, e] out (an e4m3 cache's read
  // back into the model's dtype).
  k_rows.index_copy_(0, use.page_rows_t, stored(k_1kte[0].transpose(0, 1).reshape({-1, e}), k_cache));
  v_rows.index_copy_(0, use.page_rows_t, stored(v_1kte[0].transpose(0, 1).reshape({-1, e}), v_cache));
  const auto& seqs = use.prefill_seqs;
  const auto dtype = q_1hte.scalar_type();
  return flash_varlen(q_1hte[0].transpose(0, 1),
                      loaded(k_rows.index_select(0, use.page_keys_s), k_cache, dtype).view({-1, k, e}),
                      loaded(v_rows.index_select(0, use.page_keys_s), v_cache, dtype).view({-1, k, e}), seqs.cu_q,
                      seqs.cu_k, {}, seqs.max_q, seqs.max_k, nullptr)
      .transpose(0, 1)
      .unsqueeze(0);
}

torch::Tensor decoder::prefill_attention(int64_t layer, const torch::Tensor& q_1hte, const torch::Tensor& k_1kte,
                                         const torch::Tensor& v_1kte, const prefill_part& part, kv_cache& cache,
                                         const cache_use::paged_part* page) const {
  const int64_t t = q_1hte.size(2);
  const int64_t h = config_.num_attention_heads, k = config_.num_key_value_heads, g = h / k;
  auto& k_cache = cache.k_nkce[static_cast<size_t>(layer)];
  auto& v_cache = cache.v_nkce[static_cast<size_t>(layer)];
  // Keep keys and values for decoding.
  if (page != nullptr) {
    write_blocks(k_cache, page->blocks_t, page->offsets_t, k_1kte[0].transpose(0, 1));
    write_blocks(v_cache, page->blocks_t, page->offsets_t, v_1kte[0].transpose(0, 1));
  } else {
    kv_cache::entries(k_cache)[part.slot].narrow(1, part.start, t).copy_(stored(k_1kte[0], k_cache));
    kv_cache::entries(v_cache)[part.slot].narrow(1, part.start, t).copy_(stored(v_1kte[0], v_cache));
  }
  const auto dtype = q_1hte.scalar_type();
  if (part.start == 0) {
    // An e4m3 cache: the keys and values as stored (rounded), as every later read sees them, so
    // that a prompt attends the same keys whether prefilled at once, in chunks or after a prefix.
    const auto as_read = [&](const torch::Tensor& x, const torch::Tensor& cache) {
      return is_fp8(cache) ? loaded(stored(x, cache), cache, dtype) : x;
    };
    return at::scaled_dot_product_attention(q_1hte, as_read(k_1kte, k_cache), as_read(v_1kte, v_cache), {}, 0.0,
                                            /*is_causal=*/true, std::nullopt, /*enable_gqa=*/h != k);
  }
  // Continuing a cached prefix: query i (position start + i) sees keys 0..start + i.
  const int64_t s = part.start + t;
  auto k_1kse = page != nullptr ? gather_blocks(k_cache, page->table_1m, dtype).narrow(2, 0, s)
                                : loaded(k_cache.narrow(0, part.slot, 1).narrow(2, 0, s), k_cache, dtype);
  auto v_1kse = page != nullptr ? gather_blocks(v_cache, page->table_1m, dtype).narrow(2, 0, s)
                                : loaded(v_cache.narrow(0, part.slot, 1).narrow(2, 0, s), v_cache, dtype);
  auto opts = torch::TensorOptions().dtype(torch::kInt64).device(q_1hte.device());
  auto mask_ts = torch::arange(s, opts).view({1, s}) <= (torch::arange(t, opts) + part.start).view({t, 1});
  // Rationale: keys repeated per query head rather than enable_gqa, which the masked
  // memory-efficient CUDA kernel lacks (the fallback materialises [h, t, s] scores).
  if (h != k) {
    k_1kse = k_1kse.repeat_interleave(g, 1);
    v_1kse = v_1kse.repeat_interleave(g, 1);
  }
  return at::scaled_dot_product_attention(q_1hte, k_1kse, v_1kse, mask_ts, 0.0, /*is_causal=*/false);
}

torch::Tensor decoder::attention(int64_t layer, const torch::Tensor& x_btd, const rope_angles& angles,
                                 const cache_use& use) const {
  const auto& w = layers_[static_cast<size_t>(layer)];
  const int64_t b = x_btd.size(0), t = x_btd.size(1), e = config_.head_dim, h = config_.num_attention_heads;
  torch::Tensor out_bhte;
  if (auto q_bh1e = fused_decode_qkv(layer, x_btd, use); q_bh1e.defined()) {
    out_bhte = decode_attention(layer, q_bh1e, use);
  } else {
    auto [q_bhte, k_bkte, v_bkte] = project_qkv(w, x_btd, angles, /*fused=*/true);
    out_bhte = unfused_attention(layer, q_bhte, k_bkte, v_bkte, use);
  }
  return linear_rows(out_bhte.transpose(1, 2).reshape({b, t, h * e}), w.o_w, w.o_b, gemv_rows_of(use));
}

torch::Tensor decoder::fused_decode_qkv(int64_t layer, const torch::Tensor& x_btd, const cache_use& use) const {
  const auto& w = layers_[static_cast<size_t>(layer)];
  if (!fused_kernels_ || !fused_kernels_built() || !x_btd.is_cuda() || use.cache == nullptr || !use.decode ||
      !w.qkv_w.defined() || config_.qk_norm)
    return {};
  auto& k_cache = use.cache->k_nkce[static_cast<size_t>(layer)];
  auto& v_cache = use.cache->v_nkce[static_cast<size_t>(layer)];
  const int64_t b = x_btd.size(0), e = config_.head_dim;
  const int64_t h = config_.num_attention_heads, k = config_.num_key_value_heads;
  auto qkv_bne = linear_rows(x_btd, w.qkv_w, w.qkv_b, gemv_rows_of(use)).view({b, h + 2 * k, e});
  if (!rope_kv_decode_fuses(qkv_bne, k_cache, v_cache, rope_, use.cache->paged)) return {};
  return rope_kv_decode(qkv_bne, use.positions_b, rope_, k_cache, v_cache, h, use.rows_b).view({b, h, 1, e});
}

torch::Tensor decoder::unfused_attention(int64_t layer, const torch::Tensor& q_bhte, const torch::Tensor& k_bkte,
                                         const torch::Tensor& v_bkte, const cache_use& use) const {
  const int64_t b = q_bhte.size(0), e = config_.head_dim;
  const int64_t h = config_.num_attention_heads, k = config_.num_key_value_heads;
  if (use.cache != nullptr && use.decode) {
    // Decode (t == 1): write each slot's key at its position, then attend over its cached keys.
    auto& k_cache = use.cache->k_nkce[static_cast<size_t>(layer)];
    auto& v_cache = use.cache->v_nkce[static_cast<size_t>(layer)];
    if (use.cache->paged) {  // row i's keys to their rows (decode())
      auto rows_x = head_rows(use.rows_b, k, use.cache->slots() * use.cache->capacity());
      kv_cache::entries(k_cache).view({-1, e}).index_copy_(0, rows_x, stored(k_bkte.reshape({b * k, e}), k_cache));
      kv_cache::entries(v_cache).view({-1, e}).index_copy_(0, rows_x, stored(v_bkte.reshape({b * k, e}), v_cache));
    } else {
      auto index_bk1e = use.positions_b.view({b, 1, 1, 1}).expand({b, k, 1, e});
      kv_cache::entries(k_cache).narrow(0, 0, b).scatter_(2, index_bk1e, stored(k_bkte, k_cache));
      kv_cache::entries(v_cache).narrow(0, 0, b).scatter_(2, index_bk1e, stored(v_bkte, v_cache));
    }
    return decode_attention(layer, q_bhte, use);
  }
  if (use.cache != nullptr && use.prefill_rows_kt.defined())
    return packed_flash_prefill(layer, q_bhte, k_bkte, v_bkte, use);
  if (use.cache != nullptr && use.page_rows_t.defined()) return paged_flash_prefill(layer, q_bhte, k_bkte, v_bkte, use);
  if (use.cache != nullptr) {
    // Prefill of packed parts (b == 1): attention per part, the rest of the block over them all.
    std::vector<torch::Tensor> parts_1hte;
    int64_t offset = 0;
    for (size_t i = 0; i < use.parts.size(); ++i) {
      const auto& part = use.parts[i];
      const auto* page = use.part_pages.empty() ? nullptr : &use.part_pages[i];
      parts_1hte.push_back(prefill_attention(layer, q_bhte.narrow(2, offset, part.length),
                                             k_bkte.narrow(2, offset, part.length),
                                             v_bkte.narrow(2, offset, part.length), part, *use.cache, page));
      offset += part.length;
    }
    return parts_1hte.size() == 1 ? parts_1hte.front() : torch::cat(parts_1hte, 2);
  }
  return at::scaled_dot_product_attention(q_bhte, k_bkte, v_bkte, {}, 0.0, /*is_causal=*/true, std::nullopt,
                                          /*enable_gqa=*/h != k);
}

torch::Tensor decoder::decode_attention(int64_t layer, const torch::Tensor& q_bh1e, const cache_use& use) const {
  // GQA without copying keys: the g query heads sharing a key head become g "queries".
  const int64_t b = q_bh1e.size(0), e = config_.head_dim;
  const int64_t h = config_.num_attention_heads, k = config_.num_key_value_heads, g = h / k;
  const auto& k_cache = use.cache->k_nkce[static_cast<size_t>(layer)];
  const auto& v_cache = use.cache->v_nkce[static_cast<size_t>(layer)];
  const int64_t s = use.keys;
  if (use.fp8_kernel)
    return fp8_decode_attention(q_bh1e.reshape({b, h, e}), k_cache, v_cache, use.positions_b, use.keys,
                                use.cache->paged ? use.tables_bm : torch::Tensor{})
        .view({b, h, 1, e});
  auto q_bkge = q_bh1e.reshape({b, k, g, e});
  // flash: one cache sequence per (row, KV head), or per share of one (slots' shares, paged
  // blocks), g queries each.
  if (use.flash_decode) {
    const auto& seqs = use.decode_seqs;
    if (seqs.shares == 1)
      return flash_over_cache(layer, q_bkge.reshape({b * k, g, e}), *use.cache, seqs).view({b, h, 1, e});
    if (seqs.call_shares > 0) return paged_flash_decode(layer, q_bkge.reshape({b * k, g, e}), *use.cache, seqs);
    // Every share of a (row, KV head) asks the same g queries.
    auto q_xge = q_bkge.reshape({b * k, 1, g, e}).expand({b * k, seqs.shares, g, e}).reshape({-1, g, e});
    torch::Tensor lse;
    auto out_xge = flash_over_cache(layer, q_xge, *use.cache, seqs, &lse);
    // flash's varlen forward returns the log-sum-exps as [g, x] (query head, sequence), with or
    // without its swap of a decode's g query heads into one sequence's rows.
    TORCH_CHECK(lse.dim() == 2 && lse.size(0) == g && lse.size(1) == q_xge.size(0) && lse.is_contiguous(),
                "decode: flash returned a log-sum-exp of ", lse.sizes(), " for ", q_xge.size(0), " sequences of ", g,
                " queries");
    return merge_shares(out_xge, lse, seqs.used_k, seqs.shares, fused_kernels_).view({b, h, 1, e});
  }
  // Each row's first s keys and values (an e4m3 cache's in the model's dtype).
  const auto dtype = q_bh1e.scalar_type();
  auto k_bkse = use.cache->paged ? gather_blocks(k_cache, use.tables_bm, dtype).narrow(2, 0, s)
                                 : loaded(k_cache.narrow(0, 0, b).narrow(2, 0, s), k_cache, dtype);
  auto v_bkse = use.cache->paged ? gather_blocks(v_cache, use.tables_bm, dtype).narrow(2, 0, s)
                                 : loaded(v_cache.narrow(0, 0, b).narrow(2, 0, s), v_cache, dtype);
  if (cache_attention_ == cache_attention::matmul) {
    // [b*k, g, s] scores over the merged (row, KV head) batch; keys stay in place (strided).
    auto q_xge = q_bkge.reshape({b * k, g, e});
    auto k_xse = k_bkse.reshape({b * k, s, e});
    auto v_xse = v_bkse.reshape({b * k, s, e});
    // fp32 scores from bf16/fp16 operands: cuBLAS's fp32 output on CUDA; elsewhere upcast.
    auto scores_xgs = q_xge.scalar_type() == torch::kFloat32 ? at::bmm(q_xge, k_xse.transpose(1, 2))
                      : q_xge.is_cuda()                      ? at::bmm(q_xge, k_xse.transpose(1, 2), torch::kFloat32)
                                        : at::bmm(q_xge.to(torch::kFloat32), k_xse.transpose(1, 2).to(torch::kFloat32));
    auto scores_bkgs = scores_xgs.view({b, k, g, s}).mul_(1.0 / std::sqrt(static_cast<double>(e)));
    scores_bkgs.masked_fill_(use.mask_b11s.logical_not(), -std::numeric_limits<float>::infinity());
    auto probs_xgs = torch::softmax(scores_bkgs, -1).to(v_xse.scalar_type()).view({b * k, g, s});
    return at::bmm(probs_xgs, v_xse).view({b, h, 1, e});
  }
  return at::scaled_dot_product_attention(q_bkge, k_bkse, v_bkse, use.mask_b11s).reshape({b, h, 1, e});
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
  // Each residual add is fused with the norm that follows it: the post-attention norm, the next
  // block's input norm, and after the last block the final norm (add_rms_norm).
  const bool fused = fused_kernels_;
  const int64_t n = config_.num_hidden_layers;
  auto [residual_btd, normed_btd] =
      add_rms_norm(x_btd, {}, n > 0 ? layers_.front().input_norm_d : params_.at("model.norm.weight"), eps, fused);
  for (int64_t i = 0; i < n; ++i) {
    const auto& w = layers_[static_cast<size_t>(i)];
    std::tie(residual_btd, normed_btd) =
        add_rms_norm(residual_btd, attention(i, normed_btd, angles, use), w.post_norm_d, eps, fused);
    const int64_t gemv = gemv_rows_of(use);
    auto mlp_btd = w.gate_up_w.defined()
                       ? linear_rows(silu_mul(linear_rows(normed_btd, w.gate_up_w, w.gate_up_b, gemv), fused), w.down_w,
                                     w.down_b, gemv)
                       : swiglu(normed_btd, w.gate_w, w.gate_b, w.up_w, w.up_b, w.down_w, w.down_b);
    const auto& next_norm_d =
        i + 1 < n ? layers_[static_cast<size_t>(i + 1)].input_norm_d : params_.at("model.norm.weight");
    std::tie(residual_btd, normed_btd) = add_rms_norm(residual_btd, mlp_btd, next_norm_d, eps, fused);
  }
  return normed_btd;
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

torch::Tensor decoder::prefill(const torch::Tensor& tokens_t, int64_t slot, kv_cache& cache, int64_t start) const {
  return prefill(tokens_t, {prefill_part{slot, start, tokens_t.size(0)}}, cache)[0];
}

decoder::packed_flash_layout decoder::describe_packed_flash(const std::vector<prefill_part>& parts, int64_t kv_heads,
                                                            int64_t capacity, int64_t slots, bool paged) {
  const int64_t p = static_cast<int64_t>(parts.size()), k = kv_heads, c = capacity;
  TORCH_CHECK(slots * k * c <= std::numeric_limits<int32_t>::max(), "prefill: a cache of ", slots * k * c,
              " rows exceeds flash's int32 offsets");
  int64_t t = 0;
  for (const auto& part : parts) {
    t += part.length;
    TORCH_CHECK(!paged || (!part.blocks.empty() && one_run(part.blocks, c, part.start + part.length)),
                "prefill: a part's blocks are not one run");
  }
  // Where head j of part i's keys start in the flat cache: slots [slots, k, c, e] at its slot's
  // head j; paged [k, blocks, c, e] at head j's copy of the part's first block.
  const auto base = [&](const prefill_part& part, int64_t j) {
    return paged ? j * slots * c + part.blocks.front() * c : (part.slot * k + j) * c;
  };
  packed_flash_layout out;
  out.seqs.assign(static_cast<size_t>(3 * p * k + 2), 0);
  out.rows.reserve(static_cast<size_t>(k * t));
  int32_t* cu_q = out.seqs.data();
  int32_t* cu_k = cu_q + p * k + 1;
  int32_t* used = cu_k + p * k + 1;
  for (int64_t j = 0; j < k; ++j) {
    int64_t offset = 0;
    for (int64_t i = 0; i < p; ++i) {
      const auto& part = parts[static_cast<size_t>(i)];
      const int64_t x = j * p + i;
      cu_q[x] = static_cast<int32_t>(j * t + offset);
      cu_k[x] = static_cast<int32_t>(base(part, j));
      used[x] = static_cast<int32_t>(part.start + part.length);
      for (int64_t q = 0; q < part.length; ++q) out.rows.push_back(base(part, j) + part.start + q);
      offset += part.length;
      out.max_q = std::max(out.max_q, part.length);
      out.max_k = std::max(out.max_k, part.start + part.length);
    }
  }
  cu_q[p * k] = static_cast<int32_t>(k * t);
  cu_k[p * k] = static_cast<int32_t>(slots * k * c);  // unread: seqused_k gives every length
  return out;
}

torch::Tensor decoder::prefill(const torch::Tensor& tokens_t, const std::vector<prefill_part>& parts,
                               kv_cache& cache) const {
  const int64_t t = tokens_t.size(0);
  std::vector<int64_t> positions, last;
  positions.reserve(static_cast<size_t>(t));
  cache_use use;
  use.cache = &cache;
  use.parts = parts;
  const int64_t k = config_.num_key_value_heads;
  // Paged flash reads the keys in place when every part's blocks are one run (the engine places
  // sequences so); otherwise it gathers each part's keys (paged_flash_prefill), as it does from an
  // e4m3 cache in either layout (flash takes no float8: the gather reads them back in the model's
  // dtype).
  const bool flash = cache_attention_ == cache_attention::flash;
  const bool paged_gather =
      flash && (cache.fp8() || (cache.paged && !std::ranges::all_of(parts, [&](const prefill_part& part) {
                                  return !part.blocks.empty() &&
                                         one_run(part.blocks, cache.capacity(), part.start + part.length);
                                })));
  // Paged flash, gathering: each new token's flat row, every part's keys' rows, and the int32 offsets of the
  // parts' queries and gathered keys, end to end (cu_q [parts + 1], then cu_k [parts + 1]).
  std::vector<int64_t> page_rows, page_keys;
  std::vector<int32_t> page_offsets(paged_gather ? 2 * (parts.size() + 1) : 0, 0);
  for (const auto& part : parts) {
    const int64_t room = cache.paged ? static_cast<int64_t>(part.blocks.size()) * cache.capacity() : cache.capacity();
    TORCH_CHECK(part.length > 0 && part.start >= 0 && part.start + part.length <= room, "prefill: positions ",
                part.start, "..", part.start + part.length - 1, " exceed the ", (cache.paged ? "blocks'" : "slot's"),
                " capacity of ", room, " tokens");
    for (int64_t i = 0; i < part.length; ++i) positions.push_back(part.start + i);
    last.push_back(static_cast<int64_t>(positions.size()) - 1);
    if (paged_gather) {
      const int64_t block = cache.capacity(), end = part.start + part.length;
      // Position p's rows of the flat cache, one per KV head: paged [k * blocks * block size, e]
      // (a KV head's rows blocks x block size apart); slots [slots * k * capacity, e] (capacity apart).
      const int64_t head = cache.paged ? cache.slots() * block : block;
      const auto rows = [&](std::vector<int64_t>& out, int64_t p) {
        const int64_t first =
            cache.paged ? part.blocks[static_cast<size_t>(p / block)] * block + p % block : part.slot * k * block + p;
        for (int64_t j = 0; j < k; ++j) out.push_back(first + j * head);
      };
      const size_t i = last.size() - 1, n = parts.size() + 1;  // this part's index; its tokens are counted
      page_offsets[i] = static_cast<int32_t>(positions.size() - static_cast<size_t>(part.length));
      page_offsets[n + i] = static_cast<int32_t>(page_keys.size() / static_cast<size_t>(k));
      for (int64_t p = 0; p < end; ++p) rows(page_keys, p);
      for (int64_t p = part.start; p < end; ++p) rows(page_rows, p);
      use.prefill_seqs.max_q = std::max(use.prefill_seqs.max_q, part.length);
      use.prefill_seqs.max_k = std::max(use.prefill_seqs.max_k, end);
    } else if (cache.paged && !flash) {
      const int64_t block = cache.capacity(), end = part.start + part.length;
      std::vector<int64_t> blocks, offsets;
      for (int64_t p = part.start; p < end; ++p) {
        blocks.push_back(part.blocks[static_cast<size_t>(p / block)]);
        offsets.push_back(p % block);
      }
      const auto used = static_cast<size_t>((end + block - 1) / block);
      auto on_device = [&](const std::vector<int64_t>& v) { return to_device(v, tokens_t.device()); };
      use.part_pages.push_back(
          {on_device(blocks), on_device(offsets),
           on_device(std::vector<int64_t>(part.blocks.begin(), part.blocks.begin() + used)).view({1, -1})});
    }
  }
  TORCH_CHECK(static_cast<int64_t>(positions.size()) == t, "prefill: the parts hold ", positions.size(),
              " tokens, tokens_t ", t);
  if (paged_gather) {
    const auto n = static_cast<int64_t>(parts.size()) + 1;
    const auto keys = static_cast<int64_t>(page_keys.size()) / k;
    TORCH_CHECK(keys <= std::numeric_limits<int32_t>::max(), "prefill: ", keys, " keys exceed flash's int32 offsets");
    page_offsets[static_cast<size_t>(n - 1)] = static_cast<int32_t>(t);
    page_offsets[static_cast<size_t>(2 * n - 1)] = static_cast<int32_t>(keys);
    auto offsets_d = to_device(page_offsets, tokens_t.device());
    use.prefill_seqs.cu_q = offsets_d.narrow(0, 0, n);
    use.prefill_seqs.cu_k = offsets_d.narrow(0, n, n);
    use.page_rows_t = to_device(page_rows, tokens_t.device());
    use.page_keys_s = to_device(page_keys, tokens_t.device());
  } else if (flash) {
    // One host-to-device copy for the int32 offsets, one for the int64 rows the new keys go to.
    const auto layout = describe_packed_flash(parts, k, cache.capacity(), cache.slots(), cache.paged);
    const int64_t x = static_cast<int64_t>(parts.size()) * k;
    auto seqs_d = to_device(layout.seqs, tokens_t.device());
    auto& described = use.prefill_seqs;
    described.cu_q = seqs_d.narrow(0, 0, x + 1);
    described.cu_k = seqs_d.narrow(0, x + 1, x + 1);
    described.used_k = seqs_d.narrow(0, 2 * (x + 1), x);
    described.max_q = layout.max_q;
    described.max_k = layout.max_k;
    use.prefill_rows_kt = to_device(layout.rows, tokens_t.device());
  }
  auto positions_1t = to_device(positions, tokens_t.device()).unsqueeze(0);
  auto x_1td = torch::embedding(params_.at("model.embed_tokens.weight"), tokens_t.unsqueeze(0));
  auto hidden_1td = run_layers(x_1td, positions_1t, use);
  auto last_t = to_device(last, tokens_t.device());
  return lm_head(hidden_1td[0].index_select(0, last_t), /*to_float=*/false);
}

decoder::paged_decode_layout decoder::describe_paged_decode(const torch::Tensor& positions_b,
                                                            const torch::Tensor& runs_br3, int64_t kv_heads,
                                                            int64_t blocks, int64_t block_size, int64_t keys,
                                                            int64_t cut, int64_t split_sequences) {
  // Sequence (l, c, i, j): share c of run l of row i's blocks in KV head j (consecutive blocks are
  // consecutive rows of a head): the run's keys below position_i + 1 cut into `cut` consecutive
  // shares (the last shorter; a run of no blocks has none).
  const int64_t b = runs_br3.size(0), r = runs_br3.size(1), k = kv_heads, bs = block_size;
  TORCH_CHECK(cut >= 1, "describe_paged_decode: cut must be >= 1, got ", cut);
  const auto& o = positions_b.options();
  auto first_r1b1 = runs_br3.select(2, 0).t().reshape({r, 1, b, 1});
  auto start_r1b1 = runs_br3.select(2, 1).t().reshape({r, 1, b, 1});
  auto used_r1b1 = torch::minimum((positions_b + 1).view({1, 1, b, 1}) - start_r1b1,
                                  runs_br3.select(2, 2).t().reshape({r, 1, b, 1}) * bs)
                       .clamp(0);
  auto len_r1b1 = (used_r1b1 + cut - 1).div(cut, "floor");
  auto offset_rcb1 = len_r1b1 * torch::arange(cut, o).view({1, cut, 1, 1});
  auto head_111k = (torch::arange(k, o) * (blocks * bs)).view({1, 1, 1, k});
  const int64_t x = r * cut * b * k, y = b * k;
  paged_decode_layout out;
  out.shares = r * cut;
  out.max_k = (keys + cut - 1) / cut;
  out.call_shares =
      split_sequences > 0 && y <= split_sequences ? std::max<int64_t>(1, split_sequences / y) : out.shares;
  out.call_shares = std::min(out.call_shares, out.shares);
  out.cu_q = torch::arange(x + 1, o.dtype(torch::kInt32));
  out.cu_k =
      torch::cat({(first_r1b1 * bs + head_111k + offset_rcb1).reshape({x}), torch::zeros({1}, o)}).to(torch::kInt32);
  out.used_k =
      torch::minimum(used_r1b1 - offset_rcb1, len_r1b1).clamp(0).expand({r, cut, b, k}).reshape({x}).to(torch::kInt32);
  return out;
}

torch::Tensor decoder::decode(const torch::Tensor& tokens_b, const torch::Tensor& positions_b, int64_t keys_s,
                              kv_cache& cache, const torch::Tensor& block_tables_bm,
                              const torch::Tensor& runs_br3) const {
  const int64_t b = tokens_b.size(0);
  cache_use use;
  use.cache = &cache;
  use.decode = true;
  use.positions_b = positions_b;
  use.keys = keys_s;
  // An e4m3 cache: the fp8 kernel where it runs, else its keys read back for sdpa or matmul
  // (flash takes no float8).
  use.fp8_kernel = cache.fp8() && fused_kernels_ &&
                   fp8_decode_attention_fuses(cache.k_nkce.front(), dtype_, config_.num_attention_heads, cache.paged);
  use.flash_decode = cache_attention_ == cache_attention::flash && !cache.fp8();
  if (cache.paged) {
    const int64_t bs = cache.capacity();
    TORCH_CHECK(block_tables_bm.defined() && block_tables_bm.dim() == 2 && block_tables_bm.size(0) == b &&
                    block_tables_bm.size(1) * bs >= keys_s && block_tables_bm.scalar_type() == torch::kInt64,
                "decode: a paged KV cache needs int64 block tables [", b, ", m] covering ", keys_s, " keys");
    use.tables_bm = block_tables_bm;
    // Row i's new key: block table[i][p / block size] at offset p % block size, as the row of
    // its KV head 0 in the flat cache [k * blocks * block size, e] (head j's: + j x blocks x
    // block size).
    use.rows_b =
        block_tables_bm.gather(1, positions_b.div(bs, "floor").view({b, 1})).view({b}) * bs + positions_b.remainder(bs);
    if (use.flash_decode) {
      TORCH_CHECK(runs_br3.defined() && runs_br3.dim() == 3 && runs_br3.size(0) == b && runs_br3.size(2) == 3 &&
                      runs_br3.scalar_type() == torch::kInt64,
                  "decode: flash over a paged KV cache needs int64 block runs [", b, ", r, 3]");
      // Few long rows: each run cut into shares as the slots' rows are (flash_decode_shares_).
      const int64_t k = config_.num_key_value_heads;
      const int64_t cut =
          flash_decode_shares_ > 0 && b * k <= flash_decode_shares_ / 2 && keys_s >= flash_share_min_keys
              ? flash_decode_shares_ / (b * k)
              : 1;
      auto layout = describe_paged_decode(positions_b, runs_br3, k, cache.slots(), bs, keys_s, cut,
                                          flash_split_sequences(cuda_multiprocessors()));
      auto& seqs = use.decode_seqs;
      seqs.cu_q = layout.cu_q;
      seqs.cu_k = layout.cu_k;
      seqs.used_k = layout.used_k;
      seqs.shares = layout.shares;
      seqs.call_shares = layout.call_shares;
      seqs.max_k = layout.max_k;
    }
  }
  if (use.flash_decode && !cache.paged) {
    // One cache sequence per (row, KV head): row i's slot is i, its used keys 0..positions_b[i].
    const int64_t k = config_.num_key_value_heads;
    auto opts = positions_b.options().dtype(torch::kInt32);
    auto& seqs = use.decode_seqs;
    seqs.cu_q = torch::arange(b * k + 1, opts);
    seqs.cu_k = seqs.cu_q * static_cast<int32_t>(cache.capacity());
    // Rows that decode a dummy token at the cache's unused last position (the engine's idle slots,
    // decode_graphs' padding rows) read one key, not the whole slot.
    auto used_b = (positions_b + 1).masked_fill(positions_b == cache.capacity() - 1, 1);
    seqs.used_k = used_b.view({b, 1}).expand({b, k}).reshape({b * k}).to(torch::kInt32);
    seqs.max_k = keys_s;
    // Few long rows: flash splits each (row, KV head) over up to 128 thread blocks itself, and
    // its combine kernel then runs a block per 8 query rows, 27 us a layer at one row of 131k keys
    // on the H200 (bench/results/2026-12-04-policy-h200-half-logits.md). Cut into shares that
    // make about flash_decode_shares_ sequences, each is split fewer ways, the combine runs more
    // blocks, and merge_shares joins the shares by log-sum-exp.
    if (flash_decode_shares_ > 0 && b * k <= flash_decode_shares_ / 2 && keys_s >= flash_share_min_keys) {
      const int64_t shares = flash_decode_shares_ / (b * k);
      auto len_b = (used_b + shares - 1).div(shares, "floor");  // keys a share, the last one shorter
      auto share_1s = torch::arange(shares, positions_b.options()).view({1, 1, shares});
      auto start_bks = len_b.view({b, 1, 1}) * share_1s;
      auto base_bk1 = (torch::arange(b * k, positions_b.options()) * cache.capacity()).view({b, k, 1});
      seqs.shares = shares;
      seqs.cu_q = torch::arange(b * k * shares + 1, opts);
      seqs.cu_k =
          torch::cat({(base_bk1 + start_bks).reshape({b * k * shares}), torch::zeros({1}, positions_b.options())})
              .to(torch::kInt32);
      seqs.used_k = (used_b.view({b, 1, 1}) - start_bks)
                        .clamp(0)
                        .minimum(len_b.view({b, 1, 1}))
                        .expand({b, k, shares})
                        .reshape({b * k * shares})
                        .to(torch::kInt32);
      seqs.max_k = (keys_s + shares - 1) / shares;
    }
  } else if (!use.fp8_kernel && !use.flash_decode) {
    auto keys_11s = torch::arange(keys_s, positions_b.options()).view({1, 1, 1, keys_s});
    use.mask_b11s = keys_11s <= positions_b.view({b, 1, 1, 1});
  }
  auto x_b1d = torch::embedding(params_.at("model.embed_tokens.weight"), tokens_b.view({b, 1}));
  auto hidden_b1d = run_layers(x_b1d, positions_b.view({b, 1}), use);
  return lm_head(hidden_b1d.squeeze(1), /*to_float=*/false);
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
