#pragma once
// Internal: the parsed contents of a tokenizer.json, shared by the loader
// (tokenizer_load.cpp) and encode/decode (tokenizer.cpp).

#include <array>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "policy/text/bpe_model.hpp"
#include "policy/text/json.hpp"
#include "policy/text/pre_tokenizer.hpp"
#include "policy/text/tokenizer.hpp"

namespace caf_agent::policy {

/// One item of a TemplateProcessing "single" template.
struct template_item {
  /// True for the input sequence ("A"); false for special token ids.
  bool is_sequence = false;
  /// The special token's ids when !is_sequence.
  std::vector<token_id> ids;
};

/// Everything a tokenizer needs at encode and decode time.
struct tokenizer_state {
  /// Normalizer is NFC (else none).
  bool nfc = false;
  /// The split regex; none means the whole piece is one pre-token.
  std::optional<split_pattern> split;
  /// ByteLevel(add_prefix_space=true).
  bool add_prefix_space = false;
  /// The BPE model.
  std::shared_ptr<bpe_model> model;
  /// Added tokens in file order.
  std::vector<added_token> added;
  /// Added token index by content.
  std::unordered_map<std::string, size_t> added_by_content;
  /// Added token index by id.
  std::unordered_map<token_id, size_t> added_by_id;
  /// Candidate added tokens by first byte, longest first; [0] raw, [1] normalized.
  std::array<std::array<std::vector<size_t>, 256>, 2> added_by_first_byte;
  /// The post-processor's single-sequence template; empty means none.
  std::vector<template_item> post_template;
  /// Decoded bytes of every id (ByteLevel decoder applied per token).
  std::vector<std::string> id_bytes;
  /// Per id: 0 unknown, 1 ordinary, 2 special.
  std::vector<uint8_t> id_kind;
};

/// Parses tokenizer.json into a state (tokenizer_load.cpp).
result<std::shared_ptr<tokenizer_state>> load_tokenizer_state(const json_value& root);

}  // namespace caf_agent::policy
