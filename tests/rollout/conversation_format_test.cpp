// rollout::conversation renders with the chat format it is given (the
// checkpoint's own template), in token mode.
#include <gtest/gtest.h>

#include "../policy/text/byte_tokenizer_fixture.hpp"
#include "rollout/conversation.hpp"

using namespace caf_agent;

TEST(conversation_format, prompt_tokens_follow_the_checkpoint_format) {
  auto tok = policy::testing::tiny_tokenizer();
  policy::json_array tools{
      policy::json_object{{"type", "function"}, {"function", policy::json_object{{"name", "bash"}}}}};
  rollout::conversation conv("skill", "task", tools, {131072, 16384}, &tok,
                             policy::chat_format_of_family(policy::chat_family::qwen2_5));
  ASSERT_TRUE(conv.token_error().empty()) << conv.token_error();
  EXPECT_EQ(tok.decode(conv.prompt_tokens()),
            "<|im_start|>system\nskill\n\n# Tools\n\nYou may call one or more functions to assist with the user "
            "query.\n\nYou are provided with function signatures within <tools></tools> XML tags:\n<tools>\n"
            "{\"type\": \"function\", \"function\": {\"name\": \"bash\"}}\n</tools>\n\nFor each function call, "
            "return a json object with function name and arguments within <tool_call></tool_call> XML tags:\n"
            "<tool_call>\n{\"name\": <function-name>, \"arguments\": <args-json-object>}\n</tool_call><|im_end|>\n"
            "<|im_start|>user\ntask<|im_end|>\n<|im_start|>assistant\n");
}

TEST(conversation_format, a_format_the_tokenizer_cannot_encode_is_a_token_error) {
  auto tok = policy::testing::tiny_tokenizer();  // ChatML tokens only
  rollout::conversation conv("skill", "task", {}, {131072, 16384}, &tok,
                             policy::chat_format_of_family(policy::chat_family::llama3_1));
  EXPECT_NE(conv.token_error().find("<|start_header_id|>"), std::string::npos) << conv.token_error();
}
