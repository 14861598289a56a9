#pragma once
// A Hugging Face tokenizer.json byte-level BPE tokenizer (GPT-2, Qwen2 and
// Llama-3 styles) whose encode and decode match the `tokenizers` library.
//
// Supported: normalizer null or NFC; pre_tokenizer ByteLevel (use_regex true
// or false) or Sequence[Split(regex, Isolated), ByteLevel(use_regex=false)]
// with the GPT-2, Qwen2 or Llama-3 regex; model BPE; decoder ByteLevel;
// post_processor null, ByteLevel, TemplateProcessing or a Sequence of them.
// Anything else is an error that names the field.

#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "policy/text/bpe_model.hpp"
#include "policy/text/result.hpp"

namespace caf_agent::policy {

/// An entry of tokenizer.json's "added_tokens".
struct added_token {
  /// The token id.
  token_id id = 0;
  /// The literal text matched in the input.
  std::string content;
  /// Only match when not inside a word.
  bool single_word = false;
  /// Absorb whitespace on the left.
  bool lstrip = false;
  /// Absorb whitespace on the right.
  bool rstrip = false;
  /// Matched on normalized text (true) or raw text (false).
  bool normalized = false;
  /// A special token (skipped by decode with skip_special_tokens).
  bool special = false;
};

struct tokenizer_state;

/// An immutable, thread-safe tokenizer; copies share one state.
class tokenizer {
 public:
  /// Parses the text of a tokenizer.json file.
  static result<tokenizer> from_json_text(std::string_view json_text);
  /// Reads and parses a tokenizer.json file.
  static result<tokenizer> from_file(const std::string& path);

  /// Encodes text. Added tokens are matched first; with add_special_tokens
  /// the post-processor's template (e.g. a BOS token) is applied.
  std::vector<token_id> encode(std::string_view text, bool add_special_tokens = false) const;

  /// Decodes ids to text as `tokenizers` does: unknown ids are skipped and
  /// invalid UTF-8 becomes U+FFFD.
  std::string decode(std::span<const token_id> ids, bool skip_special_tokens = false) const;

  /// Decodes ids to raw bytes, without UTF-8 repair (for streaming output,
  /// where a character may be split across tokens).
  std::string decode_bytes(std::span<const token_id> ids, bool skip_special_tokens = false) const;

  /// The id of a token string (added token content or vocabulary entry).
  std::optional<token_id> token_to_id(std::string_view token) const;
  /// The string of an id (added token content or vocabulary entry).
  std::optional<std::string> id_to_token(token_id id) const;
  /// True for ids of added tokens marked special.
  bool is_special(token_id id) const;
  /// One past the largest known id.
  size_t id_limit() const;
  /// The added tokens, in file order.
  const std::vector<added_token>& added_tokens() const;

  /// Use from_json_text or from_file.
  explicit tokenizer(std::shared_ptr<const tokenizer_state> state);

 private:
  std::shared_ptr<const tokenizer_state> state_;
};

}  // namespace caf_agent::policy
