#include "policy/text/byte_level.hpp"

#include "policy/text/utf8.hpp"

namespace caf_agent::policy {

byte_level_alphabet::byte_level_alphabet() {
  to_byte_.fill(-1);
  char32_t next = 256;
  for (int b = 0; b < 256; ++b) {
    bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
    char32_t cp = printable ? static_cast<char32_t>(b) : next++;
    to_char_[b] = cp;
    append_utf8(to_utf8_[b], cp);
    to_byte_[cp] = static_cast<int16_t>(b);
  }
}

const byte_level_alphabet& byte_level_alphabet::get() {
  static const byte_level_alphabet table;
  return table;
}

std::optional<uint8_t> byte_level_alphabet::to_byte(char32_t cp) const noexcept {
  if (cp >= to_byte_.size() || to_byte_[cp] < 0) return std::nullopt;
  return static_cast<uint8_t>(to_byte_[cp]);
}

std::string byte_level_alphabet::encode(std::string_view bytes) const {
  std::string out;
  out.reserve(bytes.size() * 2);
  for (char c : bytes) out += to_utf8_[static_cast<uint8_t>(c)];
  return out;
}

std::string byte_level_alphabet::decode(std::string_view token) const {
  std::string out;
  out.reserve(token.size());
  for (size_t pos = 0; pos < token.size();) {
    auto c = decode_utf8(token, pos);
    auto b = c.valid ? to_byte(c.cp) : std::nullopt;
    if (!b) return std::string(token);
    out.push_back(static_cast<char>(*b));
    pos += c.len;
  }
  return out;
}

}  // namespace caf_agent::policy
