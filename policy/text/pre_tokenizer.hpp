#pragma once
// The regex pre-tokenizers of byte-level BPE tokenizers, implemented by hand
// over code points: std::regex has neither \p{L}/\p{N} nor the lookahead in
// `\s+(?!\S)`. Each supported regex is recognized by its exact text and
// mapped to a split_pattern; the matcher reproduces the regex engine's
// leftmost-first alternation and backtracking for those patterns.

#include <cstddef>
#include <string_view>
#include <utility>
#include <vector>

#include "policy/text/result.hpp"

namespace caf_agent::policy {

/// The features that distinguish the supported split regexes.
struct split_pattern {
  /// `(?i:'s|...)` instead of `'s|...`.
  bool case_insensitive_contractions = false;
  /// `[^\r\n\p{L}\p{N}]?\p{L}+` instead of ` ?\p{L}+`.
  bool any_letter_prefix = false;
  /// `\p{N}{1,max_digits}`; 0 means GPT-2's ` ?\p{N}+`.
  int max_digits = 0;
  /// `[\r\n]*` after a punctuation run, and the `\s*[\r\n]+` alternative.
  bool newline_rules = false;
};

/// The GPT-2 pattern (ByteLevel with use_regex=true).
split_pattern gpt2_split_pattern() noexcept;

/// Maps a Split pre-tokenizer's regex text to a pattern; an unknown regex is
/// an error that quotes it.
result<split_pattern> recognize_split_regex(std::string_view regex);

/// A pre-token: a byte range [begin, end) of the input.
using byte_span = std::pair<size_t, size_t>;

/// Splits text into pre-tokens as `Split(pattern, behavior=Isolated)` does.
/// Invalid UTF-8 bytes count as symbols that are neither letter, number nor
/// whitespace.
void split_pretokens(std::string_view text, const split_pattern& pattern, std::vector<byte_span>& out);

}  // namespace caf_agent::policy
