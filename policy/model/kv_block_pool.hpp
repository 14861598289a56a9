#pragma once
// kv_block_pool: the bookkeeping of the engine's paged KV cache (engine_options::kv_layout
// "paged"), without tensors: which blocks are free, how many holders each block has (running
// sequences and kept prefixes share the full blocks of a common prefix), which finished
// sequences' keys are kept (the prefix cache: their tokens and blocks, least recently used
// evicted first), and which evicted prefixes were seen lately, so that their recomputation can
// be counted. Running sequences hold block lists; the engine takes blocks here and gives them back.

#include <cstdint>
#include <deque>
#include <initializer_list>
#include <optional>
#include <utility>
#include <vector>

namespace caf_agent::policy {

/// The free list and the kept prefixes of a paged KV cache of `blocks` blocks.
class kv_block_pool {
 public:
  /// A finished sequence's cached keys: its tokens (keys at positions 0..size-1) and their blocks.
  struct kept_prefix {
    std::vector<int32_t> tokens;
    std::vector<int64_t> blocks;
    uint64_t last_used = 0;
  };
  /// The kept prefix that a prompt continues furthest: its index and the shared token count.
  struct match {
    int64_t index = -1;  ///< -1: none shares a token
    int64_t tokens = 0;
  };

  kv_block_pool(int64_t blocks, int64_t block_size);

  /// Blocks that hold `tokens` keys.
  int64_t blocks_for(int64_t tokens) const { return (tokens + block_size_ - 1) / block_size_; }
  int64_t block_size() const { return block_size_; }
  /// Blocks in the pool, on the free list, and held by kept prefixes only (evicting them all
  /// would free these).
  int64_t total() const { return total_; }
  int64_t free() const { return static_cast<int64_t>(free_.size()); }
  int64_t kept_blocks() const;
  /// The token count of kept prefix `index`.
  int64_t kept_tokens(int64_t index) const {
    return static_cast<int64_t>(kept_[static_cast<size_t>(index)].tokens.size());
  }
  /// Kept prefixes.
  size_t kept() const { return kept_.size(); }
  /// The kept prefix evicted next (least recently used), -1 when none is kept.
  int64_t least_recent() const;
  /// Whether a sequence that takes over the first `m.tokens` of kept prefix `m.index` may write
  /// its next keys in place: they start a block, or the block they go into has no other holder
  /// (a running sequence sharing it reads its keys there).
  bool writable_after(const match& m) const;
  /// Kept prefixes given up, wholly or in part, since construction.
  uint64_t evictions() const { return evictions_; }

  /// A free block (one holder), evicting least recently used kept prefixes while none is free;
  /// nullopt when no block is free and nothing is kept. The first of `prefer` that is free, else
  /// the middle of the longest run of free blocks (its start when it starts at block 0).
  /// Rationale: a sequence whose blocks are consecutive ids is read by flash as one sequence per KV
  /// head, as a slot is (decoder.hpp cache_attention::flash); the engine asks for the block after
  /// a sequence's last one, and a new sequence for its seat's share of the cache, so that with a
  /// pool of max_batch x max_context (the default) each sequence grows through a run of its own.
  std::optional<int64_t> take(std::initializer_list<int64_t> prefer = {});
  /// n consecutive free blocks (one holder each), in order: with `prefer` (a seat's share of the
  /// pool), the first n free in a row from it on, else from block 0 (the first n of `room` free in
  /// a row where there are: room to grow); without, within the longest
  /// run of free blocks (at its start when it starts at block 0, else (length - n) / 2 into it,
  /// leaving room to grow after them). Rationale: a seat whose first block a kept prefix still
  /// holds then takes the free blocks after it, in its own share, not the middle of another's
  /// (that displaced one sequence after another: 64 rows of 1,024 tokens took 7,839 runs for
  /// 6,336 decode rows). Kept prefixes are evicted, least recently used first, only while fewer
  /// than `needed` blocks are free (-1: n): the blocks the caller lacks, so no more than taking
  /// them one by one would evict. Rationale: evicting more until a run was free (least recently
  /// used first, or the prefixes of the window with the fewest kept blocks) cost a pool that
  /// thrashes (64 agent episodes in 64% of the keys they need) a point of prefix hits and left
  /// its rows in more runs, not fewer (bench/results/2026-12-04-policy-h200-paged-in-place.md).
  /// Empty, taking nothing, when no run of n free blocks is left.
  std::vector<int64_t> take_run(int64_t n, int64_t prefer = -1, int64_t needed = -1, int64_t room = 0);
  /// Frees `block` by evicting the kept prefixes holding it, when they are all that holds it;
  /// whether it is free now. Rationale: a decode row whose next block a kept prefix holds grows
  /// into it rather than into a second run (decode_paged), when no free run can take the row.
  bool evict_holders_of(int64_t block);
  /// The longest run of free blocks (the first of equals): its first block (-1: none) and length.
  std::pair<int64_t, int64_t> longest_free_run() const;
  /// Whether blocks first..first+n-1 exist and are all free.
  bool free_range(int64_t first, int64_t n) const;
  /// Drops one holder of each of `blocks` (a block without holders is free) and clears it.
  void give(std::vector<int64_t>& blocks);

