#include "policy/text/json.hpp"

#include <gtest/gtest.h>

using namespace caf_agent::policy;

TEST(json, parses_nested_values_and_keeps_member_order) {
  auto v = parse_json(R"({"b": [1, -2.5, true, null], "a": {"x": "y"}, "n": 1e3})");
  ASSERT_TRUE(v.ok()) << v.error().message;
  const auto& obj = v->as_object();
  ASSERT_EQ(obj.size(), 3u);
  EXPECT_EQ(obj[0].first, "b");
  EXPECT_EQ(obj[1].first, "a");
  EXPECT_EQ(v->find("b")->as_array()[0].as_integer(), 1);
  EXPECT_DOUBLE_EQ(v->find("b")->as_array()[1].as_double(), -2.5);
  EXPECT_TRUE(v->find("b")->as_array()[3].is_null());
  EXPECT_EQ(v->find("a")->find("x")->as_string(), "y");
  EXPECT_DOUBLE_EQ(v->find("n")->as_double(), 1000.0);
}

TEST(json, decodes_escapes_and_surrogate_pairs) {
  auto v = parse_json(R"("a\"\\\/\b\f\n\r\t\u00e9\u4e2d\ud83d\ude80")");
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(v->as_string(), "a\"\\/\b\f\n\r\t\xC3\xA9\xE4\xB8\xAD\xF0\x9F\x9A\x80");
  auto lone = parse_json(R"("x\ud800y")");
  ASSERT_TRUE(lone.ok());
  EXPECT_EQ(lone->as_string(), "x\xEF\xBF\xBDy");  // U+FFFD
}

TEST(json, errors_name_the_offset) {
  auto v = parse_json(R"({"a": 1,, "b": 2})");
  ASSERT_FALSE(v.ok());
  EXPECT_NE(v.error().message.find("offset 8"), std::string::npos) << v.error().message;
  for (const char* bad :
       {"", "{", "[1 2]", "\"abc", "{\"a\" 1}", "tru", "01x", "{\"a\":1} x", "\"\\q\"", "\"\\u12G4\"", "-", "1.", "1e"})
    EXPECT_FALSE(parse_json(bad).ok()) << bad;
}

TEST(json, trailing_commas_and_raw_newlines_only_when_lenient) {
  json_parse_options lenient;
  lenient.allow_trailing_commas = true;
  lenient.allow_control_chars = true;
  EXPECT_FALSE(parse_json("[1, 2,]").ok());
  EXPECT_FALSE(parse_json("\"a\nb\"").ok());
  EXPECT_TRUE(parse_json("[1, 2,]", lenient).ok());
  EXPECT_TRUE(parse_json("{\"a\": 1 , }", lenient).ok());
  EXPECT_EQ(parse_json("\"a\nb\"", lenient)->as_string(), "a\nb");
}

TEST(json, depth_limit_is_an_error_not_a_crash) {
  std::string deep(100000, '[');
  auto v = parse_json(deep);
  ASSERT_FALSE(v.ok());
  EXPECT_NE(v.error().message.find("nesting"), std::string::npos);
}

TEST(json, dumps_like_python_json_dumps) {
  auto v = parse_json(R"({"s": "é\n\"\u0001", "i": -3, "r": [1.0, 0.1, 1e-7, 1e16, 123456.5, 2.5e-5]})");
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(dump_json(*v), R"({"s": "é\n\"\u0001", "i": -3, "r": [1.0, 0.1, 1e-07, 1e+16, 123456.5, 2.5e-05]})");
  EXPECT_EQ(dump_json(*v, {",", ":"}).substr(0, 10), R"({"s":"é\n)");
}

TEST(json, prefix_parse_reports_end) {
  auto p = parse_json_prefix("  {\"a\": [1]} trailing", 0);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->end, 12u);
}
