#include "policy/text/pre_tokenizer.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

using namespace caf_agent::policy;

namespace {

std::vector<std::string> split(std::string_view text, const split_pattern& p) {
  std::vector<byte_span> spans;
  split_pretokens(text, p, spans);
  std::vector<std::string> out;
  for (auto [b, e] : spans) out.emplace_back(text.substr(b, e - b));
  return out;
}

split_pattern qwen() {
  return *recognize_split_regex(
      R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)");
}

using parts = std::vector<std::string>;

}  // namespace

TEST(pre_tokenizer, gpt2_words_numbers_and_contractions) {
  auto p = gpt2_split_pattern();
  EXPECT_EQ(split("I'm here 123 times", p), (parts{"I", "'m", " here", " 123", " times"}));
  EXPECT_EQ(split("DON'T", p), (parts{"DON", "'", "T"}));  // case-sensitive
  EXPECT_EQ(split("a+=b;", p), (parts{"a", "+=", "b", ";"}));
}

TEST(pre_tokenizer, space_runs_leave_one_space_for_the_next_word) {
  auto p = gpt2_split_pattern();
  EXPECT_EQ(split("a   b", p), (parts{"a", "  ", " b"}));
  EXPECT_EQ(split("a b", p), (parts{"a", " b"}));
  EXPECT_EQ(split("a   ", p), (parts{"a", "   "}));  // at the end: whole run
  EXPECT_EQ(split(" \n x", p), (parts{" \n", " x"}));
}

TEST(pre_tokenizer, qwen_newline_rules_and_single_digits) {
  auto p = qwen();
  EXPECT_EQ(split("x = 2024;\n\n  y", p), (parts{"x", " =", " ", "2", "0", "2", "4", ";\n\n", " ", " y"}));
  EXPECT_EQ(split("a \n \n b", p), (parts{"a", " \n \n", " b"}));
  EXPECT_EQ(split("DON'T", p), (parts{"DON", "'T"}));  // case-insensitive
  EXPECT_EQ(split("(foo", p), (parts{"(foo"}));        // any non-letter prefix
  EXPECT_EQ(split("\nfoo", p), (parts{"\n", "foo"}));  // except newlines
}

TEST(pre_tokenizer, unicode_letters_numbers_and_spaces) {
  auto p = qwen();
  EXPECT_EQ(split("中文 测试", p), (parts{"中文", " 测试"}));
  EXPECT_EQ(split("a\u00a0b", p), (parts{"a", "\u00a0b"}));
  EXPECT_EQ(split("x\u3000\u3000y", p), (parts{"x", "\u3000", "\u3000y"}));
  EXPECT_EQ(split("🚀🔥 ok", p), (parts{"🚀🔥", " ok"}));
  EXPECT_EQ(split("٣x", p), (parts{"٣", "x"}));  // Arabic-Indic digit is \p{N}
}

TEST(pre_tokenizer, invalid_utf8_is_kept_and_covered) {
  std::string text = "ab\xff\xfe cd";
  std::vector<byte_span> spans;
  split_pretokens(text, qwen(), spans);
  size_t pos = 0;
  for (auto [b, e] : spans) {
    EXPECT_EQ(b, pos);
    pos = e;
  }
  EXPECT_EQ(pos, text.size());
}

TEST(pre_tokenizer, unknown_regex_is_an_error) {
  auto r = recognize_split_regex("\\w+");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("\\w+"), std::string::npos);
}
