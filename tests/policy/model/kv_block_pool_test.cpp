// Unit tests of kv_block_pool, the paged KV cache's bookkeeping: the free list, holder counts
// of shared blocks, kept prefixes evicted least recently used first, and the record of evicted
// prefixes that counts recomputation.
#include <gtest/gtest.h>

#include "policy/model/kv_block_pool.hpp"

using caf_agent::policy::kv_block_pool;

TEST(kv_block_pool, kept_prefixes_are_matched_taken_over_and_evicted_least_recently_used_first) {
  kv_block_pool pool(6, 4);
  EXPECT_EQ(pool.blocks_for(0), 0);
  EXPECT_EQ(pool.blocks_for(9), 3);
  std::vector<int64_t> a{*pool.take(), *pool.take()}, b{*pool.take(), *pool.take(), *pool.take()};
  EXPECT_EQ(pool.free(), 1);
  pool.keep({1, 2, 3, 4, 5}, a);            // 5 tokens: both blocks kept
  pool.keep({7, 8, 9, 10, 11, 12, 13}, b);  // 7 tokens: 2 of its 3 blocks kept, 1 freed
  EXPECT_EQ(pool.free(), 2);
  EXPECT_EQ(pool.kept_blocks(), 4);
  const auto m = pool.longest_match({1, 2, 3, 4, 5, 6}, 5);
  EXPECT_EQ(m.tokens, 5);
  EXPECT_EQ(pool.obtainable(m), 2 + 2);  // free, plus the other prefix's blocks
  // Three takes empty the free list and evict the least recently used prefix ({1..5}).
  std::vector<int64_t> c{*pool.take(), *pool.take(), *pool.take()};
  EXPECT_EQ(pool.kept(), 1u);
  EXPECT_EQ(pool.evictions(), 1u);
  EXPECT_EQ(pool.evicted_match({1, 2, 3, 9}, 0), 3);  // its keys had been computed: recomputation
  EXPECT_EQ(pool.evicted_match({1, 2, 3, 9}, 0), 0);  // counted once
  const auto taken = pool.take_over(pool.longest_match({7, 8, 9, 10, 11, 12, 13, 14}, 7));
  EXPECT_EQ(taken.size(), 2u);
  EXPECT_EQ(pool.kept(), 0u);
  EXPECT_EQ(pool.free(), 1);  // 6 blocks: 3 in c, 2 taken over
  EXPECT_TRUE(pool.take());
  EXPECT_FALSE(pool.take());  // nothing free, nothing kept
}

TEST(kv_block_pool, a_shared_block_is_free_only_when_its_last_holder_gives_it_back) {
  kv_block_pool pool(4, 4);
  std::vector<int64_t> a{*pool.take(), *pool.take()};
  pool.keep({1, 2, 3, 4, 5, 6}, a);  // one full block and one partial
  auto shared = pool.share(pool.longest_match({1, 2, 3, 4, 5, 9}, 5));
  ASSERT_EQ(shared.blocks.size(), 1u);  // the full block, now held twice
  EXPECT_GE(shared.partial, 0);         // the partial one, held until copied
  std::vector<int64_t> partial{shared.partial};
  pool.give(partial);
  EXPECT_EQ(pool.kept_blocks(), 1);  // the partial block: the kept prefix alone holds it
  EXPECT_EQ(pool.drop_kept(), 1u);
  EXPECT_EQ(pool.free(), 3);  // the shared full block is still held by the sequence
  pool.give(shared.blocks);
  EXPECT_EQ(pool.free(), 4);
}

