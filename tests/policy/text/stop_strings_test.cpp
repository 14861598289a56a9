#include "policy/text/stop_strings.hpp"

#include <gtest/gtest.h>

#include <optional>

#include "byte_tokenizer_fixture.hpp"

using namespace caf_agent::policy;
using caf_agent::policy::testing::tiny_tokenizer;

namespace {

// Feeds `text`'s tokens one at a time as an engine does; the number of tokens generated when
// the check first said stop, or nullopt.
std::optional<size_t> first_stop(const tokenizer& tok, const std::string& text, std::vector<std::string> stops) {
  auto check = watch_stop_strings(tok, std::move(stops));
  const auto ids = tok.encode(text);
  std::vector<token_id> generated;
  for (auto id : ids) {
    generated.push_back(id);
    if (check(generated)) return generated.size();
  }
  return std::nullopt;
}

}  // namespace

TEST(stop_strings, a_match_that_ends_inside_a_token_stops_at_that_token) {
  auto tok = tiny_tokenizer();
  // "hello world" is hel | lo | Ġw | o | r | l | d: "he" ends inside the first token, "ll"
  // spans the first two, "o wo" spans three; none is a suffix of the bytes decoded so far.
  ASSERT_EQ(tok.encode("hello world").size(), 7u);
  EXPECT_EQ(first_stop(tok, "hello world", {"he"}), 1u);
  EXPECT_EQ(first_stop(tok, "hello world", {"ll"}), 2u);
  EXPECT_EQ(first_stop(tok, "hello world", {"o wo"}), 4u);
  EXPECT_EQ(first_stop(tok, "hello world", {"xyz", "rl"}), 6u);
  EXPECT_EQ(first_stop(tok, "hello world", {"world!"}), std::nullopt);
  EXPECT_EQ(first_stop(tok, "hello world<|im_end|>", {"d<|im_"}), 8u);  // special tokens' text counts
}

TEST(stop_strings, a_long_reply_is_scanned_once_and_still_matches_late) {
  auto tok = tiny_tokenizer();
  std::string text;
  for (int i = 0; i < 5000; ++i) text += "hello ";
  text += "STOP";
  const auto n = tok.encode(text).size();
  EXPECT_EQ(first_stop(tok, text, {"STOP"}), n);
  EXPECT_EQ(first_stop(tok, text, {"o h"}), 4u);  // hel | lo | Ġ | hel: ends inside the fourth
}

TEST(stop_strings, a_shorter_list_starts_the_scan_over_and_no_stops_give_no_check) {
  auto tok = tiny_tokenizer();
  EXPECT_FALSE(watch_stop_strings(tok, {}));
  EXPECT_FALSE(watch_stop_strings(tok, {"", ""}));
  auto check = watch_stop_strings(tok, {"lo"});
  const auto ids = tok.encode("hello");  // hel | lo
  EXPECT_FALSE(check({ids[0]}));
  EXPECT_TRUE(check(ids));
  EXPECT_FALSE(check({ids[0]}));  // a new list: "hel" alone does not contain "lo"
}
