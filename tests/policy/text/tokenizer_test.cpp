#include "policy/text/tokenizer.hpp"

#include <gtest/gtest.h>

#include <algorithm>

#include "byte_tokenizer_fixture.hpp"

using namespace caf_agent::policy;
using caf_agent::policy::testing::tiny_tokenizer;
using caf_agent::policy::testing::tiny_tokenizer_json;

TEST(tokenizer, merges_special_tokens_and_roundtrip) {
  auto tok = tiny_tokenizer();
  auto ids = tok.encode("hello world<|im_end|>");
  auto hel = *tok.token_to_id("hel"), lo = *tok.token_to_id("lo"), w = *tok.token_to_id("Ġw");
  auto im_end = *tok.token_to_id("<|im_end|>");
  ASSERT_GE(ids.size(), 4u);
  EXPECT_EQ(ids[0], hel);
  EXPECT_EQ(ids[1], lo);
  EXPECT_EQ(ids[2], w);
  EXPECT_EQ(ids.back(), im_end);
  EXPECT_TRUE(tok.is_special(im_end));
  EXPECT_EQ(tok.decode(ids), "hello world<|im_end|>");
  EXPECT_EQ(tok.decode(ids, true), "hello world");
}

TEST(tokenizer, arbitrary_bytes_roundtrip_and_decode_repairs_utf8) {
  auto tok = tiny_tokenizer();
  std::string bytes = "a\xff\xfe\x80z \xe4\xb8\xad";
  auto ids = tok.encode(bytes);
  EXPECT_EQ(tok.decode_bytes(ids), bytes);
  EXPECT_EQ(tok.decode(ids), "a\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBDz \xe4\xb8\xad");
  // Half a character at the end (streaming) stays raw in decode_bytes.
  std::vector<token_id> half(ids.begin(), ids.end() - 1);
  EXPECT_EQ(tok.decode_bytes(half), bytes.substr(0, bytes.size() - 1));
}

TEST(tokenizer, unknown_ids_are_skipped_in_decode) {
  auto tok = tiny_tokenizer();
  std::vector<token_id> ids = {*tok.token_to_id("hel"), -5, 1 << 30, *tok.token_to_id("lo")};
  EXPECT_EQ(tok.decode(ids), "hello");
}

TEST(tokenizer, unsupported_configurations_name_the_field) {
  auto wp = tokenizer::from_json_text(tiny_tokenizer_json("WordPiece"));
  ASSERT_FALSE(wp.ok());
  EXPECT_NE(wp.error().message.find("model.type"), std::string::npos) << wp.error().message;
  auto meta = tokenizer::from_json_text(tiny_tokenizer_json("BPE", R"({"type": "Metaspace"})"));
  ASSERT_FALSE(meta.ok());
  EXPECT_NE(meta.error().message.find("pre_tokenizer.type"), std::string::npos) << meta.error().message;
  auto regex = tokenizer::from_json_text(tiny_tokenizer_json(
      "BPE",
      R"({"type": "Sequence", "pretokenizers": [{"type": "Split", "pattern": {"Regex": "\\w+"}, "behavior": "Isolated", "invert": false}, {"type": "ByteLevel", "use_regex": false}]})"));
  ASSERT_FALSE(regex.ok());
  EXPECT_NE(regex.error().message.find("pretokenizers[0].pattern.Regex"), std::string::npos) << regex.error().message;
  auto broken = tokenizer::from_json_text("{\"model\": ");
  ASSERT_FALSE(broken.ok());
  EXPECT_NE(broken.error().message.find("offset"), std::string::npos);
  EXPECT_FALSE(tokenizer::from_file("does/not/exist.json").ok());
}

namespace {

// The tiny tokenizer plus one added token with the given flags.
tokenizer with_added(const std::string& content, bool lstrip, bool rstrip, bool single_word) {
  auto root = parse_json(tiny_tokenizer_json());
  auto& added = const_cast<json_array&>(root->find("added_tokens")->as_array());
  added.push_back(json_object{{"id", 1000},
                              {"content", content},
                              {"special", true},
                              {"lstrip", lstrip},
                              {"rstrip", rstrip},
                              {"single_word", single_word},
                              {"normalized", false}});
  auto t = tokenizer::from_json_text(dump_json(*root));
  if (!t) throw std::runtime_error(t.error().message);
  return *t;
}

}  // namespace

TEST(tokenizer, added_token_strip_absorbs_unicode_whitespace) {
  auto tok = with_added("<m>", true, true, false);
  // "a\u3000<m>\u00a0\u2028b": both ideographic space and NBSP + LS are absorbed.
  auto ids = tok.encode("a\u3000<m>\u00a0\u2028b");
  ASSERT_EQ(ids.size(), 3u);
  EXPECT_EQ(ids[1], 1000);
  EXPECT_EQ(tok.decode(std::vector<token_id>{ids[0]}), "a");
  EXPECT_EQ(tok.decode(std::vector<token_id>{ids[2]}), "b");
  // U+200B ZERO WIDTH SPACE is not White_Space: kept.
  EXPECT_EQ(tok.encode("\u200b<m>").size(), 4u);
}

TEST(tokenizer, single_word_uses_unicode_word_characters) {
  auto tok = with_added("ab", false, false, true);
  auto count = [&](const std::string& text) {
    auto ids = tok.encode(text);
    return std::count(ids.begin(), ids.end(), 1000);
  };
  EXPECT_EQ(count("ab"), 1);
  EXPECT_EQ(count("\u3000ab\u00a0"), 1);
  EXPECT_EQ(count("\u00e9ab"), 0);   // é is a word character
  EXPECT_EQ(count("ab\u0301"), 0);   // so is a combining mark
  EXPECT_EQ(count("\u2014ab-"), 1);  // dashes are not
  EXPECT_EQ(count("\xe2\x80\x8d"
                  "ab"),
            0);  // ZWJ (Join_Control) is
  // A rejected match is skipped whole: "aab b" has no "ab" at a word boundary.
  EXPECT_EQ(count("aab ab"), 1);
}
