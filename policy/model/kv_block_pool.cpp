#include "policy/model/kv_block_pool.hpp"

#include <algorithm>
#include <numeric>

namespace caf_agent::policy {
namespace {

// Rationale: evicted prefixes are remembered (token ids only, host memory) just to report their
// recomputation; the last 64 cover the sessions an agent workload rotates through, and bound
// the memory to 64 contexts of token ids.
constexpr size_t evicted_kept = 64;

int64_t common_prefix(const std::vector<int32_t>& a, const std::vector<int32_t>& b) {
  const auto [ia, ib] =
      std::mismatch(a.begin(), a.begin() + static_cast<std::ptrdiff_t>(std::min(a.size(), b.size())), b.begin());
  return ia - a.begin();
}

}  // namespace

kv_block_pool::kv_block_pool(int64_t blocks, int64_t block_size)
    : total_(blocks),
      block_size_(block_size),
      free_(static_cast<size_t>(blocks)),
      holders_(static_cast<size_t>(blocks), 0) {
  // Taken from the back: block 0 first.
  std::iota(free_.rbegin(), free_.rend(), int64_t{0});
}

std::vector<int32_t> kv_block_pool::kept_holders() const {
  std::vector<int32_t> n(holders_.size(), 0);
  for (const auto& k : kept_)
    for (int64_t block : k.blocks) ++n[static_cast<size_t>(block)];
  return n;
}

int64_t kv_block_pool::kept_blocks() const {
  const auto kept = kept_holders();
  int64_t n = 0;
  for (size_t b = 0; b < kept.size(); ++b) n += kept[b] > 0 && kept[b] == holders_[b];
  return n;
}

std::optional<int64_t> kv_block_pool::take(std::initializer_list<int64_t> prefer) {
  while (free_.empty())
    if (!evict_least_recent()) return std::nullopt;
  const auto is_free = [&](int64_t b) { return b >= 0 && b < total_ && holders_[static_cast<size_t>(b)] == 0; };
  int64_t block = -1;
  for (int64_t b : prefer)
    if (is_free(b)) {
      block = b;
      break;
    }
  if (block < 0) {
    const auto [best, best_length] = longest_free_run();
    block = best == 0 ? 0 : best + best_length / 2;
  }
  free_.erase(std::find(free_.begin(), free_.end(), block));
  holders_[static_cast<size_t>(block)] = 1;
  return block;
}

std::pair<int64_t, int64_t> kv_block_pool::longest_free_run() const {
  int64_t best = -1, best_length = 0;
  for (int64_t b = 0; b < total_;) {
    if (holders_[static_cast<size_t>(b)] != 0) {
      ++b;
      continue;
    }
    int64_t end = b;
    while (end < total_ && holders_[static_cast<size_t>(end)] == 0) ++end;
    if (end - b > best_length) best = b, best_length = end - b;
    b = end;
  }
  return {best, best_length};
}

bool kv_block_pool::free_range(int64_t first, int64_t n) const {
  if (first < 0 || n < 0 || first + n > total_) return false;
  for (int64_t b = first; b < first + n; ++b)
    if (holders_[static_cast<size_t>(b)] != 0) return false;
  return true;
}

std::vector<int64_t> kv_block_pool::take_run(int64_t n, int64_t prefer, int64_t needed, int64_t room) {
  if (n <= 0) return {};
  while (free() < (needed < 0 ? n : needed))
    if (!evict_least_recent()) break;
  const auto place = [&] {
    if (prefer < 0 || prefer >= total_) {
      const auto [best, length] = longest_free_run();
      if (length < n) return int64_t{-1};
      return best == 0 ? 0 : best + (length - n) / 2;
    }
    const int64_t roomy = room > n ? first_fit(prefer, room) : -1;
    return roomy >= 0 ? roomy : first_fit(prefer, n);
  };
  const int64_t first = place();
  if (first < 0) return {};
  std::vector<int64_t> out(static_cast<size_t>(n));
  std::iota(out.begin(), out.end(), first);
  for (int64_t block : out) holders_[static_cast<size_t>(block)] = 1;
  std::erase_if(free_, [&](int64_t block) { return block >= first && block < first + n; });
  return out;
}

int64_t kv_block_pool::first_fit(int64_t from, int64_t n) const {
  const auto fit = [&](int64_t begin, int64_t end) {
    for (int64_t b = begin, length = 0; b < end; ++b) {
      length = holders_[static_cast<size_t>(b)] == 0 ? length + 1 : 0;
      if (length >= n) return b - n + 1;
    }
    return int64_t{-1};
  };
  const int64_t at = fit(from, total_);
  return at >= 0 ? at : fit(0, std::min(total_, from + n - 1));
}

bool kv_block_pool::evict_holders_of(int64_t block) {
  if (block < 0 || block >= total_) return false;
  const auto b = static_cast<size_t>(block);
  if (holders_[b] == 0) return true;
  if (kept_holders()[b] != holders_[b]) return false;  // a running sequence holds it
  for (size_t i = kept_.size(); i-- > 0;)
    if (std::find(kept_[i].blocks.begin(), kept_[i].blocks.end(), block) != kept_[i].blocks.end()) evict(i);
  return holders_[b] == 0;
}

void kv_block_pool::give(std::vector<int64_t>& blocks) {
  for (int64_t block : blocks)
    if (--holders_[static_cast<size_t>(block)] == 0) free_.push_back(block);
  blocks.clear();
}

kv_block_pool::match kv_block_pool::longest_match(const std::vector<int32_t>& tokens, int64_t limit) const {
  match best;
  for (size_t i = 0; i < kept_.size(); ++i) {
    const int64_t n = std::min(common_prefix(kept_[i].tokens, tokens), limit);
    if (n > best.tokens) best = {static_cast<int64_t>(i), n};
  }
  return best;
}

int64_t kv_block_pool::obtainable(const match& m) const {
  auto kept = kept_holders();
  if (m.index >= 0) {  // the blocks about to be used count as held by someone else
    const auto& blocks = kept_[static_cast<size_t>(m.index)].blocks;
    for (size_t i = 0; i < blocks.size() && static_cast<int64_t>(i) < blocks_for(m.tokens); ++i)
      kept[static_cast<size_t>(blocks[i])] = 0;
  }
  int64_t n = free();
  for (size_t b = 0; b < kept.size(); ++b) n += kept[b] > 0 && kept[b] == holders_[b];
  return n;
}

kv_block_pool::shared_prefix kv_block_pool::share(const match& m) {
  auto& k = kept_[static_cast<size_t>(m.index)];
  k.last_used = ++clock_;
  shared_prefix out;
  const auto full = static_cast<size_t>(m.tokens / block_size_);
  out.blocks.assign(k.blocks.begin(), k.blocks.begin() + static_cast<std::ptrdiff_t>(full));
  for (int64_t block : out.blocks) ++holders_[static_cast<size_t>(block)];
  if (m.tokens % block_size_ != 0) {
    out.partial = k.blocks[full];
    ++holders_[static_cast<size_t>(out.partial)];
  }
  return out;
}

std::vector<int64_t> kv_block_pool::take_over(const match& m) {
  auto it = kept_.begin() + m.index;
  std::vector<int64_t> blocks = std::move(it->blocks);
  if (m.tokens < static_cast<int64_t>(it->tokens.size())) {
    ++evictions_;  // the keys past the shared tokens are given up
    remember_evicted(std::move(it->tokens));
  }
  kept_.erase(it);
  std::vector<int64_t> rest(blocks.begin() + std::min(blocks_for(m.tokens), static_cast<int64_t>(blocks.size())),
                            blocks.end());
  blocks.resize(blocks.size() - rest.size());
  give(rest);
  return blocks;
}

void kv_block_pool::keep(std::vector<int32_t> tokens, std::vector<int64_t> blocks) {
  const auto needed = static_cast<size_t>(blocks_for(static_cast<int64_t>(tokens.size())));
  if (blocks.size() > needed) {
    std::vector<int64_t> rest(blocks.begin() + static_cast<std::ptrdiff_t>(needed), blocks.end());
    blocks.resize(needed);
    give(rest);
  }
  kept_.push_back({std::move(tokens), std::move(blocks), ++clock_});
}

uint64_t kv_block_pool::drop_kept() {
  const uint64_t n = kept_.size();
  for (auto& k : kept_) give(k.blocks);
  kept_.clear();
  evicted_.clear();  // their tokens' keys under the old weights no longer count as computed
  return n;
}

int64_t kv_block_pool::evicted_match(const std::vector<int32_t>& tokens, int64_t reused) {
  auto best = evicted_.end();
  int64_t best_n = reused;
  for (auto it = evicted_.begin(); it != evicted_.end(); ++it)
    if (const int64_t n = common_prefix(*it, tokens); n > best_n) {
      best_n = n;
      best = it;
    }
  if (best == evicted_.end()) return 0;
  evicted_.erase(best);
  return best_n;
}

int64_t kv_block_pool::least_recent() const {
  if (kept_.empty()) return -1;
  return std::min_element(kept_.begin(), kept_.end(),
                          [](const auto& a, const auto& b) { return a.last_used < b.last_used; }) -
         kept_.begin();
}

bool kv_block_pool::writable_after(const match& m) const {
  if (m.tokens % block_size_ == 0) return true;
  const auto& blocks = kept_[static_cast<size_t>(m.index)].blocks;
  return holders_[static_cast<size_t>(blocks[static_cast<size_t>(m.tokens / block_size_)])] == 1;
}

bool kv_block_pool::evict_least_recent() {
  if (kept_.empty()) return false;
  evict(static_cast<size_t>(least_recent()));
  return true;
}

void kv_block_pool::evict(size_t index) {
  auto it = kept_.begin() + static_cast<std::ptrdiff_t>(index);
  give(it->blocks);
  remember_evicted(std::move(it->tokens));
  kept_.erase(it);
  ++evictions_;
}

void kv_block_pool::remember_evicted(std::vector<int32_t> tokens) {
  evicted_.push_back(std::move(tokens));
  if (evicted_.size() > evicted_kept) evicted_.pop_front();
}

}  // namespace caf_agent::policy
