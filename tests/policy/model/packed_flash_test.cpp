// decoder::describe_packed_flash: the cache sequences a packed prefill hands flash over the slot
// layout or a paged cache's runs of blocks (run on the GPU only; the layout itself is host
// arithmetic, checked here). Each new key must land at its slot's row for its head and position,
// and each sequence's queries must be the part's tokens under that head, reading that slot's keys
// up to the part's last position.
#include <gtest/gtest.h>

#include <set>
#include <vector>

#include <torch/types.h>

#include "policy/model/decoder.hpp"

using caf_agent::policy::decoder;

namespace {

TEST(packed_flash, sequences_are_head_major_and_read_only_their_own_slot) {
  const int64_t k = 2, c = 100, slots = 5;
  // A fresh prompt, a continuation of a cached prefix, a one-token part; slots out of order.
  const std::vector<decoder::prefill_part> parts = {{3, 0, 4, {}}, {0, 10, 2, {}}, {4, 7, 1, {}}};
  const int64_t p = 3, t = 7, x = p * k;
  const auto layout = decoder::describe_packed_flash(parts, k, c, slots);
  ASSERT_EQ(layout.seqs.size(), static_cast<size_t>(3 * x + 2));
  const int32_t* cu_q = layout.seqs.data();
  const int32_t* cu_k = cu_q + x + 1;
  const int32_t* used = cu_k + x + 1;
  // Queries: head 0's parts end to end (0, 4, 6), then head 1's from T = 7.
  EXPECT_EQ(std::vector<int32_t>(cu_q, cu_q + x + 1), (std::vector<int32_t>{0, 4, 6, 7, 11, 13, 14}));
  // Keys: (slot * k + head) * c; used: start + length.
  EXPECT_EQ(std::vector<int32_t>(cu_k, cu_k + x), (std::vector<int32_t>{600, 0, 800, 700, 100, 900}));
  EXPECT_EQ(std::vector<int32_t>(used, used + x), (std::vector<int32_t>{4, 12, 8, 4, 12, 8}));
  EXPECT_EQ(layout.max_q, 4);
  EXPECT_EQ(layout.max_k, 12);
  // Rows: head-major, each token at its slot's head row + position; all distinct and inside
  // the sequence flash reads for it.
  ASSERT_EQ(layout.rows.size(), static_cast<size_t>(k * t));
  EXPECT_EQ(layout.rows, (std::vector<int64_t>{600, 601, 602, 603, 10, 11, 807, 700, 701, 702, 703, 110, 111, 907}));
  EXPECT_EQ(std::set<int64_t>(layout.rows.begin(), layout.rows.end()).size(), layout.rows.size());
  for (int64_t s = 0; s < x; ++s)
    for (int32_t q = cu_q[s]; q < cu_q[s + 1]; ++q) {
      const int64_t row = layout.rows[static_cast<size_t>(q)];
      EXPECT_GE(row, cu_k[s]);
      EXPECT_LT(row, cu_k[s] + used[s]);
    }
}

TEST(packed_flash, one_part_is_one_sequence_per_kv_head) {
  const auto layout = decoder::describe_packed_flash({{1, 5, 3, {}}}, 2, 16, 2);
  EXPECT_EQ(layout.seqs, (std::vector<int32_t>{0, 3, 6, 32, 48, 64, 8, 8}));
  EXPECT_EQ(layout.rows, (std::vector<int64_t>{37, 38, 39, 53, 54, 55}));
  EXPECT_EQ(layout.max_q, 3);
  EXPECT_EQ(layout.max_k, 8);
}

TEST(packed_flash, paged_parts_read_their_run_of_blocks_in_place) {
  // A paged cache [k = 2, blocks = 10, block size = 4, e]: head j's copy of block b starts at row
  // (j * 10 + b) * 4. Part 0 holds blocks 6-7 (positions 0..5 of a fresh prompt), part 1 blocks
  // 1-3 (a continuation at 9..10 of a cached prefix); blocks past the part's end may lie anywhere.
  const std::vector<decoder::prefill_part> parts = {{0, 0, 6, {6, 7}}, {0, 9, 2, {1, 2, 3, 9}}};
  const auto layout = decoder::describe_packed_flash(parts, 2, 4, 10, /*paged=*/true);
  const int32_t* cu_q = layout.seqs.data();
  const int32_t* cu_k = cu_q + 5;
  const int32_t* used = cu_k + 5;
  EXPECT_EQ(std::vector<int32_t>(cu_q, cu_q + 5), (std::vector<int32_t>{0, 6, 8, 14, 16}));
  EXPECT_EQ(std::vector<int32_t>(cu_k, cu_k + 5), (std::vector<int32_t>{24, 4, 64, 44, 80}));
  EXPECT_EQ(std::vector<int32_t>(used, used + 4), (std::vector<int32_t>{6, 11, 6, 11}));
  EXPECT_EQ(layout.rows, (std::vector<int64_t>{24, 25, 26, 27, 28, 29, 13, 14, 64, 65, 66, 67, 68, 69, 53, 54}));
  EXPECT_EQ(layout.max_k, 11);
}

TEST(packed_flash, a_paged_part_of_two_runs_is_refused) {
  // Blocks 1 and 3 hold positions 0..7: head 0's keys are not one stretch, so in place is wrong.
  EXPECT_THROW(decoder::describe_packed_flash({{0, 6, 2, {1, 3}}}, 2, 4, 10, /*paged=*/true), c10::Error);
}

// decoder::describe_gather: the rows a gathering prefill (an e4m3 cache, or paged parts in several
// runs) writes and reads, built with tensor ops from the parts' tables. Checked against the rows
// position by position: head j of position q at (slot * k + j) * c + q (slots) or (j * blocks +
// block of q) * c + q % c (paged), token-major, parts end to end.
std::vector<int64_t> rows_of(const decoder::prefill_part& part, int64_t from, int64_t k, int64_t c, int64_t blocks,
                             bool paged) {
  std::vector<int64_t> out;
  for (int64_t q = from; q < part.start + part.length; ++q)
    for (int64_t j = 0; j < k; ++j)
      out.push_back(paged ? (j * blocks + part.blocks[static_cast<size_t>(q / c)]) * c + q % c
                          : (part.slot * k + j) * c + q);
  return out;
}

std::vector<int64_t> values(const torch::Tensor& t) {
  auto cpu = t.to(torch::kCPU).contiguous();
  EXPECT_EQ(cpu.scalar_type(), torch::kInt64);
  return {cpu.data_ptr<int64_t>(), cpu.data_ptr<int64_t>() + cpu.numel()};
}

TEST(packed_flash, gathered_rows_are_each_parts_positions_under_every_head) {
  // Slots: a fresh prompt, a continuation, a one-token part; slots out of order.
  const std::vector<decoder::prefill_part> slots = {{3, 0, 4, {}}, {0, 10, 2, {}}, {4, 7, 1, {}}};
  // Paged: blocks scattered and out of order, a part ending inside a block, spare blocks past the end.
  const std::vector<decoder::prefill_part> paged = {{0, 0, 6, {6, 9}}, {0, 9, 2, {1, 8, 3, 2}}, {0, 3, 5, {4, 0}}};
  for (const bool is_paged : {false, true}) {
    const auto& parts = is_paged ? paged : slots;
    const int64_t k = 2, c = is_paged ? 4 : 100, n = is_paged ? 10 : 5;
    const auto layout = decoder::describe_gather(parts, k, c, n, is_paged, torch::kCPU);
    std::vector<int64_t> want_rows, want_keys;
    for (const auto& part : parts) {
      for (int64_t row : rows_of(part, part.start, k, c, n, is_paged)) want_rows.push_back(row);
      for (int64_t row : rows_of(part, 0, k, c, n, is_paged)) want_keys.push_back(row);
    }
    EXPECT_EQ(values(layout.rows_t), want_rows) << (is_paged ? "paged" : "slots");
    EXPECT_EQ(values(layout.keys_s), want_keys) << (is_paged ? "paged" : "slots");
  }
  // One small case spelled out: slot 1 of c = 8, k = 2, positions 2..3 new, 0..3 read.
  const auto one = decoder::describe_gather({{1, 2, 2, {}}}, 2, 8, 2, false, torch::kCPU);
  EXPECT_EQ(values(one.rows_t), (std::vector<int64_t>{18, 26, 19, 27}));
  EXPECT_EQ(values(one.keys_s), (std::vector<int64_t>{16, 24, 17, 25, 18, 26, 19, 27}));
}

TEST(packed_flash, a_paged_part_short_of_blocks_is_refused) {
  EXPECT_THROW(decoder::describe_gather({{0, 4, 5, {1, 2}}}, 2, 4, 10, /*paged=*/true, torch::kCPU), c10::Error);
}

}  // namespace
