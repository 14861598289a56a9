#include "policy/text/tool_call_parser.hpp"

#include <gtest/gtest.h>

using namespace caf_agent::policy;

namespace {

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

const parsed_tool_call& only_call(const assistant_turn& t) {
  EXPECT_EQ(t.calls.size(), 1u);
  return t.calls.at(0);
}

}  // namespace

TEST(tool_call_parser, well_formed_call_and_content) {
  auto t = parse_assistant_turn(
      "Let me check.\n<tool_call>\n{\"name\": \"bash\", \"arguments\": {\"cmd\": \"ls\"}}\n</tool_call>");
  EXPECT_EQ(t.content, "Let me check.");
  const auto& c = only_call(t);
  ASSERT_TRUE(c.ok) << c.error;
  EXPECT_EQ(c.name, "bash");
  EXPECT_EQ(c.arguments.find("cmd")->as_string(), "ls");
  EXPECT_FALSE(t.is_final_answer());
}

TEST(tool_call_parser, no_tool_call_is_the_final_answer) {
  auto t = parse_assistant_turn("  Done: the kernel is 2x faster.  ");
  EXPECT_TRUE(t.is_final_answer());
  EXPECT_EQ(t.content, "Done: the kernel is 2x faster.");
}

TEST(tool_call_parser, several_calls_in_order) {
  auto t = parse_assistant_turn(
      "<tool_call>{\"name\": \"a\", \"arguments\": {}}</tool_call>\ntext\n"
      "<tool_call>{\"name\": \"b\", \"arguments\": {\"x\": 1}}</tool_call>");
  ASSERT_EQ(t.calls.size(), 2u);
  EXPECT_EQ(t.calls[0].name, "a");
  EXPECT_EQ(t.calls[1].name, "b");
  EXPECT_EQ(t.calls[1].index, 2u);
  EXPECT_EQ(t.content, "text");
}

TEST(tool_call_parser, missing_closing_tag_at_end_of_text) {
  auto turn = parse_assistant_turn("<tool_call>\n{\"name\": \"bash\", \"arguments\": {\"cmd\": \"make\"}}\n");
  const auto& c = only_call(turn);
  EXPECT_TRUE(c.ok) << c.error;
  EXPECT_EQ(c.arguments.find("cmd")->as_string(), "make");
}

TEST(tool_call_parser, missing_closing_tag_before_next_call) {
  auto t = parse_assistant_turn("<tool_call>{\"name\": \"a\"}\n<tool_call>{\"name\": \"b\"}</tool_call>");
  ASSERT_EQ(t.calls.size(), 2u);
  EXPECT_TRUE(t.calls[0].ok && t.calls[1].ok);
  EXPECT_EQ(t.calls[1].name, "b");
}

TEST(tool_call_parser, arguments_as_json_string) {
  auto turn = parse_assistant_turn(
      "<tool_call>{\"name\": \"bash\", \"arguments\": \"{\\\"cmd\\\": \\\"pwd\\\"}\"}</tool_call>");
  const auto& c = only_call(turn);
  ASSERT_TRUE(c.ok) << c.error;
  EXPECT_EQ(c.arguments.find("cmd")->as_string(), "pwd");
}

TEST(tool_call_parser, trailing_commas_whitespace_and_raw_newlines) {
  auto turn = parse_assistant_turn(
      "<tool_call>  \n {\"name\": \"write_file\", \"arguments\": {\"path\": \"a.cu\", \"content\": "
      "\"line1\nline2\",},}  \n\n</tool_call>");
  const auto& c = only_call(turn);
  ASSERT_TRUE(c.ok) << c.error;
  EXPECT_EQ(c.arguments.find("content")->as_string(), "line1\nline2");
}

TEST(tool_call_parser, code_fence_inside_block) {
  auto turn = parse_assistant_turn("<tool_call>\n```json\n{\"name\": \"bash\", \"arguments\": {}}\n```\n</tool_call>");
  const auto& c = only_call(turn);
  EXPECT_TRUE(c.ok) << c.error;
}

TEST(tool_call_parser, closing_tag_inside_a_string_argument) {
  auto turn = parse_assistant_turn(
      "<tool_call>{\"name\": \"write_file\", \"arguments\": {\"content\": \"a </tool_call> b\"}}</tool_call>");
  const auto& c = only_call(turn);
  ASSERT_TRUE(c.ok) << c.error;
  EXPECT_EQ(c.arguments.find("content")->as_string(), "a </tool_call> b");
}

TEST(tool_call_parser, missing_arguments_means_empty_object) {
  auto turn = parse_assistant_turn("<tool_call>{\"name\": \"list\"}</tool_call>");
  const auto& c = only_call(turn);
  ASSERT_TRUE(c.ok);
  EXPECT_TRUE(c.arguments.is_object() && c.arguments.as_object().empty());
}

