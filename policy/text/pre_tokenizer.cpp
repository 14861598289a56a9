#include "policy/text/pre_tokenizer.hpp"

#include <string>

#include "policy/text/unicode.hpp"
#include "policy/text/utf8.hpp"

namespace caf_agent::policy {

namespace {

constexpr std::string_view gpt2_regex = R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";
constexpr std::string_view qwen2_regex =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr std::string_view llama3_regex =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

// Per code point: the class bits the matcher asks about.
enum : uint8_t { k_letter = 1, k_number = 2, k_space = 4, k_newline = 8 };

struct symbols {
  std::vector<char32_t> cp;
  std::vector<uint8_t> cls;
  std::vector<size_t> offset;  // byte offset of each symbol, plus the end
};

void decode_symbols(std::string_view text, symbols& s) {
  s.cp.clear();
  s.cls.clear();
  s.offset.clear();
  for (size_t pos = 0; pos < text.size();) {
    auto c = decode_utf8(text, pos);
    uint8_t cls = 0;
    if (c.valid) {
      if (is_letter(c.cp))
        cls |= k_letter;
      else if (is_number(c.cp))
        cls |= k_number;
      else if (is_whitespace(c.cp))
        cls |= k_space;
      if (c.cp == '\r' || c.cp == '\n') cls |= k_newline;
    }
    s.cp.push_back(c.valid ? c.cp : 0xFFFD);
    s.cls.push_back(cls);
    s.offset.push_back(pos);
    pos += c.len;
  }
  s.offset.push_back(text.size());
}

// Each matcher returns the end index of its match at i, or i for no match.
class matcher {
 public:
  matcher(const symbols& s, const split_pattern& p) : s_(s), p_(p), n_(s.cp.size()) {}

  size_t match(size_t i) const {
    size_t e;
    if ((e = contraction(i)) > i) return e;
    if ((e = letters(i)) > i) return e;
    if ((e = digits(i)) > i) return e;
    if ((e = punctuation(i)) > i) return e;
    if (p_.newline_rules && (e = newline_run(i)) > i) return e;
    if ((e = space_run(i)) > i) return e;
    return i + 1;  // unreachable for these patterns; keeps progress
  }

 private:
  bool is(size_t i, uint8_t cls) const { return i < n_ && (s_.cls[i] & cls); }
  bool is_char(size_t i, char32_t c) const { return i < n_ && s_.cp[i] == c; }
  bool other(size_t i) const { return i < n_ && !(s_.cls[i] & (k_letter | k_number | k_space)); }
  size_t run(size_t i, uint8_t cls) const {
    while (is(i, cls)) ++i;
    return i;
  }
  // Case folding of the contraction letters; U+017F LONG S folds to 's'.
  char32_t fold(size_t i) const {
    char32_t c = i < n_ ? s_.cp[i] : 0;
    if (!p_.case_insensitive_contractions) return c;
    if (c >= 'A' && c <= 'Z') return c + 32;
    if (c == 0x017F) return 's';
    return c;
  }

  size_t contraction(size_t i) const {
    if (!is_char(i, '\'')) return i;
    char32_t a = fold(i + 1);
    if (a == 's' || a == 't' || a == 'm' || a == 'd') return i + 2;
    char32_t b = fold(i + 2);
    if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) return i + 3;
    return i;
  }

  size_t letters(size_t i) const {
    bool prefix = p_.any_letter_prefix ? (i < n_ && !(s_.cls[i] & (k_letter | k_number | k_newline))) : is_char(i, ' ');
    if (prefix && is(i + 1, k_letter)) return run(i + 1, k_letter);
    return run(i, k_letter);
  }

  size_t digits(size_t i) const {
    if (p_.max_digits == 0) {
      if (is_char(i, ' ') && is(i + 1, k_number)) return run(i + 1, k_number);
      return run(i, k_number);
    }
    size_t e = i;
    while (e - i < static_cast<size_t>(p_.max_digits) && is(e, k_number)) ++e;
    return e;
  }

  size_t punctuation(size_t i) const {
    size_t j = is_char(i, ' ') && other(i + 1) ? i + 1 : i;
    size_t e = j;
    while (other(e)) ++e;
    if (e == j) return i;
    return p_.newline_rules ? run(e, k_newline) : e;
  }

  // `\s*[\r\n]+`: up to and including the last newline of the space run.
  size_t newline_run(size_t i) const {
    size_t q = run(i, k_space);
    for (size_t k = q; k > i; --k)
      if (s_.cls[k - 1] & k_newline) return k;
    return i;
  }

  // `\s+(?!\S)|\s+`: a space run stops one short of a following non-space,
  // unless it is a single character.
  size_t space_run(size_t i) const {
    size_t q = run(i, k_space);
    if (q == i) return i;
    if (q == n_ || q - i < 2) return q;
    return q - 1;
  }

  const symbols& s_;
  const split_pattern& p_;
  size_t n_;
};

}  // namespace

split_pattern gpt2_split_pattern() noexcept {
  return split_pattern{};
}

result<split_pattern> recognize_split_regex(std::string_view regex) {
  if (regex == gpt2_regex) return gpt2_split_pattern();
  split_pattern p;
  p.case_insensitive_contractions = true;
  p.any_letter_prefix = true;
  p.newline_rules = true;
  if (regex == qwen2_regex) {
    p.max_digits = 1;
    return p;
  }
  if (regex == llama3_regex) {
    p.max_digits = 3;
    return p;
  }
  return make_error("unsupported split regex '" + std::string(regex) +
                    "' (supported: the GPT-2, Qwen2 and Llama-3 patterns)");
}

void split_pretokens(std::string_view text, const split_pattern& pattern, std::vector<byte_span>& out) {
  thread_local symbols s;
  decode_symbols(text, s);
  matcher m(s, pattern);
  size_t n = s.cp.size();
  for (size_t i = 0; i < n;) {
    size_t e = m.match(i);
    out.emplace_back(s.offset[i], s.offset[e]);
    i = e;
  }
}

}  // namespace caf_agent::policy
