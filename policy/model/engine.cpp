// Shape legend: b decode rows (slots 0..b-1), r sampled rows (running + admitted), v vocab.
#include "policy/model/engine.hpp"
#include "policy/model/weight_exchange.hpp"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>
#include <torch/cuda.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <deque>
#include <limits>
#include <mutex>
#include <random>
#include <utility>

#include "policy/model/engine_impl.hpp"
#include "policy/model/fused_ops.hpp"
#include "policy/model/host_copy.hpp"
#include "policy/model/sampling.hpp"

namespace caf_agent::policy {

const char* finish_reason_name(finish_reason reason) {
  switch (reason) {
    case finish_reason::stop_token:
      return "stop_token";
    case finish_reason::stop_string:
      return "stop_string";
    case finish_reason::max_new_tokens:
      return "max_new_tokens";
    case finish_reason::context_limit:
      return "context_limit";
    case finish_reason::aborted:
      return "aborted";
  }
  return "unknown";
}

status engine_options::validate() const {
  if (model_dir.empty()) return fail("engine: model_dir is empty");
  if (max_batch < 1) return fail("engine: max_batch must be >= 1");
  if (max_context < 0) return fail("engine: max_context must be >= 0 (0: from config.json)");
  if (max_waiting < 0) return fail("engine: max_waiting must be >= 0");
  if (prefill_chunk < 0) return fail("engine: prefill_chunk must be >= 0 (0: whole prompts)");
  if (prefill_wait_steps < 0) return fail("engine: prefill_wait_steps must be >= 0 (0: no wait)");
  if (kv_block_size < 1) return fail("engine: kv_block_size must be >= 1");
  if (kv_cache_dtype == kv_cache_dtype_kind::fp8_e4m3 && dtype == model_dtype::float32)
    return fail(
        "engine: kv_cache_dtype 'fp8_e4m3' needs dtype bfloat16 or float16 (the model's keys are rounded to "
        "e4m3 from them)");
  if (kv_cache_tokens < 0)
    return fail("engine: kv_cache_tokens must be >= 0 (0: max_batch x max_context in whole blocks)");
  if (kv_layout == kv_layout_kind::slots && kv_cache_tokens != 0)
    return fail("engine: kv_cache_tokens applies to kv_layout 'paged' only (slots hold max_batch x max_context)");
  return {};
}

using engine_detail::kept_prefix;
using engine_detail::seconds_since;
using engine_detail::sequence;
using engine_detail::slot_choice;

namespace {

int64_t common_prefix(const std::vector<int32_t>& a, const std::vector<int32_t>& b) {
  const size_t n = std::min(a.size(), b.size());
  size_t i = 0;
  while (i < n && a[i] == b[i]) ++i;
  return static_cast<int64_t>(i);
}

// The cache attention of `options` on this device; "auto" takes flash where it applies.
// `blocks`: the paged cache's blocks (scratch included).
result<cache_attention> choose_cache_attention(const engine_options& options, torch::Device device,
                                               const model_config& config, int64_t context, int64_t blocks) {
  if (options.cache_attention == cache_attention_choice::sdpa) return cache_attention::sdpa;
  if (options.cache_attention == cache_attention_choice::matmul) return cache_attention::matmul;
  const bool paged = options.kv_layout == kv_layout_kind::paged;
  std::string why_not;
  if (!device.is_cuda())
    why_not = "needs a CUDA device";
  else if (options.dtype == model_dtype::float32)
    why_not = "needs bfloat16 or float16";
  // Rationale: the kernel's sequence offsets into the flat cache are int32.
  else if (!paged && static_cast<int64_t>(options.max_batch) * config.num_key_value_heads * context >
                         std::numeric_limits<int32_t>::max())
    why_not = "addresses the cache with int32 offsets (max_batch x KV heads x max_context < 2^31)";
  else if (paged && blocks * options.kv_block_size > std::numeric_limits<int32_t>::max())
    why_not = "addresses the cache with int32 offsets (blocks x kv_block_size < 2^31)";
  if (why_not.empty()) return cache_attention::flash;
  if (options.cache_attention == cache_attention_choice::automatic) return cache_attention::sdpa;
  return fail("engine: cache_attention 'flash' " + why_not + " (device " + options.device + ", dtype " +
              to_string(options.dtype) + ")");
}

}  // namespace

generation_engine::generation_engine(std::unique_ptr<impl> impl) : impl_(std::move(impl)) {}
generation_engine::~generation_engine() = default;

result<std::unique_ptr<generation_engine>> generation_engine::open(const engine_options& options) {
  if (auto valid = options.validate(); !valid) return valid.error();
  auto state = std::make_unique<impl>();
  state->options = options;
  try {
    const torch::Device device(options.device);
    if (device.is_cuda() && !torch::cuda::is_available())
      return fail("engine: device " + options.device + " requested but CUDA is not available");
    auto model = decoder::load(options.model_dir, device, scalar_type_of(options.dtype));
    if (!model) return model.error();
    state->model = std::move(model.value());
    state->model.fuse_projections();  // one GEMM for q/k/v and one for gate/up per block
    const auto& config = state->model.config();
    state->context =
        options.max_context > 0 ? options.max_context : std::min<int64_t>(config.max_position_embeddings, 4096);
    if (state->context > config.max_position_embeddings)
      return fail("engine: max_context " + std::to_string(state->context) + " exceeds the model's " +
                  "max_position_embeddings " + std::to_string(config.max_position_embeddings));
    // Paged: by default every seat can hold a max_context sequence in whole blocks. Rationale:
    // without the rounding per seat, 64 x 552 tokens made 138 blocks of 256 where 64 sequences of
    // 544 need 192: the H200's 64 x 512 bench preempted 18 times and ran at 4,341 tok/s against
    // the slots' 22,773 (bench/results/2026-12-02-h200.md).
    const int64_t bs = options.kv_block_size;
    const int64_t blocks = options.kv_cache_tokens > 0 ? (options.kv_cache_tokens + bs - 1) / bs
                                                       : options.max_batch * ((state->context + bs - 1) / bs);
    auto mode = choose_cache_attention(options, device, config, state->context, blocks + 1);
    if (!mode) return mode.error();
    state->model.set_cache_attention(mode.value());
    state->model.set_fused_kernels(options.fused_kernels);
    if (options.flash_decode_shares < 0)
      return fail("engine: flash_decode_shares must be >= 0, got " + std::to_string(options.flash_decode_shares));
    state->model.set_flash_decode_shares(options.flash_decode_shares);
    if (options.decode_gemv_rows < 0 || options.decode_gemv_rows > 8)
      return fail("engine: decode_gemv_rows must be in 0..8, got " + std::to_string(options.decode_gemv_rows));
    state->model.set_decode_gemv_rows(options.decode_gemv_rows);
    if (options.decode_mma_rows < 0 || options.decode_mma_rows > 64)
      return fail("engine: decode_mma_rows must be in 0..64, got " + std::to_string(options.decode_mma_rows));
    state->model.set_decode_mma_rows(options.decode_mma_rows);
    if (device.is_cuda() && options.decode_mma_rows > 0 && options.fused_kernels) prepare_linear_mma();
    if (device.is_cuda()) set_programmatic_launch(options.programmatic_launch);
    const auto cache_type =
        options.kv_cache_dtype == kv_cache_dtype_kind::fp8_e4m3 ? torch::kFloat8_e4m3fn : scalar_type_of(options.dtype);
    if (options.kv_layout == kv_layout_kind::paged) {
      // One block more than the pool hands out: the scratch block where decode_graphs' padding
      // rows write.
      state->pool.emplace(blocks, options.kv_block_size);
      state->cache = kv_cache::allocate_blocks(config, blocks + 1, options.kv_block_size, device, cache_type);
    } else {
      state->cache = kv_cache::allocate(config, options.max_batch, state->context, device, cache_type);
    }
    if (options.cuda_graphs && decode_graphs::supported(device))
      state->graphs = std::make_unique<decode_graphs>(state->model, state->cache);
  } catch (const c10::Error& e) {
    return fail("engine: " + std::string(e.what_without_backtrace()));
  }
  state->slots.resize(static_cast<size_t>(options.max_batch));
  state->kept.resize(static_cast<size_t>(options.max_batch));
  return std::unique_ptr<generation_engine>(new generation_engine(std::move(state)));
}

status generation_engine::check(const generation_request& request) const {
  const auto& s = *impl_;
  const int64_t vocab = s.model.config().vocab_size;
  if (request.prompt.empty()) return fail("request: the prompt is empty");
  if (static_cast<int64_t>(request.prompt.size()) >= s.context)
    return fail("request: prompt of " + std::to_string(request.prompt.size()) + " tokens does not fit the context of " +
                std::to_string(s.context) + " tokens (it needs room for at least one new token)");
  if (s.pool && s.pool->blocks_for(static_cast<int64_t>(request.prompt.size()) + 1) > s.pool->total())
    return fail("request: prompt of " + std::to_string(request.prompt.size()) + " tokens needs " +
                std::to_string(s.pool->blocks_for(static_cast<int64_t>(request.prompt.size()) + 1)) + " KV blocks of " +
                std::to_string(s.pool->block_size()) + " tokens (with room for one new token); the whole cache has " +
                std::to_string(s.pool->total()) + " blocks (" + std::to_string(s.pool->total() * s.pool->block_size()) +
                " tokens, kv_cache_tokens)");
  for (int32_t token : request.prompt)
    if (token < 0 || token >= vocab)
      return fail("request: prompt token id " + std::to_string(token) + " is outside the vocabulary [0, " +
                  std::to_string(vocab) + ")");
  if (request.max_new_tokens < 1) return fail("request: max_new_tokens must be >= 1");
  for (int32_t token : request.forced_tokens)
    if (token < 0 || token >= vocab)
      return fail("request: forced token id " + std::to_string(token) + " is outside the vocabulary [0, " +
                  std::to_string(vocab) + ")");
  const auto& p = request.sampling;
  if (!(p.temperature >= 0.0f) || !std::isfinite(p.temperature)) return fail("request: temperature must be >= 0");
  if (!(p.top_p > 0.0f && p.top_p <= 1.0f)) return fail("request: top_p must be in (0, 1]");
  if (p.top_k < 0) return fail("request: top_k must be >= 0");
  return {};
}

result<uint64_t> generation_engine::submit(generation_request request) {
  auto& s = *impl_;
  if (auto valid = check(request); !valid) return valid.error();
  if (s.waiting.size() >= static_cast<size_t>(s.options.max_waiting))
    return fail("request: engine busy, " + std::to_string(s.waiting.size()) + " requests waiting (retry after step())");
  sequence seq;
  seq.id = s.next_id++;
  seq.rng.seed(request.seed);
  seq.request = std::move(request);
  seq.out.id = seq.id;
  s.waiting.push_back(std::move(seq));
  return s.waiting.back().id;
}

void generation_engine::impl::apply_pending() {
  std::lock_guard lock(pending_mutex);
  if (!pending) return;
  // Shapes were checked when staging; assign() only fails on a device error here.
  if (model.assign(*pending)) {
    version.store(pending_version);
    // Keys computed by the old weights would make the new policy's tokens depend on the old one.
    for (auto& k : kept)
      if (k) {
        k.reset();
        ++stats.invalidations;
      }
    if (pool) {
      stats.invalidations += pool->drop_kept();
      // Rationale: a prompt partly prefilled may share blocks with running sequences (a common
      // prefix), which starting over in place would overwrite: it goes back to the queue instead.
      const std::deque<int64_t> partly = prefilling;
      for (auto it = partly.rbegin(); it != partly.rend(); ++it) requeue(static_cast<size_t>(*it));
    }
    // A prompt partly prefilled by the old weights starts over: its first token is the new policy's.
    for (int64_t slot : prefilling) slots[static_cast<size_t>(slot)]->cached = 0;
  }
  pending.reset();
}

torch::Tensor generation_engine::impl::decode_running(std::vector<sequence*>& rows) {
  if (pool) return decode_paged(rows);
  int64_t span = 0;
  for (size_t i = 0; i < slots.size(); ++i)
    if (slots[i] && !slots[i]->prefilling) span = static_cast<int64_t>(i) + 1;
  if (span == 0) return {};
  // Slots below `span` that run nothing decode a dummy token whose key goes to the last
  // position, which no sequence uses (a sequence ends when its keys reach context - 1), so a
  // kept prefix there stays intact; their rows are dropped.
  const int64_t scratch = context - 1;
  std::vector<int64_t> tokens(static_cast<size_t>(span), 0), positions(static_cast<size_t>(span), scratch), live;
  int64_t keys = 1;
  for (int64_t i = 0; i < span; ++i) {
    auto& slot = slots[static_cast<size_t>(i)];
    if (!slot || slot->prefilling) continue;
    tokens[static_cast<size_t>(i)] = slot->out.tokens.back();
    positions[static_cast<size_t>(i)] = slot->cached;
    keys = std::max(keys, slot->cached + 1);
    stats.attended_keys += static_cast<uint64_t>(slot->cached + 1);
    live.push_back(i);
    rows.push_back(&*slot);
  }
  stats.decoded_tokens += live.size();
  if (!live.empty()) ++stats.decode_steps;
  torch::Tensor logits_bv;
  if (graphs) {
    logits_bv = graphs->decode(tokens, positions, keys);
    ++stats.graph_replays;
  } else {
    // flash: the graphs' key bucket (it sizes the kernel's grid, not what a row reads), so that
    // eager and replayed steps run the same kernels and give the same bits.
    if (model.cache_attention_mode() == cache_attention::flash) keys = decode_key_bucket(keys, cache.capacity());
    auto host_2b = torch::tensor(tokens).view({1, span});
    host_2b = torch::cat({host_2b, torch::tensor(positions).view({1, span})});
    logits_bv = model.decode(host_2b[0].to(model.device()), host_2b[1].to(model.device()), keys, cache);
  }
  for (sequence* seq : rows) seq->cached += 1;
  if (static_cast<int64_t>(live.size()) == span) return logits_bv;
  return logits_bv.index_select(0, to_device(live, model.device()));
}

slot_choice generation_engine::impl::choose_slot(const std::vector<int32_t>& prompt) const {
  // At least the last prompt token is prefilled: its logits give the first new token.
  const int64_t usable = static_cast<int64_t>(prompt.size()) - 1;
  slot_choice continuation, free, oldest, best_partial;
  int64_t continuation_len = 0, partial_len = 0;
  for (size_t i = 0; i < slots.size(); ++i) {
    if (slots[i]) continue;
    const auto slot = static_cast<int64_t>(i);
    if (!kept[i]) {
      if (free.slot < 0) free.slot = slot;
      continue;
    }
    if (oldest.slot < 0 || kept[i]->last_used < kept[static_cast<size_t>(oldest.slot)]->last_used) oldest.slot = slot;
    const int64_t match = std::min(common_prefix(kept[i]->tokens, prompt), usable);
    if (match == 0) continue;
    if (match == static_cast<int64_t>(kept[i]->tokens.size()) && match > continuation_len) {
      continuation_len = match;  // the prompt continues this kept sequence: nothing is lost
      continuation = {slot, match, -1};
    }
    if (match > partial_len) {
      partial_len = match;
      best_partial.slot = slot;
    }
  }
  if (continuation.slot >= 0) return continuation;
  // Otherwise take a free slot, else give up the least recently used kept prefix; copy the
  // longest shared prefix (e.g. the system prompt and task of another episode) into it.
  slot_choice out = free.slot >= 0 ? free : oldest;
  if (out.slot < 0) return out;
  if (partial_len > 0) {
    out.reuse = partial_len;
    out.copy_from = best_partial.slot == out.slot ? -1 : best_partial.slot;
  }
  return out;
}

void generation_engine::impl::keep_prefix(sequence& seq) {
  if (pool && !options.prefix_cache) pool->give(seq.blocks);
  if (!options.prefix_cache) return;
  // The keys in the slot: the prompt, then every generated token but the last (never decoded).
  kept_prefix k;
  k.tokens = seq.request.prompt;
  k.tokens.insert(k.tokens.end(), seq.out.tokens.begin(), seq.out.tokens.end());
  k.tokens.resize(static_cast<size_t>(seq.cached));
  k.last_used = ++clock;
  if (pool)
    pool->keep(std::move(k.tokens), std::move(seq.blocks));
  else
    kept[static_cast<size_t>(seq.slot)] = std::move(k);
}

void generation_engine::impl::claim_slot(const slot_choice& choice) {
  const auto index = static_cast<size_t>(choice.slot);
  auto& kept_here = kept[index];
  if (kept_here && (choice.copy_from >= 0 || choice.reuse < static_cast<int64_t>(kept_here->tokens.size())))
    ++stats.evictions;  // some (or all) of this slot's kept keys are overwritten
  kept_here.reset();
  if (choice.copy_from >= 0) {
    for (size_t layer = 0; layer < cache.k_nkce.size(); ++layer)
      for (const auto* buffer : {&cache.k_nkce[layer], &cache.v_nkce[layer]}) {
        auto entries = kv_cache::entries(*buffer);
        entries[choice.slot].narrow(1, 0, choice.reuse).copy_(entries[choice.copy_from].narrow(1, 0, choice.reuse));
      }
    kept[static_cast<size_t>(choice.copy_from)]->last_used = ++clock;
    stats.copied_tokens += static_cast<uint64_t>(choice.reuse);
  }
  sequence& seq = slots[index].emplace(std::move(waiting.front()));
  waiting.pop_front();
  seq.target = seq.request.prompt;
  seq.slot = choice.slot;
  seq.cached = choice.reuse;
  seq.prefilling = true;
  seq.prefill_queued = admit_calls;
  prefilling.push_back(choice.slot);
  ++stats.admissions;
  stats.reused_tokens += static_cast<uint64_t>(choice.reuse);
  if (choice.reuse > 0) ++stats.prefix_hits;
}

bool generation_engine::impl::hold_prefill(const std::vector<sequence*>& rows, int64_t budget) const {
  // Never while nothing decodes (the device would idle) or requests wait for a slot (no prompt
  // can join the pass until a sequence ends).
  if (options.prefill_wait_steps <= 0 || rows.empty() || prefilling.empty() || !waiting.empty()) return false;
  int64_t pending = 0;
  for (const int64_t slot : prefilling) {
    const sequence& seq = *slots[static_cast<size_t>(slot)];
    pending += static_cast<int64_t>(seq.target.size()) - seq.cached;
  }
  if (pending >= budget) return false;
  const sequence& oldest = *slots[static_cast<size_t>(prefilling.front())];
  return admit_calls - oldest.prefill_queued < static_cast<uint64_t>(options.prefill_wait_steps);
}

torch::Tensor generation_engine::impl::admit(std::vector<sequence*>& rows) {
  // Admit waiting requests into slots, then prefill the admitted prompts oldest first, at most
  // prefill_chunk tokens in this step; a prompt whose last token is prefilled yields its logits.
  ++admit_calls;
  while (pool && !waiting.empty() && admit_paged()) {
  }
  while (!pool && !waiting.empty()) {
    const slot_choice choice = options.prefix_cache ? choose_slot(waiting.front().request.prompt) : [&] {
      slot_choice c;
      for (size_t i = 0; i < slots.size() && c.slot < 0; ++i)
        if (!slots[i]) c.slot = static_cast<int64_t>(i);
      return c;
    }();
    if (choice.slot < 0) break;
    claim_slot(choice);
  }
  int64_t budget = options.prefill_chunk > 0 ? options.prefill_chunk : std::numeric_limits<int64_t>::max();
  if (hold_prefill(rows, budget)) {
    ++stats.prefill_holds;
    return {};
  }
  // This step's share of every prompt being prefilled, oldest first, all in one packed pass (one
  // pass per sequence would run the whole model once per admitted prompt).
  std::vector<decoder::prefill_part> parts;
  std::vector<int64_t> fresh;
  for (auto it = prefilling.begin(); it != prefilling.end() && budget > 0; ++it) {
    const sequence& seq = *slots[static_cast<size_t>(*it)];
    const auto& prompt = seq.target;
    const int64_t n = std::min<int64_t>(static_cast<int64_t>(prompt.size()) - seq.cached, budget);
    fresh.insert(fresh.end(), prompt.begin() + seq.cached, prompt.begin() + seq.cached + n);
    parts.push_back({seq.slot, seq.cached, n, seq.blocks});
    stats.recomputed_tokens += static_cast<uint64_t>(std::clamp<int64_t>(seq.recompute_below - seq.cached, 0, n));
    budget -= n;
  }
  if (parts.empty()) return {};
  ++stats.prefill_passes;
  const auto launched = std::chrono::steady_clock::now();
  auto last_pv = model.prefill(to_device(fresh, model.device()), parts, cache);
  stats.prefill_host_seconds += seconds_since(launched);
  std::vector<int64_t> done;  // rows of last_pv whose prompt is now wholly prefilled
  for (size_t i = 0; i < parts.size(); ++i) {
    sequence& seq = *slots[static_cast<size_t>(parts[i].slot)];
    seq.cached += parts[i].length;
    stats.prefilled_tokens += static_cast<uint64_t>(parts[i].length);
    // The budget ran out inside it.
    if (seq.cached < static_cast<int64_t>(seq.target.size())) break;
    prefilling.pop_front();  // parts follow the queue's order, so this is seq
    seq.prefilling = false;
    // Recomputed after a preemption: it has its next input already (its last token) and decodes it next step.
    if (!seq.out.tokens.empty()) continue;
    seq.out.policy_version = version.load();
    done.push_back(static_cast<int64_t>(i));
    rows.push_back(&seq);
  }
  if (done.empty()) return {};
  if (done.size() == parts.size()) return last_pv;
  return last_pv.index_select(0, to_device(done, model.device()));
}

bool generation_engine::impl::finished(sequence& seq) const {
  const auto& r = seq.request;
  const int32_t token = seq.out.tokens.back();
  if (std::find(r.stop_token_ids.begin(), r.stop_token_ids.end(), token) != r.stop_token_ids.end())
    seq.out.reason = finish_reason::stop_token;
  else if (r.stop_check && r.stop_check(seq.out.tokens))
    seq.out.reason = finish_reason::stop_string;
  else if (static_cast<int32_t>(seq.out.tokens.size()) >= r.max_new_tokens ||
           (!r.forced_tokens.empty() && seq.out.tokens.size() >= r.forced_tokens.size()))
    seq.out.reason = finish_reason::max_new_tokens;  // a forced reply ends with its last token
  else if (seq.cached + 1 >= context)                // prompt + generated tokens fill the context
    seq.out.reason = finish_reason::context_limit;
  else
    return false;
  return true;
}

std::vector<generation_result> generation_engine::impl::sample_and_advance(const torch::Tensor& logits_rv,
                                                                           const std::vector<sequence*>& rows) {
  std::vector<sampling_params> params;
  std::vector<double> uniforms;
  std::vector<int64_t> forced;  // teacher forcing: the request's next forced token, else -1
  for (sequence* seq : rows) {
    params.push_back(seq->request.sampling);
    uniforms.push_back(std::uniform_real_distribution<double>(0.0, 1.0)(seq->rng));
    const auto& f = seq->request.forced_tokens;
    const size_t at = seq->out.tokens.size();
    forced.push_back(at < f.size() ? f[at] : -1);
  }
  auto drawn = sample_tokens(logits_rv, params, uniforms, forced, options.fused_kernels);
  auto rows_nr = host_rows(logits_rv, drawn.tokens_b, drawn.logprobs_b);
  // The step's one host synchronisation.
  const auto waiting_since = std::chrono::steady_clock::now();
  auto host_nr = rows_nr.cpu();
  if (rows_nr.is_cuda()) stats.wait_seconds += seconds_since(waiting_since);
  auto host = host_nr.accessor<float, 2>();
  std::vector<generation_result> done;
  for (size_t i = 0; i < rows.size(); ++i) {
    sequence& seq = *rows[i];
    append_drawn(seq, host, static_cast<int64_t>(i));
    if (!finished(seq)) continue;
    keep_prefix(seq);
    done.push_back(std::move(seq.out));
    slots[static_cast<size_t>(seq.slot)].reset();
  }
  return done;
}

torch::Tensor generation_engine::impl::host_rows(const torch::Tensor& logits_rv, const torch::Tensor& tokens_r,
                                                 const torch::Tensor& logprobs_r) const {
  std::vector<torch::Tensor> rows{tokens_r.to(torch::kFloat32), logprobs_r};
  if (options.report_logits) rows.push_back(logits_rv.gather(1, tokens_r.unsqueeze(1)).squeeze(1).to(torch::kFloat32));
  return torch::stack(rows);
}

void generation_engine::impl::append_drawn(sequence& seq, const at::TensorAccessor<float, 2>& host, int64_t i) const {
  seq.out.tokens.push_back(static_cast<int32_t>(host[0][i]));
  seq.out.logprobs.push_back(host[1][i]);
  if (options.report_logits) seq.out.logits.push_back(host[2][i]);
  seq.out.last_policy_version = version.load();
}

result<std::vector<generation_result>> generation_engine::step() {
  auto& s = *impl_;
  try {
    at::InferenceMode inference;
    // Ended outside a step: for want of blocks (paged), or landed by cancel() (overlap).
    std::vector<generation_result> done = std::exchange(s.ended, {});
    if (s.can_overlap()) {
      for (auto& r : s.overlapped_step()) done.push_back(std::move(r));
      return done;
    }
    // Anything else (admission, prefill, new weights, paged) starts from landed tokens.
    if (s.in_flight)
      for (auto& r : s.land(*std::exchange(s.in_flight, std::nullopt))) done.push_back(std::move(r));
    s.apply_pending();
    std::vector<sequence*> rows;
    auto decoded_bv = s.decode_running(rows);
    auto admitted_bv = s.admit(rows);
    for (auto& e : s.ended) done.push_back(std::move(e));
    s.ended.clear();
    if (rows.empty()) return done;
    torch::Tensor logits_rv = !decoded_bv.defined()    ? admitted_bv
                              : !admitted_bv.defined() ? decoded_bv
                                                       : torch::cat({decoded_bv, admitted_bv});
    auto sampled = s.sample_and_advance(logits_rv, rows);
    done.insert(done.end(), std::make_move_iterator(sampled.begin()), std::make_move_iterator(sampled.end()));
    return done;
  } catch (const c10::Error& e) {
    return fail("engine step failed: " + std::string(e.what_without_backtrace()));
  }
}

result<std::vector<generation_result>> generation_engine::run_until_idle() {
  std::vector<generation_result> all;
  while (!idle()) {
    auto done = step();
    if (!done) return done.error();
    for (auto& r : done.value()) all.push_back(std::move(r));
  }
  return all;
}

std::optional<generation_result> generation_engine::cancel(uint64_t id) {
  auto& s = *impl_;
  // Overlapped decoding: the tokens drawn so far land first (the partial result holds them);
  // sequences they end are returned by the next step().
  if (s.in_flight) {
    at::InferenceMode inference;
    for (auto& r : s.land(*std::exchange(s.in_flight, std::nullopt))) s.ended.push_back(std::move(r));
  }
  for (auto it = s.waiting.begin(); it != s.waiting.end(); ++it) {
    if (it->id != id) continue;
    generation_result out = std::move(it->out);
    out.reason = finish_reason::aborted;
    s.waiting.erase(it);
    return out;
  }
  for (auto& slot : s.slots) {
    if (!slot || slot->id != id) continue;
    std::erase(s.prefilling, slot->slot);
    if (s.pool) s.pool->give(slot->blocks);
    generation_result out = std::move(slot->out);
    out.reason = finish_reason::aborted;
    slot.reset();
    return out;
  }
  return std::nullopt;
}

status generation_engine::load_weights(const std::string& model_dir, uint64_t version) {
  auto& s = *impl_;
  // Against the staged version too: a stale publication must not replace a newer pending one.
  if (const auto newest = policy_version(); version < newest)
    return fail("load_weights: version " + std::to_string(version) + " is older than the current " +
                std::to_string(newest));
  // "inproc:<key>": tensors a learner of this process staged (no disk); else a checkpoint.
  const std::string prefix = in_process_weights_prefix;
  auto tensors = model_dir.rfind(prefix, 0) == 0 ? in_process_weights(model_dir.substr(prefix.size()))
                                                 : read_checkpoint_tensors(model_dir);
  if (!tensors) return tensors.error();
  tensor_map staged;
  try {
    at::NoGradGuard no_grad;
    for (const auto& [name, current] : s.model.named_parameters()) {
      auto it = tensors.value().find(name);
      if (it == tensors.value().end()) return fail("load_weights: " + model_dir + " lacks tensor '" + name + "'");
      if (it->second.sizes() != current.sizes())
        return fail("load_weights: tensor '" + name + "' in " + model_dir + " has a different shape");
      staged[name] = it->second.to(current.device(), current.scalar_type());
    }
  } catch (const c10::Error& e) {
    return fail("load_weights: " + std::string(e.what_without_backtrace()));
  }
  std::lock_guard lock(s.pending_mutex);
  if (s.pending && version < s.pending_version)  // a newer one was staged meanwhile
    return fail("load_weights: version " + std::to_string(version) + " is older than the staged " +
                std::to_string(s.pending_version));
  s.pending = std::move(staged);
  s.pending_version = version;
  return {};
}

uint64_t generation_engine::policy_version() const {
  std::lock_guard lock(impl_->pending_mutex);
  return impl_->pending ? impl_->pending_version : impl_->version.load();
}

engine_stats generation_engine::stats() const {
  engine_stats out = impl_->stats;
  if (const auto& pool = impl_->pool) {
    out.evictions += pool->evictions();
    out.kv_blocks = static_cast<uint64_t>(pool->total());
    out.kv_blocks_free = static_cast<uint64_t>(pool->free());
    out.kv_blocks_kept = static_cast<uint64_t>(pool->kept_blocks());
  }
  if (impl_->graphs) {
    out.graph_captures = static_cast<uint64_t>(impl_->graphs->captures());
    out.graph_capture_seconds = impl_->graphs->capture_seconds();
  }
  return out;
}
size_t generation_engine::forget_prefixes() {
  size_t n = 0;
  for (auto& k : impl_->kept)
    if (k) {
      k.reset();
      ++n;
    }
  if (impl_->pool) n += static_cast<size_t>(impl_->pool->drop_kept());
  return n;
}

size_t generation_engine::kept_prefixes() const {
  if (impl_->pool) return impl_->pool->kept();
  return static_cast<size_t>(
      std::count_if(impl_->kept.begin(), impl_->kept.end(), [](const auto& k) { return k.has_value(); }));
}
size_t generation_engine::running() const {
  return impl_->running();
}
size_t generation_engine::waiting() const {
  return impl_->waiting.size();
}
int32_t generation_engine::max_context() const {
  return static_cast<int32_t>(impl_->context);
}
int64_t generation_engine::kv_capacity_tokens() const {
  const auto& s = *impl_;
  return s.pool ? s.pool->total() * s.pool->block_size() : static_cast<int64_t>(s.options.max_batch) * s.context;
}
int32_t generation_engine::vocab_size() const {
  return static_cast<int32_t>(impl_->model.config().vocab_size);
}

}  // namespace caf_agent::policy
