#pragma once
// Unicode character properties used by the pre-tokenizer and NFC: general
// category Letter / Number, White_Space, combining class, canonical
// decomposition and composition. Data comes from unicode_data.inc, generated
// by gen_unicode_tables.py.

#include <cstdint>
#include <string>
#include <string_view>

namespace caf_agent::policy {

/// True for general category L* (what a regex's \p{L} matches).
bool is_letter(char32_t cp) noexcept;

/// True for general category N* (what a regex's \p{N} matches).
bool is_number(char32_t cp) noexcept;

/// True for what Rust regex's Unicode `\w` matches (Alphabetic, M*, Nd, Pc,
/// Join_Control): the word test of `tokenizers`' single_word added tokens.
bool is_word_char(char32_t cp) noexcept;

/// True for the White_Space property (what Oniguruma's Unicode \s matches).
bool is_whitespace(char32_t cp) noexcept;

/// The canonical combining class (0 for starters).
uint8_t combining_class(char32_t cp) noexcept;

/// The full canonical decomposition of cp (Hangul excluded), or empty.
std::u32string_view canonical_decomposition(char32_t cp) noexcept;

/// The primary composite of (a, b) including Hangul, or 0 if none.
char32_t compose_pair(char32_t a, char32_t b) noexcept;

/// The Unicode version the tables were generated from, e.g. "14.0.0".
std::string_view unicode_tables_version() noexcept;

/// NFC-normalizes UTF-8 text. Invalid byte sequences are kept verbatim and act
/// as starters that block composition across them.
std::string nfc_normalize(std::string_view text);

}  // namespace caf_agent::policy
