#include "policy/text/utf8.hpp"

namespace caf_agent::policy {

namespace {

// The lead byte decides the length and the range allowed for the second byte
// (Unicode Table 3-7); later bytes are always 0x80..0xBF.
struct lead_info {
  uint32_t len;
  uint8_t lo;
  uint8_t hi;
};

lead_info classify_lead(uint8_t b) noexcept {
  if (b < 0x80) return {1, 0, 0};
  if (b >= 0xC2 && b <= 0xDF) return {2, 0x80, 0xBF};
  if (b == 0xE0) return {3, 0xA0, 0xBF};
  if (b == 0xED) return {3, 0x80, 0x9F};
  if (b >= 0xE1 && b <= 0xEF) return {3, 0x80, 0xBF};
  if (b == 0xF0) return {4, 0x90, 0xBF};
  if (b >= 0xF1 && b <= 0xF3) return {4, 0x80, 0xBF};
  if (b == 0xF4) return {4, 0x80, 0x8F};
  return {0, 0, 0};
}

}  // namespace

utf8_char decode_utf8(std::string_view s, size_t pos) noexcept {
  auto b0 = static_cast<uint8_t>(s[pos]);
  auto info = classify_lead(b0);
  if (info.len == 1) return {b0, 1, true};
  if (info.len == 0) return {0xFFFD, 1, false};
  char32_t cp = b0 & (0xFF >> (info.len + 1));
  for (uint32_t i = 1; i < info.len; ++i) {
    if (pos + i >= s.size()) return {0xFFFD, i, false};
    auto b = static_cast<uint8_t>(s[pos + i]);
    uint8_t lo = i == 1 ? info.lo : 0x80;
    uint8_t hi = i == 1 ? info.hi : 0xBF;
    if (b < lo || b > hi) return {0xFFFD, i, false};
    cp = (cp << 6) | (b & 0x3F);
  }
  return {cp, info.len, true};
}

void append_utf8(std::string& out, char32_t cp) {
  if ((cp >= 0xD800 && cp <= 0xDFFF) || cp > 0x10FFFF) cp = 0xFFFD;
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

std::string utf8_lossy(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size());
  size_t pos = 0;
  while (pos < bytes.size()) {
    auto c = decode_utf8(bytes, pos);
    if (c.valid)
      out.append(bytes.substr(pos, c.len));
    else
      append_utf8(out, 0xFFFD);
    pos += c.len;
  }
  return out;
}

bool is_valid_utf8(std::string_view bytes) noexcept {
  size_t pos = 0;
  while (pos < bytes.size()) {
    auto c = decode_utf8(bytes, pos);
    if (!c.valid) return false;
    pos += c.len;
  }
  return true;
}

}  // namespace caf_agent::policy
