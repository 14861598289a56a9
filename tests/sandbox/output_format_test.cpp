// tests/sandbox/output_format_test.cpp: the one truncation of agent-visible text
// (sandbox/output_format: tool output and rollout/conversation's observations).
#include "sandbox/output_format.hpp"

#include <gtest/gtest.h>

#include <string>

using namespace caf_agent::sandbox;

namespace {

/// True when every multi-byte UTF-8 character of s is whole.
bool whole_utf8(const std::string& s) {
  return sanitize_utf8(s) == s;
}

}  // namespace

TEST(truncate_middle, short_text_is_unchanged) {
  EXPECT_EQ(truncate_middle("hello", 5), "hello");
  EXPECT_EQ(truncate_middle("", 0), "");
}

TEST(truncate_middle, keeps_half_head_and_half_tail_and_counts_the_rest) {
  std::string text = "HEAD" + std::string(992, 'x') + "TAIL";  // 1000 bytes
  auto cut = truncate_middle(text, 100);
  EXPECT_EQ(cut.substr(0, 4), "HEAD");
  EXPECT_EQ(cut.substr(cut.size() - 4), "TAIL");
  EXPECT_NE(cut.find(truncation_marker(900)), std::string::npos) << cut;
  EXPECT_EQ(cut.size(), 100 + truncation_marker(900).size());
}

TEST(truncate_middle, never_splits_a_character_and_counts_the_dropped_halves) {
  for (const std::string ch : {"\xc3\xa9", "\xe2\x9c\x93", "\xf0\x9f\x98\x80"}) {
    std::string text;
    for (int i = 0; i < 200; ++i) text += ch;
    for (std::size_t limit : {7u, 50u, 51u, 101u, 256u}) {
      auto cut = truncate_middle(text, limit);
      EXPECT_TRUE(whole_utf8(cut)) << ch.size() << "-byte characters, limit " << limit;
      // Kept bytes + omitted bytes = the text's size.
      auto at = cut.find("[... output truncated: ");
      ASSERT_NE(at, std::string::npos);
      auto omitted = std::stoull(cut.substr(at + 23));
      EXPECT_EQ(cut.size() - truncation_marker(omitted).size() + omitted, text.size());
      EXPECT_LE(cut.size() - truncation_marker(omitted).size(), limit);
    }
  }
}

TEST(truncate_middle, the_streaming_buffer_cuts_the_same_way) {
  std::string text;
  for (int i = 0; i < 500; ++i) text += "\xe2\x9c\x93";
  capped_buffer b(101);
  for (std::size_t i = 0; i < text.size(); i += 7) b.append(std::string_view(text).substr(i, 7));
  EXPECT_EQ(b.take(), truncate_middle(text, 101));
}

TEST(truncate_middle, observations_of_long_tool_output_keep_both_ends) {
  std::string text = "error: first\n" + std::string(100000, 'y') + "\nsummary: last";
  auto obs = to_observation(text, 1000);
  EXPECT_NE(obs.find("error: first"), std::string::npos);
  EXPECT_NE(obs.find("summary: last"), std::string::npos);
  EXPECT_NE(obs.find("bytes omitted"), std::string::npos);
  EXPECT_LT(obs.size(), 1100u);
}
