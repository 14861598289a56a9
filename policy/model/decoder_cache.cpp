// decoder_cache: the KV cache and the decoder's passes over it (prefill parts, decode steps):
// writing keys, reading them for sdpa and matmul, and which attention a step runs. Flash over the
// cache: decoder_flash.cpp. Shape legend: see decoder.hpp. g: query heads per key/value head.
#include "policy/model/decoder.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include <ATen/ATen.h>
#include <c10/util/Exception.h>

#include "policy/model/fused_ops.hpp"
#include "policy/model/host_copy.hpp"
#include "policy/model/kv_cache_io.hpp"

namespace caf_agent::policy {

using kv_io::is_fp8;
using kv_io::loaded;
using kv_io::one_run;
using kv_io::stored;

namespace {

// A decode step's flash cut into shares (decode(), set_flash_decode_shares) only over at least
// this many keys.
constexpr int64_t flash_share_min_keys = 8192;

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

}  // namespace

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

std::pair<torch::Tensor, torch::Tensor> decoder::fused_decode_qkv(int64_t layer, const torch::Tensor& residual_btd,
                                                                  const torch::Tensor& delta_btd,
                                                                  const cache_use& use) const {
  const auto& w = layers_[static_cast<size_t>(layer)];
  if (!fused_kernels_ || !fused_kernels_built() || !residual_btd.is_cuda() || use.cache == nullptr || !use.decode ||
      !w.qkv_w.defined() || config_.qk_norm)
    return {};
  auto& k_cache = use.cache->k_nkce[static_cast<size_t>(layer)];
  auto& v_cache = use.cache->v_nkce[static_cast<size_t>(layer)];
  const int64_t b = residual_btd.size(0), e = config_.head_dim;
  const int64_t h = config_.num_attention_heads, k = config_.num_key_value_heads;
  // Rows the GEMV takes: norm, projection, RoPE and the KV write in one kernel.
  if (add_rms_norm_qkv_rope_kv_fuses(residual_btd, delta_btd, w.input_norm_d, w.qkv_w, w.qkv_b, gemv_rows_of(use),
                                     k_cache, v_cache, rope_, h, use.cache->paged)) {
    auto [sum_btd, q_bhe] =
        add_rms_norm_qkv_rope_kv(residual_btd, delta_btd, w.input_norm_d, config_.rms_norm_eps, w.qkv_w, w.qkv_b,
                                 gemv_rows_of(use), use.positions_b, rope_, k_cache, v_cache, h, use.rows_b);
    return {sum_btd, q_bhe.view({b, h, 1, e})};
  }
  auto [sum_btd, qkv_btn] = add_rms_norm_linear(residual_btd, delta_btd, w.input_norm_d, config_.rms_norm_eps, w.qkv_w,
                                                w.qkv_b, gemv_rows_of(use), /*fused=*/true,
                                                /*silu_mul_after=*/false, mma_rows_of(use));
  auto qkv_bne = qkv_btn.view({b, h + 2 * k, e});
  if (!rope_kv_decode_fuses(qkv_bne, k_cache, v_cache, rope_, use.cache->paged)) return {};
  return {sum_btd, rope_kv_decode(qkv_bne, use.positions_b, rope_, k_cache, v_cache, h, use.rows_b).view({b, h, 1, e})};
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
  if (use.cache != nullptr && use.gather_rows_t.defined())
    return gathered_flash_prefill(layer, q_bhte, k_bkte, v_bkte, use);
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

torch::Tensor decoder::prefill(const torch::Tensor& tokens_t, int64_t slot, kv_cache& cache, int64_t start) const {
  return prefill(tokens_t, {prefill_part{slot, start, tokens_t.size(0)}}, cache)[0];
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
  // sequences so); otherwise it gathers each part's keys (gathered_flash_prefill), as it does from an
  // e4m3 cache in either layout (flash takes no float8: the gather reads them back in the model's
  // dtype).
  const bool flash = cache_attention_ == cache_attention::flash;
  const bool gathering =
      flash && (cache.fp8() || (cache.paged && !std::ranges::all_of(parts, [&](const prefill_part& part) {
                                  return !part.blocks.empty() &&
                                         one_run(part.blocks, cache.capacity(), part.start + part.length);
                                })));
  // Flash, gathering: the int32 offsets of the parts' queries and gathered keys, end to end (cu_q
  // [parts + 1], then cu_k [parts + 1]); the rows themselves from describe_gather.
  int64_t gathered_keys = 0;
  std::vector<int32_t> gather_offsets(gathering ? 2 * (parts.size() + 1) : 0, 0);
  for (const auto& part : parts) {
    const int64_t room = cache.paged ? static_cast<int64_t>(part.blocks.size()) * cache.capacity() : cache.capacity();
    TORCH_CHECK(part.length > 0 && part.start >= 0 && part.start + part.length <= room, "prefill: positions ",
                part.start, "..", part.start + part.length - 1, " exceed the ", (cache.paged ? "blocks'" : "slot's"),
                " capacity of ", room, " tokens");
    for (int64_t i = 0; i < part.length; ++i) positions.push_back(part.start + i);
    last.push_back(static_cast<int64_t>(positions.size()) - 1);
    if (gathering) {
      const int64_t end = part.start + part.length;
      const size_t i = last.size() - 1, n = parts.size() + 1;  // this part's index; its tokens are counted
      gather_offsets[i] = static_cast<int32_t>(positions.size() - static_cast<size_t>(part.length));
      gather_offsets[n + i] =
          static_cast<int32_t>(std::min<int64_t>(gathered_keys, std::numeric_limits<int32_t>::max()));
      gathered_keys += end;
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
  if (gathering) {
    const auto n = static_cast<int64_t>(parts.size()) + 1;
    const int64_t keys = gathered_keys;
    TORCH_CHECK(keys <= std::numeric_limits<int32_t>::max(), "prefill: ", keys, " keys exceed flash's int32 offsets");
    gather_offsets[static_cast<size_t>(n - 1)] = static_cast<int32_t>(t);
    gather_offsets[static_cast<size_t>(2 * n - 1)] = static_cast<int32_t>(keys);
    auto offsets_d = to_device(gather_offsets, tokens_t.device());
    use.prefill_seqs.cu_q = offsets_d.narrow(0, 0, n);
    use.prefill_seqs.cu_k = offsets_d.narrow(0, n, n);
    auto layout = describe_gather(parts, k, cache.capacity(), cache.slots(), cache.paged, tokens_t.device());
    use.gather_rows_t = std::move(layout.rows_t);
    use.gather_keys_s = std::move(layout.keys_s);
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

bool decoder::fp8_decode_kernel(const kv_cache& cache) const {
  return cache.fp8() && cache_attention_ == cache_attention::flash && fused_kernels_ &&
         fp8_decode_attention_fuses(cache.k_nkce.front(), dtype_, config_.num_attention_heads, cache.paged);
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
  // An e4m3 cache: in flash mode the fp8 kernel where it runs, else its keys read back for sdpa or
  // matmul (flash takes no float8).
  use.fp8_kernel = fp8_decode_kernel(cache);
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

}  // namespace caf_agent::policy
