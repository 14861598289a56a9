// NFC normalization: canonical decomposition, canonical ordering, canonical
// composition (Unicode standard annex #15).
#include <algorithm>
#include <vector>

#include "policy/text/unicode.hpp"
#include "policy/text/utf8.hpp"

namespace caf_agent::policy {

namespace {

constexpr char32_t s_base = 0xAC00, l_base = 0x1100, v_base = 0x1161, t_base = 0x11A7;
constexpr char32_t v_count = 21, t_count = 28, s_count = 11172;

void decompose_into(std::u32string& out, char32_t cp) {
  if (cp >= s_base && cp < s_base + s_count) {
    char32_t s = cp - s_base;
    out.push_back(l_base + s / (v_count * t_count));
    out.push_back(v_base + (s % (v_count * t_count)) / t_count);
    if (s % t_count != 0) out.push_back(t_base + s % t_count);
    return;
  }
  auto d = canonical_decomposition(cp);
  if (d.empty())
    out.push_back(cp);
  else
    out.append(d);
}

// Stable-sorts each run of non-starters by combining class.
void canonical_order(std::u32string& s) {
  size_t i = 0;
  while (i < s.size()) {
    if (combining_class(s[i]) == 0) {
      ++i;
      continue;
    }
    size_t j = i;
    while (j < s.size() && combining_class(s[j]) != 0) ++j;
    std::stable_sort(s.begin() + i, s.begin() + j,
                     [](char32_t a, char32_t b) { return combining_class(a) < combining_class(b); });
    i = j;
  }
}

// Input is canonically ordered, so the last appended character carries the
// highest class between the starter and the current character.
std::u32string compose(const std::u32string& s) {
  std::u32string out;
  out.reserve(s.size());
  size_t starter = std::u32string::npos;
  uint8_t last_ccc = 0;
  for (char32_t c : s) {
    uint8_t ccc = combining_class(c);
    if (starter != std::u32string::npos) {
      bool adjacent = starter + 1 == out.size();
      if (adjacent || (last_ccc != 0 && last_ccc < ccc)) {
        if (char32_t comp = compose_pair(out[starter], c)) {
          out[starter] = comp;
          continue;
        }
      }
    }
    if (ccc == 0) starter = out.size();
    last_ccc = ccc;
    out.push_back(c);
  }
  return out;
}

void normalize_valid_run(std::string& out, std::string_view run) {
  std::u32string decomposed;
  decomposed.reserve(run.size());
  for (size_t pos = 0; pos < run.size();) {
    auto c = decode_utf8(run, pos);
    decompose_into(decomposed, c.cp);
    pos += c.len;
  }
  canonical_order(decomposed);
  for (char32_t c : compose(decomposed)) append_utf8(out, c);
}

}  // namespace

std::string nfc_normalize(std::string_view text) {
  if (std::all_of(text.begin(), text.end(), [](char c) { return static_cast<unsigned char>(c) < 0x80; }))
    return std::string(text);
  std::string out;
  out.reserve(text.size());
  size_t run_start = 0;
  size_t pos = 0;
  while (pos < text.size()) {
    auto c = decode_utf8(text, pos);
    if (!c.valid) {
      normalize_valid_run(out, text.substr(run_start, pos - run_start));
      out.append(text.substr(pos, c.len));
      run_start = pos + c.len;
    }
    pos += c.len;
  }
  normalize_valid_run(out, text.substr(run_start));
  return out;
}

}  // namespace caf_agent::policy
