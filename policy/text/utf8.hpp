#pragma once
// UTF-8 decoding and encoding with the Unicode "maximal subpart" rule for
// invalid input, which is what Rust's String::from_utf8_lossy and Python's
// errors="replace" both do.

#include <cstdint>
#include <string>
#include <string_view>

namespace caf_agent::policy {

/// One decoded code point, or an invalid byte sequence.
struct utf8_char {
  /// The code point; U+FFFD when the bytes are invalid.
  char32_t cp = 0;
  /// Bytes consumed: the sequence length, or the maximal invalid subpart (>= 1).
  uint32_t len = 0;
  /// False when the bytes at this position are not well-formed UTF-8.
  bool valid = false;
};

/// Decodes the character at byte offset pos (pos < s.size()).
utf8_char decode_utf8(std::string_view s, size_t pos) noexcept;

/// Appends the UTF-8 encoding of cp; surrogates and values past U+10FFFF are
/// written as U+FFFD.
void append_utf8(std::string& out, char32_t cp);

/// Replaces each maximal invalid subpart of bytes with U+FFFD.
std::string utf8_lossy(std::string_view bytes);

/// True when bytes are entirely well-formed UTF-8.
bool is_valid_utf8(std::string_view bytes) noexcept;

}  // namespace caf_agent::policy
