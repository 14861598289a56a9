// decoder_flash: flash attention over the KV cache in place (slots and paged runs): the sequence
// layouts of prefills and decode steps, and the calls. Shape legend: see decoder.hpp. g: query
// heads per key/value head.
#include "policy/model/decoder.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>

#include <ATen/ATen.h>
#include <c10/util/Exception.h>

#include <tuple>

#include "policy/model/fused_ops.hpp"
#include "policy/model/host_copy.hpp"
#include "policy/model/kv_cache_io.hpp"

namespace caf_agent::policy {

using kv_io::loaded;
using kv_io::one_run;
using kv_io::stored;

namespace {

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

torch::Tensor decoder::gathered_flash_prefill(int64_t layer, const torch::Tensor& q_1hte, const torch::Tensor& k_1kte,
                                              const torch::Tensor& v_1kte, const cache_use& use) const {
  const int64_t e = config_.head_dim, k = config_.num_key_value_heads;
  const auto& k_cache = use.cache->k_nkce[static_cast<size_t>(layer)];
  const auto& v_cache = use.cache->v_nkce[static_cast<size_t>(layer)];
  auto k_rows = kv_cache::entries(k_cache).view({-1, e});
  auto v_rows = kv_cache::entries(v_cache).view({-1, e});
  // Rows token-major ([T * k], [S * k]): keys [T, k, e] in, [S, k, e] out (an e4m3 cache's read
  // back into the model's dtype).
  k_rows.index_copy_(0, use.gather_rows_t, stored(k_1kte[0].transpose(0, 1).reshape({-1, e}), k_cache));
  v_rows.index_copy_(0, use.gather_rows_t, stored(v_1kte[0].transpose(0, 1).reshape({-1, e}), v_cache));
  const auto& seqs = use.prefill_seqs;
  const auto dtype = q_1hte.scalar_type();
  return flash_varlen(q_1hte[0].transpose(0, 1),
                      loaded(k_rows.index_select(0, use.gather_keys_s), k_cache, dtype).view({-1, k, e}),
                      loaded(v_rows.index_select(0, use.gather_keys_s), v_cache, dtype).view({-1, k, e}), seqs.cu_q,
                      seqs.cu_k, {}, seqs.max_q, seqs.max_k, nullptr)
      .transpose(0, 1)
      .unsqueeze(0);
}

decoder::gather_layout decoder::describe_gather(const std::vector<prefill_part>& parts, int64_t kv_heads,
                                                int64_t capacity, int64_t slots, bool paged, torch::Device device) {
  const auto p = static_cast<int64_t>(parts.size());
  // Row of position q of head 0: table[q / c] * c + q % c; head j's is j * stride further. Slots:
  // one "block" a part, its slot's first row over c (s * k); paged: its block table.
  const int64_t c = capacity, stride = paged ? slots * c : c;
  // One host buffer: starts [p], ends [p], table offsets [p], then the tables end to end.
  std::vector<int64_t> host(static_cast<size_t>(3 * p));
  int64_t tokens = 0, keys = 0;
  for (int64_t i = 0; i < p; ++i) {
    const auto& part = parts[static_cast<size_t>(i)];
    host[static_cast<size_t>(i)] = part.start;
    host[static_cast<size_t>(p + i)] = part.start + part.length;
    host[static_cast<size_t>(2 * p + i)] = static_cast<int64_t>(host.size()) - 3 * p;
    if (paged) {
      const auto used = static_cast<size_t>((part.start + part.length + c - 1) / c);
      TORCH_CHECK(used <= part.blocks.size(), "prefill: a part's ", part.blocks.size(), " blocks hold fewer than ",
                  part.start + part.length, " positions");
      host.insert(host.end(), part.blocks.begin(), part.blocks.begin() + static_cast<std::ptrdiff_t>(used));
    } else {
      host.push_back(part.slot * kv_heads);
    }
    tokens += part.length;
    keys += part.start + part.length;
  }
  auto all = to_device(host, device);
  auto starts = all.narrow(0, 0, p), ends = all.narrow(0, p, p), table_at = all.narrow(0, 2 * p, p);
  auto table = all.narrow(0, 3 * p, all.size(0) - 3 * p);
  const auto opts = all.options();
  const auto heads = torch::arange(kv_heads, opts).mul_(stride).unsqueeze(0);
  // Positions first_i..end_i-1 of every part, end to end, as their rows (token-major).
  const auto rows = [&](const torch::Tensor& firsts, int64_t total) {
    auto counts = ends - firsts;
    auto part_of = torch::repeat_interleave(counts, std::optional<int64_t>(total));  // no sync: the size is known
    auto position = torch::arange(total, opts) - (counts.cumsum(0) - counts).index_select(0, part_of) +
                    firsts.index_select(0, part_of);
    auto block = table.index_select(0, table_at.index_select(0, part_of) + position.div(c, "floor"));
    return (block.mul(c).add_(position.remainder(c)).unsqueeze(1) + heads).reshape({-1});
  };
  return {rows(starts, tokens), rows(torch::zeros_like(starts), keys)};
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

}  // namespace caf_agent::policy
