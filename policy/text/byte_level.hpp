#pragma once
// The byte-level alphabet of GPT-2 style tokenizers: every byte maps to one
// printable code point, so a vocabulary of strings can hold arbitrary bytes.
// Printable Latin-1 bytes ('!'..'~', U+00A1..U+00AC, U+00AE..U+00FF) map to
// themselves; the remaining 68 bytes map, in byte order, to U+0100 onwards.

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace caf_agent::policy {

/// The byte <-> code point table of the byte-level alphabet.
class byte_level_alphabet {
 public:
  /// The shared, immutable table.
  static const byte_level_alphabet& get();

  /// The code point standing for byte b.
  char32_t to_char(uint8_t b) const noexcept { return to_char_[b]; }
  /// UTF-8 of the code point standing for byte b.
  const std::string& to_utf8(uint8_t b) const noexcept { return to_utf8_[b]; }
  /// The byte a code point stands for, if it is in the alphabet.
  std::optional<uint8_t> to_byte(char32_t cp) const noexcept;

  /// Maps raw bytes to their alphabet string (what vocab entries look like).
  std::string encode(std::string_view bytes) const;
  /// Maps a vocab string back to bytes the way the ByteLevel decoder does:
  /// if any character is outside the alphabet, the string's own UTF-8 bytes.
  std::string decode(std::string_view token) const;

 private:
  byte_level_alphabet();
  std::array<char32_t, 256> to_char_{};
  std::array<std::string, 256> to_utf8_{};
  std::array<int16_t, 324> to_byte_{};  // indexed by code point < 324
};

}  // namespace caf_agent::policy
