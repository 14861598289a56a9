// Unit tests of the checkpoint-template renderers and their JSON; the parity
// with transformers over generated conversations is test_chat_templates.py.
#include "policy/text/chat_template.hpp"

#include <gtest/gtest.h>

#include "byte_tokenizer_fixture.hpp"
#include "policy/text/chat_render.hpp"
#include "policy/text/chat_session.hpp"

using namespace caf_agent::policy;

namespace {

chat_message assistant_calling(json_value args) {
  return chat_message{"assistant", "", {tool_call{"run", std::move(args)}}};
}

}  // namespace

TEST(chat_json, big_integers_stay_exact_and_indent_matches_python) {
  auto v = parse_json(R"({"n": 123456789012345678901234567890, "m": -99999999999999999999, "x": 9223372036854775807})");
  ASSERT_TRUE(v.ok()) << v.error().message;
  EXPECT_TRUE(v->find("n")->is_big_integer());
  EXPECT_FALSE(v->find("x")->is_big_integer());
  EXPECT_EQ(dump_json(*v),
            R"({"n": 123456789012345678901234567890, "m": -99999999999999999999, "x": 9223372036854775807})");
  auto nested = parse_json(R"({"a": [1, {"b": []}], "c": {}})");
  json_dump_options o;
  o.item_separator = ",";
  o.indent = 4;
  // json.dumps({"a": [1, {"b": []}], "c": {}}, indent=4)
  EXPECT_EQ(dump_json(*nested, o),
            "{\n    \"a\": [\n        1,\n        {\n            \"b\": []\n        }\n    ],\n    \"c\": {}\n}");
}

TEST(chat_template, unknown_template_is_refused_with_its_name) {
  auto fmt = chat_format_for_template("{{ messages }}", "my-model/tokenizer_config.json");
  ASSERT_FALSE(fmt.ok());
  EXPECT_NE(fmt.error().message.find("my-model/tokenizer_config.json"), std::string::npos);
  EXPECT_NE(fmt.error().message.find("not one this renderer reproduces exactly"), std::string::npos);
  EXPECT_FALSE(load_chat_format("does/not/exist").ok());
}

TEST(chat_template, qwen25_quotes_string_arguments_qwen3_prints_them_verbatim) {
  std::vector<chat_message> msgs{{"user", "go", {}}, assistant_calling(json_value("{\"cmd\": \"ls\"}"))};
  auto q25 = render_chat_checked(chat_format_of_family(chat_family::qwen2_5), msgs, {}, false);
  ASSERT_TRUE(q25.ok());
  EXPECT_EQ(*q25,
            "<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\n"
            "<|im_start|>user\ngo<|im_end|>\n<|im_start|>assistant\n<tool_call>\n{\"name\": \"run\", "
            "\"arguments\": \"{\\\"cmd\\\": \\\"ls\\\"}\"}\n</tool_call><|im_end|>\n");
  auto q3 = render_chat_checked(chat_format_of_family(chat_family::qwen3), msgs, {}, false);
  ASSERT_TRUE(q3.ok());
  EXPECT_EQ(*q3,
            "<|im_start|>user\ngo<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n<tool_call>\n"
            "{\"name\": \"run\", \"arguments\": {\"cmd\": \"ls\"}}\n</tool_call><|im_end|>\n");
}

TEST(chat_template, llama31_refuses_what_its_template_raises_on) {
  auto fmt = chat_format_of_family(chat_family::llama3_1);
  chat_message two = assistant_calling(json_object{});
  two.tool_calls.push_back(two.tool_calls.front());
  std::vector<chat_message> msgs{{"user", "go", {}}, two};
  auto r = render_chat_checked(fmt, msgs, {}, false);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("single tool-calls"), std::string::npos);
  json_array tools{json_object{{"type", "function"}}};
  std::vector<chat_message> only_system{{"system", "s", {}}};
  EXPECT_FALSE(render_chat_checked(fmt, only_system, tools, true).ok());
  EXPECT_FALSE(render_chat_checked(fmt, {}, {}, true).ok());
  EXPECT_TRUE(render_chat(fmt, msgs, {}, false).empty());
}

TEST(chat_template, llama31_trims_python_whitespace_and_quotes_tool_results) {
  EXPECT_EQ(python_strip("\u3000\x1c a b\u2028\u00a0\n"), "a b");
  EXPECT_EQ(python_strip("\u200b x"), "\u200b x");  // U+200B is not whitespace
  auto fmt = chat_format_of_family(chat_family::llama3_1);
  fmt.bos_token = "<|begin_of_text|>";
  std::vector<chat_message> msgs{
      {"user", " hi\u3000", {}},
      assistant_calling(json_object{{"n", json_value(json_big_integer{"18446744073709551621"})}}),
      {"tool", "a \"b\"", {}}};
  auto r = render_chat_checked(fmt, msgs, {}, true);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(*r,
            "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nCutting Knowledge Date: December 2023\n"
            "Today Date: 26 Jul 2024\n\n<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nhi<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\n{\"name\": \"run\", \"parameters\": "
            "{\"n\": 18446744073709551621}}<|eot_id|><|start_header_id|>ipython<|end_header_id|>\n\n"
            "\"a \\\"b\\\"\"<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n");
}

TEST(chat_template, session_needs_the_family_tokens) {
  auto tok = caf_agent::policy::testing::tiny_tokenizer();
  std::vector<chat_message> prompt{{"user", "hi", {}}};
  auto s = chat_session::start(tok, prompt, {}, chat_format_of_family(chat_family::llama3_1));
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().message.find("<|start_header_id|>"), std::string::npos) << s.error().message;
  auto q = chat_session::start(tok, prompt, {}, chat_format_of_family(chat_family::qwen2_5));
  ASSERT_TRUE(q.ok());
  EXPECT_EQ(tok.decode(q->tokens()),
            "<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a "
            "helpful assistant.<|im_end|>\n<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n");
}
