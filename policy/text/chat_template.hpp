#pragma once
// A checkpoint's own chat template, recognized by its exact text and mapped to
// a chat_format whose renderer reproduces it (chat_render.hpp). A template that
// is not one of the recognized texts is refused with its name and fingerprint,
// never approximated: a model prompted in a format it was not tuned for loses
// accuracy for reasons nobody sees.
//
// Recognized (tests/policy/text/templates/ holds the texts):
//   qwen2.5   the Qwen2.5 instruct template (Qwen2.5-*-Instruct, Qwen2.5-Coder-*-Instruct)
//   qwen3     the Qwen3 template (Qwen3-0.6B ... 235B, hybrid thinking), as first
//             released and in its later revision that reads `content` only when a string
//   llama3.1  the Llama 3.1 / 3.3 instruct template
//   chatml-tools  this project's format (tests/policy/text/qwen25_tools_chat_template.jinja)

#include <cstdint>
#include <string>
#include <string_view>

#include "policy/text/chat_format.hpp"
#include "policy/text/result.hpp"

namespace caf_agent::policy {

/// FNV-1a 64 of the template text, after dropping one final "\n" that follows
/// a closing "%}" (transformers renders with trim_blocks, which drops it too).
uint64_t chat_template_fingerprint(std::string_view template_text);

/// The chat_format for a template text. `source` names it in the error
/// ("Qwen2.5-7B-Instruct/tokenizer_config.json"); bos_token is the tokenizer's.
result<chat_format> chat_format_for_template(std::string_view template_text, std::string_view source,
                                             std::string_view bos_token = {});

/// Reads a checkpoint directory's template: chat_template.jinja when present
/// (as transformers prefers it), else tokenizer_config.json's "chat_template",
/// with "bos_token" from tokenizer_config.json. Errors name the file.
result<chat_format> load_chat_format(const std::string& model_dir);

/// The format an engine serving model_dir renders with: load_chat_format when
/// the checkpoint has a template (an unrecognized one is an error), else the
/// built-in chatml-tools format (checkpoints made by tools/make_tiny_tokenizer.py
/// before it wrote a template, bare test directories).
result<chat_format> checkpoint_chat_format(const std::string& model_dir);

}  // namespace caf_agent::policy
