// The generation engine's paged KV layout (engine_options::kv_layout "paged"): decoding over
// block tables, admission by KV capacity, preemption. Shape legend: b decode rows, m blocks per row.
#include <ATen/ATen.h>

#include <algorithm>

#include "policy/model/engine_impl.hpp"

namespace caf_agent::policy {

using engine_detail::sequence;

namespace {

// Whether the sequence's next key (at position `cached`) falls past its blocks.
bool needs_block(const sequence& seq, int64_t block_size) {
  return static_cast<int64_t>(seq.blocks.size()) * block_size <= seq.cached;
}

}  // namespace

bool generation_engine::impl::paged_overlap_fits() const {
  // Rows about to cross into a new block each take one (a row moved to a longer run gives its
  // old blocks back); a preemption happens only when no block is free or kept to evict.
  int64_t growing = 0;
  for (const auto& seq : slots)
    if (seq && !seq->prefilling && !ends_before_decoding(*seq) && needs_block(*seq, pool->block_size())) ++growing;
  return growing == 0 || pool->obtainable({}) >= growing;
}

torch::Tensor generation_engine::impl::decode_paged(std::vector<sequence*>& rows, bool from_flight) {
  // Every decoding sequence's next key needs room: a new block when it crosses into one. Oldest
  // admission first, so that preemption (of the newest) never takes a sequence already served.
  // Overlapped, a sequence whose pending token surely ends it decodes no more.
  std::vector<size_t> order;
  for (size_t i = 0; i < slots.size(); ++i)
    if (slots[i] && !slots[i]->prefilling && !(from_flight && ends_before_decoding(*slots[i]))) order.push_back(i);
  std::sort(order.begin(), order.end(),
            [&](size_t a, size_t b) { return slots[a]->admitted_at < slots[b]->admitted_at; });
  for (size_t seat : order) {
    while (slots[seat] && needs_block(*slots[seat], pool->block_size())) {
      auto& blocks = slots[seat]->blocks;
      // The block after its last keeps the row one run. When it is taken the row moves to a
      // free run of one more block (its keys copied); when there is none, it evicts the kept
      // prefixes holding that next block and grows in place; when a running sequence holds it,
      // it moves to a run that evicting for the one block lacking leaves, else grows elsewhere.
      // Without runs to keep (keeps_runs) the row takes the next free block wherever it is.
      const int64_t next = blocks.back() + 1;
      if (keeps_runs() && !pool->free_range(next, 1) && paged_block_run_count({&blocks}) == 1) {
        auto run = pool->take_run(std::ssize(blocks) + 1, seat_base(seat), /*needed=*/0);
        if (run.empty() && pool->evict_holders_of(next)) continue;
        if (run.empty()) run = pool->take_run(std::ssize(blocks) + 1, seat_base(seat), /*needed=*/1);
        if (!run.empty()) {
          copy_blocks(blocks, run);
          stats.moved_tokens += static_cast<uint64_t>(slots[seat]->cached);
          pool->give(blocks);
          blocks = std::move(run);
          continue;
        }
      }
      if (auto block = pool->take({blocks.back() + 1, seat_base(seat)})) {
        blocks.push_back(*block);
        continue;
      }
      // Nothing free or kept: the most recently admitted running sequence gives its blocks up.
      // Never overlapped (paged_overlap_fits): it would requeue a sequence with a token in flight.
      TORCH_CHECK(!from_flight, "engine: an overlapped paged step ran out of blocks (paged_overlap_fits)");
      size_t newest = seat;
      for (size_t i = 0; i < slots.size(); ++i)
        if (slots[i] && slots[i]->admitted_at > slots[newest]->admitted_at) newest = i;
      preempt(newest);
    }
  }
  std::vector<int64_t> tokens, positions;
  std::vector<const std::vector<int64_t>*> tables;
  int64_t keys = 1;
  size_t width = 1;
  for (size_t seat : order) {
    if (!slots[seat]) continue;
    sequence& seq = *slots[seat];
    tokens.push_back(from_flight ? 0 : seq.out.tokens.back());  // overlapped: flight_inputs below
    positions.push_back(seq.cached);
    keys = std::max(keys, seq.cached + 1);
    width = std::max(width, seq.blocks.size());
    tables.push_back(&seq.blocks);
    stats.attended_keys += static_cast<uint64_t>(seq.cached + 1);
    stats.decode_block_runs += static_cast<uint64_t>(paged_block_run_count({&seq.blocks}));
    rows.push_back(&seq);
  }
  if (tokens.empty()) return {};
  const auto b = static_cast<int64_t>(tokens.size());
  stats.decoded_tokens += static_cast<uint64_t>(b);
  ++stats.decode_steps;
  torch::Tensor tokens_b;
  if (from_flight) {
    tokens_b = flight_inputs({rows.begin(), rows.end()});
    ++stats.overlapped_steps;
  }
  torch::Tensor logits_bv;
  if (graphs) {
    logits_bv = from_flight ? graphs->decode(tokens_b, positions, tables) : graphs->decode(tokens, positions, tables);
    ++stats.graph_replays;
    for (sequence* seq : rows) seq->cached += 1;
    return logits_bv;
  }
  // flash reads runs of consecutive blocks: the graphs' width and keys, so that eager and
  // replayed steps run the same kernels and give the same bits.
  const bool flash = model.cache_attention_mode() == cache_attention::flash;
  const int64_t runs = model.decode_takes_runs(cache) ? paged_block_run_count(tables) : 0;
  if (flash) {
    width = static_cast<size_t>(decode_table_width(static_cast<int64_t>(width), pool->block_size()));
    keys = static_cast<int64_t>(width) * pool->block_size();
  }
  // Block tables [b, width], each padded with its own first block (read only under the mask,
  // or by flash as a share of no keys).
  std::vector<int64_t> table_bm;
  for (const auto* blocks : tables) {
    table_bm.insert(table_bm.end(), blocks->begin(), blocks->end());
    table_bm.insert(table_bm.end(), width - blocks->size(), blocks->front());
  }
  if (runs > 0) {
    const auto runs_br3 = paged_block_runs(tables, pool->block_size(), runs, cache.slots() - 1);
    table_bm.insert(table_bm.end(), runs_br3.begin(), runs_br3.end());
  }
  // One host-to-device copy: tokens, positions, tables and runs end to end.
  auto inputs =
      torch::cat({torch::tensor(tokens), torch::tensor(positions), torch::tensor(table_bm)}).to(model.device());
  const int64_t m = static_cast<int64_t>(width);
  if (from_flight) inputs.narrow(0, 0, b).copy_(tokens_b);
  logits_bv = model.decode(
      inputs.narrow(0, 0, b), inputs.narrow(0, b, b), keys, cache, inputs.narrow(0, 2 * b, b * m).view({b, m}),
      runs > 0 ? inputs.narrow(0, 2 * b + b * m, b * runs * 3).view({b, runs, 3}) : torch::Tensor());
  for (sequence* seq : rows) seq->cached += 1;
  return logits_bv;
}

void generation_engine::impl::copy_blocks(const std::vector<int64_t>& from, const std::vector<int64_t>& to) {
  if (from.empty()) return;
  const auto n = static_cast<int64_t>(from.size());
  if (paged_block_run_count({&from}) == 1 && paged_block_run_count({&to}) == 1) {
    // Run to run (the usual move): one copy a tensor, no index tensors to send.
    for (size_t layer = 0; layer < cache.k_nkce.size(); ++layer) {  // [k, blocks, block size, e]
      for (const auto* buffer : {&cache.k_nkce[layer], &cache.v_nkce[layer]}) {
        auto entries = kv_cache::entries(*buffer);
        entries.narrow(1, to.front(), n).copy_(entries.narrow(1, from.front(), n));
      }
    }
    return;
  }
  auto to_head = to;
  to_head.resize(from.size());
  const auto src = torch::tensor(from).to(model.device()), dst = torch::tensor(to_head).to(model.device());
  for (size_t layer = 0; layer < cache.k_nkce.size(); ++layer) {  // [k, blocks, block size, e]
    for (const auto* buffer : {&cache.k_nkce[layer], &cache.v_nkce[layer]}) {
      auto entries = kv_cache::entries(*buffer);
      entries.index_copy_(1, dst, entries.index_select(1, src));
    }
  }
}

int64_t generation_engine::impl::seat_base(size_t seat) const {
  return static_cast<int64_t>(seat) * (pool->total() / static_cast<int64_t>(slots.size()));
}

void generation_engine::impl::preempt(size_t seat) {
  sequence& seq = *slots[seat];
  std::erase(prefilling, static_cast<int64_t>(seat));
  if (!seq.prefilling && pool->blocks_for(seq.cached + 1) > pool->total()) {
    // It alone fills the cache: it can never be recomputed and continue, so it ends here.
    seq.out.reason = finish_reason::context_limit;
    keep_prefix(seq);
    ended.push_back(std::move(seq.out));
    slots[seat].reset();
    return;
  }
  // Recompute preemption (vLLM's): its keys are dropped and recomputed from its prompt and the
  // tokens it generated when it is admitted again, at the front of the queue.
  ++stats.preemptions;
  seq.recompute_below = std::max(seq.recompute_below, seq.cached);
  requeue(seat);
}

void generation_engine::impl::requeue(size_t seat) {
  sequence& seq = *slots[seat];
  std::erase(prefilling, static_cast<int64_t>(seat));
  pool->give(seq.blocks);
  seq.cached = 0;
  seq.prefilling = false;
  seq.slot = -1;
  waiting.push_front(std::move(seq));
  slots[seat].reset();
}

bool generation_engine::impl::admit_paged() {
  auto seat = std::find_if(slots.begin(), slots.end(), [](const auto& s) { return !s.has_value(); });
  if (seat == slots.end()) return false;
  sequence& next = waiting.front();
  std::vector<int32_t> target = next.request.prompt;
  if (!next.out.tokens.empty()) target.insert(target.end(), next.out.tokens.begin(), next.out.tokens.end() - 1);
  const auto length = static_cast<int64_t>(target.size());
  // At least the last target token is prefilled: its logits give the next token.
  const auto reuse = options.prefix_cache ? pool->longest_match(target, length - 1) : kv_block_pool::match{};
  // A prompt that continues a kept prefix takes its blocks over; one that shares only its start
  // (another episode's system prompt and task) shares its full blocks and copies the last
  // partial one, so the kept prefix stays whole for its own next turn.
  // It also takes over the first tokens of a prefix it does not continue whole when that prefix
  // is the least recently used and no free run of blocks holds it as it grows (its prompt and
  // max_new_tokens): the prefix would be the first to go, and its blocks are then a run in place
  // (no copy, no other prefix evicted), as a slot is taken over. Not when a running sequence
  // shares the block it would write into.
  const int64_t most = std::min<int64_t>(length + next.request.max_new_tokens, context);
  const bool take_over = reuse.index >= 0 && (reuse.tokens == pool->kept_tokens(reuse.index) ||
                                              (reuse.index == pool->least_recent() && pool->writable_after(reuse) &&
                                               pool->longest_free_run().second < pool->blocks_for(most)));
  const int64_t reused_blocks = take_over ? pool->blocks_for(reuse.tokens) : reuse.tokens / pool->block_size();
  // Rationale: admitted only if the blocks obtainable (free, or kept and evictable) cover its
  // prompt and first new key, plus a block of decode headroom per running sequence, so that an
  // admission rarely forces a preemption soon after (back-pressure before the cache is full).
  const int64_t needed = pool->blocks_for(length + 1) - reused_blocks + static_cast<int64_t>(running());
  if (pool->obtainable(reuse) < needed) return false;
  next.recompute_below = std::max(next.recompute_below, pool->evicted_match(target, reuse.tokens));
  std::vector<int64_t> blocks;
  kv_block_pool::shared_prefix shared;
  if (take_over) {
    blocks = pool->take_over(reuse);
  } else if (reuse.index >= 0) {
    shared = pool->share(reuse);
    blocks = shared.blocks;
    stats.copied_tokens += static_cast<uint64_t>(reuse.tokens);
  }
  const auto index = static_cast<size_t>(seat - slots.begin());
  // One run of consecutive blocks where one is free: flash reads a row's blocks as runs, each a
  // sequence of its own (decoder::describe_paged_decode), so a row of one run reads as a slot does.
  // Reused blocks (taken over, or a shared prefix's full blocks) stay where they are when they are
  // one run that can grow in place; else their keys are copied into the new run and given back.
  // Without runs to keep (keeps_runs), reused blocks always stay where they are.
  const int64_t wanted = pool->blocks_for(length), have = static_cast<int64_t>(blocks.size());
  const bool in_place = !keeps_runs() || (have > 0 && paged_block_run_count({&blocks}) == 1 &&
                                          pool->free_range(blocks.back() + 1, std::max<int64_t>(0, wanted - have)));
  if (!in_place) {
    // Room for all it may grow to (its prompt and max_new_tokens), where a free run has it.
    auto run = pool->take_run(std::max(wanted, have), seat_base(index), /*needed=*/wanted - have,
                              /*room=*/pool->blocks_for(most));
    if (!run.empty() && have > 0) {
      copy_blocks(blocks, run);
      stats.moved_tokens += static_cast<uint64_t>(reuse.tokens);
      pool->give(blocks);
    }
    if (!run.empty()) blocks = std::move(run);
  }
  while (static_cast<int64_t>(blocks.size()) < pool->blocks_for(length))
    blocks.push_back(blocks.empty() ? *pool->take({seat_base(index)})
                                    : *pool->take({blocks.back() + 1, seat_base(index)}));
  if (shared.partial >= 0) {  // the shared tokens' last block, copied: this sequence writes after them
    std::vector<int64_t> source{shared.partial};
    copy_blocks(source, {blocks[static_cast<size_t>(reuse.tokens / pool->block_size())]});
    pool->give(source);
  }
  sequence& seq = seat->emplace(std::move(next));
  waiting.pop_front();
  seq.slot = seat - slots.begin();
  seq.target = std::move(target);
  seq.blocks = std::move(blocks);
  seq.cached = reuse.tokens;
  seq.prefilling = true;
  seq.admitted_at = ++admission_clock;
  seq.prefill_queued = admit_calls;
  prefilling.push_back(seq.slot);
  ++stats.admissions;
  stats.reused_tokens += static_cast<uint64_t>(reuse.tokens);
  if (reuse.tokens > 0) ++stats.prefix_hits;
  return true;
}

}  // namespace caf_agent::policy
