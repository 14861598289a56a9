#pragma once
// serving/openai_json.hpp: chat_request / chat_response to and from the JSON of OpenAI's
// /v1/chat/completions, shared by the server and the client. Reading is strict about types
// (a wrong type is an error naming the field) and lenient about what OpenAI-compatible
// servers differ in (null vs. absent, vLLM's and our extension fields).

#include <cstdint>
#include <string>
#include <string_view>

#include "policy/text/json.hpp"
#include "serving/chat_types.hpp"
#include "serving/serving_result.hpp"

namespace caf_agent::serving {

/// Reads a request body. Errors are bad_request with the field in `param`, e.g.
/// "messages[2].content: expected a string, an array of text parts or null, got integer".
/// Unsupported values are refused rather than ignored: n != 1, stream = true,
/// top_logprobs > 0. Unknown fields are ignored, as vLLM and SGLang do.
result<chat_request> chat_request_from_json(const policy::json_value& body);

/// Writes a request as OpenAI JSON. Tool arguments become JSON strings; missing tool-call
/// ids are generated ("call_<message>_<k>") and tool messages without tool_call_id get the
/// preceding assistant's ids in order. `extra` members are appended (OpenAI's extra_body,
/// e.g. {"return_token_ids": true} for vLLM).
policy::json_value chat_request_to_json(const chat_request& request, const policy::json_object& extra = {});

/// Fields of a response that the chat_service does not decide.
struct response_meta {
  std::string id;                 ///< "chatcmpl-..."
  int64_t created = 0;            ///< Unix seconds.
  bool include_logprobs = false;  ///< The request asked for logprobs.
};

/// Writes a response in OpenAI's format plus the extension fields choices[0].token_ids,
/// choices[0].raw_text, prompt_token_ids and policy_version. Text that is not valid UTF-8
/// has its invalid bytes replaced (U+FFFD); logprobs' "bytes" keep the exact token bytes.
policy::json_value chat_response_to_json(const chat_response& response, const response_meta& meta);

/// Reads a response of any OpenAI-compatible server. Errors are protocol errors naming the
/// field ("missing field choices[0].message").
result<chat_response> chat_response_from_json(const policy::json_value& body);

/// {"error": {"message", "type", "param", "code"}} as OpenAI writes it.
policy::json_value error_to_json(const serving_error& error);

/// The message of an error body from OpenAI ({"error": {"message"}}), vLLM ({"message"}) or
/// FastAPI ({"detail"}); else the body's first bytes; "" for an empty body.
std::string error_message_from_body(std::string_view body);

/// A float as the JSON number of its exact double value: the reader gets the same float back.
policy::json_value float_json(float v);

}  // namespace caf_agent::serving