TEST(tool_call_parser, malformed_calls_become_error_values) {
  struct bad_case {
    const char* text;
    const char* expect;
  };
  const bad_case cases[] = {
      {"<tool_call>{\"name\": \"bash\", \"arguments\": {\"cmd\": }}</tool_call>", "invalid JSON at offset 38"},
      {"<tool_call></tool_call>", "empty tool call"},
      {"<tool_call>   ", "empty tool call"},
      {"<tool_call>{\"arguments\": {}}</tool_call>", "missing \"name\""},
      {"<tool_call>{\"name\": 3}</tool_call>", "\"name\" must be a non-empty string"},
      {"<tool_call>{\"name\": \"\"}</tool_call>", "\"name\" must be a non-empty string"},
      {"<tool_call>{\"name\": \"a\", \"arguments\": [1]}</tool_call>", "must be a JSON object, got array"},
      {"<tool_call>{\"name\": \"a\", \"arguments\": \"not json\"}</tool_call>", "is a string that is not JSON"},
      {"<tool_call>{\"name\": \"a\", \"arguments\": \"[1, 2]\"}</tool_call>", "must be a JSON object"},
      {"<tool_call>[\"bash\", \"ls\"]</tool_call>", "expected a JSON object, got array"},
      {"<tool_call>{\"name\": \"a\"}} extra</tool_call>", "unexpected text after the JSON object"},
      {"<tool_call>bash ls -la</tool_call>", "invalid JSON at offset 0"},
      {"<tool_call>{\"name\": \"a\", \"arguments\": {\"x\": 1}</tool_call>", "invalid JSON"},
      {"<tool_call>{'name': 'a'}</tool_call>", "expected a string key"},
  };
  for (const auto& bc : cases) {
    auto t = parse_assistant_turn(bc.text);
    ASSERT_EQ(t.calls.size(), 1u) << bc.text;
    const auto& c = t.calls[0];
    EXPECT_FALSE(c.ok) << bc.text;
    EXPECT_TRUE(contains(c.error, bc.expect)) << bc.text << " -> " << c.error;
    EXPECT_EQ(tool_call_error_text(c).rfind("tool call 1: ", 0), 0u);
  }
}

TEST(tool_call_parser, a_bad_call_does_not_hide_the_good_ones) {
  auto t = parse_assistant_turn("<tool_call>{\"name\": \"a\",, }</tool_call><tool_call>{\"name\": \"b\"}</tool_call>");
  ASSERT_EQ(t.calls.size(), 2u);
  EXPECT_FALSE(t.calls[0].ok);
  EXPECT_TRUE(contains(tool_call_error_text(t.calls[0]), "tool call 1: invalid JSON at offset 13")) << t.calls[0].error;
  EXPECT_TRUE(t.calls[1].ok);
}

TEST(tool_call_parser, llama31_turn_is_one_json_call) {
  auto fmt = chat_format_of_family(chat_family::llama3_1);
  auto turn = parse_assistant_turn(fmt, "{\"name\": \"bash\", \"parameters\": {\"cmd\": \"ls\"}}");
  ASSERT_EQ(turn.calls.size(), 1u);
  EXPECT_TRUE(turn.calls[0].ok);
  EXPECT_EQ(turn.calls[0].name, "bash");
  EXPECT_EQ(dump_json(turn.calls[0].arguments), "{\"cmd\": \"ls\"}");
  auto tagged = parse_assistant_turn(fmt, "<|python_tag|>{\"name\": \"x\", \"parameters\": {}}");
  ASSERT_EQ(tagged.calls.size(), 1u);
  EXPECT_TRUE(tagged.calls[0].ok);
  auto prose = parse_assistant_turn(fmt, " The kernel is 2x faster. ");
  EXPECT_TRUE(prose.is_final_answer());
  EXPECT_EQ(prose.content, "The kernel is 2x faster.");
  auto broken = parse_assistant_turn(fmt, "{\"name\": \"bash\", \"parameters\": {\"cmd\": }");
  ASSERT_EQ(broken.calls.size(), 1u);
  EXPECT_FALSE(broken.calls[0].ok);
  EXPECT_NE(tool_call_error_text(broken.calls[0]).find("invalid JSON"), std::string::npos);
  auto trailing = parse_assistant_turn(fmt, "{\"name\": \"a\"} and more");
  ASSERT_EQ(trailing.calls.size(), 1u);
  EXPECT_FALSE(trailing.calls[0].ok);
  // ChatML families keep <tool_call> blocks.
  auto qwen = parse_assistant_turn(chat_format_of_family(chat_family::qwen2_5),
                                   "x\n<tool_call>\n{\"name\": \"a\", \"arguments\": {}}\n</tool_call>");
  ASSERT_EQ(qwen.calls.size(), 1u);
  EXPECT_EQ(qwen.content, "x");
}
