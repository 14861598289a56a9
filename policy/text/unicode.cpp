#include "policy/text/unicode.hpp"

#include <algorithm>

namespace caf_agent::policy {

namespace {

struct code_range {
  char32_t lo;
  char32_t hi;
};
struct ccc_range {
  char32_t lo;
  char32_t hi;
  uint8_t ccc;
};
struct decomposition_entry {
  char32_t cp;
  uint32_t offset;
  uint32_t len;
};
struct composition_entry {
  char32_t first;
  char32_t second;
  char32_t composite;
};

#include "policy/text/unicode_data.inc"

template <class Range, size_t N>
const Range* find_range(const Range (&table)[N], char32_t cp) noexcept {
  auto it =
      std::upper_bound(std::begin(table), std::end(table), cp, [](char32_t c, const Range& r) { return c < r.lo; });
  if (it == std::begin(table)) return nullptr;
  --it;
  return cp <= it->hi ? &*it : nullptr;
}

// Hangul syllable arithmetic (Unicode chapter 3.12).
constexpr char32_t s_base = 0xAC00, l_base = 0x1100, v_base = 0x1161, t_base = 0x11A7;
constexpr char32_t l_count = 19, v_count = 21, t_count = 28;
constexpr char32_t n_count = v_count * t_count, s_count = l_count * n_count;

}  // namespace

bool is_letter(char32_t cp) noexcept {
  if (cp < 0x80) return (cp | 0x20) >= 'a' && (cp | 0x20) <= 'z';
  return find_range(letter_ranges, cp) != nullptr;
}

bool is_number(char32_t cp) noexcept {
  if (cp < 0x80) return cp >= '0' && cp <= '9';
  return find_range(number_ranges, cp) != nullptr;
}

bool is_word_char(char32_t cp) noexcept {
  return find_range(word_ranges, cp) != nullptr;
}

bool is_whitespace(char32_t cp) noexcept {
  if (cp < 0x80) return cp == ' ' || (cp >= 0x09 && cp <= 0x0D);
  return cp == 0x85 || cp == 0xA0 || cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 ||
         cp == 0x202F || cp == 0x205F || cp == 0x3000;
}

uint8_t combining_class(char32_t cp) noexcept {
  if (cp < 0x300) return 0;
  const auto* r = find_range(ccc_ranges, cp);
  return r ? r->ccc : 0;
}

std::u32string_view canonical_decomposition(char32_t cp) noexcept {
  if (cp < 0xC0) return {};
  auto it = std::lower_bound(std::begin(decomposition_index), std::end(decomposition_index), cp,
                             [](const decomposition_entry& e, char32_t c) { return e.cp < c; });
  if (it == std::end(decomposition_index) || it->cp != cp) return {};
  return {decomposition_data + it->offset, it->len};
}

char32_t compose_pair(char32_t a, char32_t b) noexcept {
  if (a >= l_base && a < l_base + l_count && b >= v_base && b < v_base + v_count)
    return s_base + ((a - l_base) * v_count + (b - v_base)) * t_count;
  if (a >= s_base && a < s_base + s_count && (a - s_base) % t_count == 0 && b > t_base && b < t_base + t_count)
    return a + (b - t_base);
  auto it = std::lower_bound(std::begin(composition_pairs), std::end(composition_pairs), composition_entry{a, b, 0},
                             [](const composition_entry& x, const composition_entry& y) {
                               return x.first != y.first ? x.first < y.first : x.second < y.second;
                             });
  if (it == std::end(composition_pairs) || it->first != a || it->second != b) return 0;
  return it->composite;
}

std::string_view unicode_tables_version() noexcept {
  return unicode_version;
}

}  // namespace caf_agent::policy