// take_run: n consecutive blocks, from where asked on (else from block 0), or without a wish
// inside the longest free run; kept prefixes are evicted only while fewer blocks are free than the
// caller lacks (default n).
TEST(kv_block_pool, a_run_of_blocks_goes_where_asked_else_into_the_longest_free_run) {
  kv_block_pool pool(16, 4);
  EXPECT_EQ(pool.take_run(3, 4), (std::vector<int64_t>{4, 5, 6}));
  EXPECT_TRUE(pool.free_range(7, 9));
  EXPECT_FALSE(pool.free_range(6, 2));
  EXPECT_FALSE(pool.free_range(15, 2));                                 // past the pool
  EXPECT_EQ(pool.take_run(4, 5), (std::vector<int64_t>{7, 8, 9, 10}));  // 5, 6 taken: the next free four
  // No wish: the longest free run is 11..15, not at block 0: (5 - 2) / 2 in.
  EXPECT_EQ(pool.take_run(2), (std::vector<int64_t>{12, 13}));
  EXPECT_EQ(pool.take_run(1, 13, -1, /*room=*/2), (std::vector<int64_t>{14}));  // 14, 15 free: room for 2
  std::vector<int64_t> back{14};
  pool.give(back);
  // Room for 3 not from 14 on (14, 15), but from block 0 (0..3): there.
  EXPECT_EQ(pool.take_run(1, 14, -1, /*room=*/3), (std::vector<int64_t>{0}));
  pool.give(back = {0});
  EXPECT_EQ(pool.take_run(1, 14, -1, /*room=*/5), (std::vector<int64_t>{14}));  // room for 5 nowhere: 1 from 14
  pool.give(back = {14});
  EXPECT_EQ(pool.take_run(2, 14), (std::vector<int64_t>{14, 15}));
  EXPECT_EQ(pool.take_run(3, 12), (std::vector<int64_t>{0, 1, 2}));  // nothing from 12 on: from block 0
  EXPECT_EQ(pool.free(), 2);                                         // 3 and 11
  EXPECT_TRUE(pool.take_run(2).empty());                             // no run of 2: nothing taken
  EXPECT_TRUE(pool.take_run(2, 3).empty());
  EXPECT_EQ(pool.free(), 2);
  // A pool full of kept prefixes: a caller lacking one block evicts one (the least recent), whose
  // blocks then make the run; one lacking none evicts nothing.
  kv_block_pool full(6, 4);
  std::vector<int64_t> older, newer;
  for (int64_t b : {0, 1, 2}) older.push_back(*full.take({b}));
  for (int64_t b : {3, 4, 5}) newer.push_back(*full.take({b}));
  full.keep(std::vector<int32_t>(12, 1), older);
  full.keep(std::vector<int32_t>(12, 2), newer);
  EXPECT_TRUE(full.take_run(3, -1, /*needed=*/0).empty());
  EXPECT_EQ(full.kept(), 2u);
  EXPECT_EQ(full.take_run(3, -1, /*needed=*/1), (std::vector<int64_t>{0, 1, 2}));
  EXPECT_EQ(full.kept(), 1u);
  EXPECT_EQ(full.take_run(3), (std::vector<int64_t>{3, 4, 5}));  // 0 free, 3 lacking: the last one goes
  EXPECT_EQ(full.kept(), 0u);
}

TEST(kv_block_pool, a_run_evicts_only_for_the_blocks_the_caller_lacks) {
  // The least recent prefix holds blocks 0 and 3: evicting it gives the one block lacking but no
  // run of two, and the newer prefix stays (no eviction beyond what taking blocks one by one
  // would make). Needed 0 evicts nothing.
  kv_block_pool pool(6, 4);
  std::vector<int64_t> older, newer;
  for (int64_t b : {0, 3}) older.push_back(*pool.take({b}));
  for (int64_t b : {1, 2, 4, 5}) newer.push_back(*pool.take({b}));
  pool.keep(std::vector<int32_t>(8, 1), older);
  pool.keep(std::vector<int32_t>(16, 2), newer);
  EXPECT_TRUE(pool.take_run(2, -1, /*needed=*/0).empty());
  EXPECT_EQ(pool.kept(), 2u);
  EXPECT_TRUE(pool.take_run(2, -1, /*needed=*/1).empty());
  EXPECT_EQ(pool.kept(), 1u);
  EXPECT_EQ(pool.evictions(), 1u);
  EXPECT_EQ(pool.free(), 2);
}

TEST(kv_block_pool, a_block_is_freed_by_evicting_only_the_kept_prefixes_that_alone_hold_it) {
  kv_block_pool pool(4, 4);
  std::vector<int64_t> running{*pool.take({0})}, kept{*pool.take({1}), *pool.take({2})};
  pool.keep(std::vector<int32_t>(8, 1), kept);
  EXPECT_FALSE(pool.evict_holders_of(0));  // a running sequence holds it
  EXPECT_TRUE(pool.evict_holders_of(3));   // already free
  EXPECT_EQ(pool.kept(), 1u);
  // Block 1 shared by a running sequence too: not freed, the prefix stays.
  const auto shared = pool.share(pool.longest_match(std::vector<int32_t>(8, 1), 4));
  ASSERT_EQ(shared.blocks, (std::vector<int64_t>{1}));
  EXPECT_FALSE(pool.evict_holders_of(1));
  EXPECT_EQ(pool.kept(), 1u);
  // Block 2 only the prefix holds: it goes whole (its share of block 1 too).
  EXPECT_TRUE(pool.evict_holders_of(2));
  EXPECT_EQ(pool.kept(), 0u);
  EXPECT_EQ(pool.evictions(), 1u);
  EXPECT_TRUE(pool.free_range(2, 2));
  EXPECT_FALSE(pool.free_range(1, 1));  // still the running sequence's
}

TEST(kv_block_pool, blocks_go_where_asked_else_to_the_middle_of_the_longest_free_run) {
  kv_block_pool pool(16, 4);
  EXPECT_EQ(*pool.take({8}), 8);       // a seat's share: free, so given
  EXPECT_EQ(*pool.take({9, 0}), 9);    // the block after a sequence's last
  EXPECT_EQ(*pool.take({9, 12}), 12);  // taken: the next preference
  EXPECT_EQ(*pool.take(), 0);          // the longest run is 0..7: its start
  // Free now: 1..7, 10..11, 13..15; the longest run 1..7, its middle.
  EXPECT_EQ(*pool.take({-1, 99}), 4);  // preferences out of range are skipped
  std::vector<int64_t> all;
  while (auto b = pool.take()) all.push_back(*b);
  EXPECT_EQ(all.size(), 11u);
  EXPECT_EQ(pool.free(), 0);
}