  /// The kept prefix sharing the most leading tokens with `tokens`, counting at most `limit`.
  match longest_match(const std::vector<int32_t>& tokens, int64_t limit) const;
  /// Blocks that free() plus evicting every kept prefix would give, less those holding the
  /// first `m.tokens` tokens of kept prefix `m.index` (which the caller is about to use).
  int64_t obtainable(const match& m) const;
  /// Removes kept prefix `m.index` and returns the blocks of its first `m.tokens` tokens; the
  /// rest are given back (an eviction when that loses any key).
  std::vector<int64_t> take_over(const match& m);
  /// The first `m.tokens` tokens of kept prefix `m.index`, which stays kept (now the most
  /// recently used): its full blocks among them, shared (one more holder each), and the block
  /// holding the rest (-1 when the tokens end on a block boundary), which the caller copies into
  /// a block of its own and then gives back (it has one more holder meanwhile).
  struct shared_prefix {
    std::vector<int64_t> blocks;
    int64_t partial = -1;
  };
  shared_prefix share(const match& m);
  /// Keeps `tokens`' keys held in `blocks` (blocks beyond those tokens are freed).
  void keep(std::vector<int32_t> tokens, std::vector<int64_t> blocks);
  /// Frees every kept prefix (new weights: their keys are stale); returns how many there were.
  uint64_t drop_kept();

  /// How many leading tokens of `tokens` had their keys computed in an evicted prefix seen
  /// lately (so prefilling them again is recomputation); when more than `reused` (the tokens
  /// whose keys are still cached), that record is forgotten, else 0.
  int64_t evicted_match(const std::vector<int32_t>& tokens, int64_t reused);

 private:
  bool evict_least_recent();
  /// Gives up kept prefix `index` whole (an eviction).
  void evict(size_t index);
  /// The first of n free blocks in a row from block `from` on, else from block 0 (runs that
  /// start before `from`); -1 when there is none.
  int64_t first_fit(int64_t from, int64_t n) const;
  void remember_evicted(std::vector<int32_t> tokens);
  /// Per block, how many kept prefixes hold it.
  std::vector<int32_t> kept_holders() const;

  int64_t total_ = 0;
  int64_t block_size_ = 1;
  std::vector<int64_t> free_;
  std::vector<int32_t> holders_;  // per block: running sequences and kept prefixes holding it
  std::vector<kept_prefix> kept_;
  std::deque<std::vector<int32_t>> evicted_;
  uint64_t clock_ = 0;
  uint64_t evictions_ = 0;
};

}  // namespace caf_agent::policy
