#include "sandbox/output_format.hpp"

#include <fmt/format.h>

namespace caf_agent::sandbox {

capped_buffer::capped_buffer(std::size_t cap) : cap_(cap < 2 ? 2 : cap) {}

void capped_buffer::append(std::string_view data) {
  total_ += data.size();
  const std::size_t head_cap = cap_ / 2;
  if (head_.size() < head_cap) {
    const std::size_t n = std::min(head_cap - head_.size(), data.size());
    head_.append(data.substr(0, n));
    data.remove_prefix(n);
  }
  if (data.empty()) return;
  const std::size_t tail_cap = cap_ - head_cap;
  if (data.size() >= tail_cap) {
    tail_.assign(data.substr(data.size() - tail_cap));
    return;
  }
  tail_.append(data);
  // Rationale: trim in chunks so appending many small reads stays amortised O(n).
  if (tail_.size() > 2 * tail_cap) tail_.erase(0, tail_.size() - tail_cap);
}

std::string capped_buffer::take() {
  const std::size_t tail_cap = cap_ - cap_ / 2;
  if (tail_.size() > tail_cap) tail_.erase(0, tail_.size() - tail_cap);
  const auto omitted = omitted_bytes();
  std::string out = omitted > 0 ? join_truncated(head_, tail_, omitted) : head_ + tail_;
  head_.clear();
  tail_.clear();
  total_ = 0;
  return out;
}

std::string truncation_marker(std::uint64_t omitted) {
  return fmt::format("\n[... output truncated: {} bytes omitted ...]\n", omitted);
}

namespace {

bool continuation_byte(char c) {
  return (static_cast<unsigned char>(c) & 0xC0) == 0x80;
}

}  // namespace

std::string join_truncated(std::string_view head, std::string_view tail, std::uint64_t omitted) {
  // A lead byte whose character runs past the head's end, and the continuation bytes that
  // open the tail, are halves of characters the cut split.
  std::size_t keep = head.size();
  std::size_t back = 0;
  while (back < keep && back < 4 && continuation_byte(head[keep - 1 - back])) ++back;
  if (back < keep) {
    const auto lead = static_cast<unsigned char>(head[keep - 1 - back]);
    const std::size_t len = lead < 0x80           ? 1
                            : (lead >> 5) == 0x6  ? 2
                            : (lead >> 4) == 0xE  ? 3
                            : (lead >> 3) == 0x1E ? 4
                                                  : 1;
    if (len > back + 1) keep -= back + 1;
  }
  std::size_t skip = 0;
  while (skip < tail.size() && skip < 3 && continuation_byte(tail[skip])) ++skip;
  omitted += (head.size() - keep) + skip;
  std::string out(head.substr(0, keep));
  out += truncation_marker(omitted);
  out.append(tail.substr(skip));
  return out;
}

std::string truncate_middle(std::string_view text, std::size_t limit) {
  if (text.size() <= limit) return std::string(text);
  const std::size_t head = limit / 2, tail = limit - head;
  return join_truncated(text.substr(0, head), text.substr(text.size() - tail), text.size() - limit);
}

bool looks_binary(std::string_view data) {
  // Rationale: the first 8 kB decide, as `file` and git do; scanning more costs time.
  const std::string_view probe = data.substr(0, 8192);
  std::size_t odd = 0;
  for (unsigned char c : probe) {
    if (c == 0) return true;
    if (c < 0x20 && c != '\n' && c != '\r' && c != '\t' && c != '\f' && c != '\b' && c != 0x1b) ++odd;
  }
  // Rationale: >10% control bytes is not text even if it has no NUL.
  return !probe.empty() && odd * 10 > probe.size();
}

namespace {

/// Length of a valid UTF-8 sequence at `s[i]`, or 0 when invalid.
std::size_t utf8_length(std::string_view s, std::size_t i) {
  const auto c = static_cast<unsigned char>(s[i]);
  std::size_t n = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 0;
  if (n == 0 || i + n > s.size()) return 0;
  for (std::size_t k = 1; k < n; ++k)
    if ((static_cast<unsigned char>(s[i + k]) >> 6) != 0x2) return 0;
  if (n == 2 && c < 0xC2) return 0;  // overlong
  return n;
}

}  // namespace

std::string sanitize_utf8(std::string_view data) {
  std::string out;
  out.reserve(data.size());
  for (std::size_t i = 0; i < data.size();) {
    if (std::size_t n = utf8_length(data, i); n > 0) {
      out.append(data.substr(i, n));
      i += n;
    } else {
      out += "\xEF\xBF\xBD";
      ++i;
    }
  }
  return out;
}

std::string to_observation(std::string data, std::size_t cap, std::uint64_t total_bytes) {
  if (looks_binary(data))
    return fmt::format(
        "[binary output: {} bytes, not shown; redirect it to a file and inspect "
        "it with xxd or od]",
        total_bytes > 0 ? total_bytes : data.size());
  // Rationale: 256 bytes of slack so text already cut by a capped_buffer (cap + marker) is
  // not cut a second time.
  if (data.size() > cap + 256) data = truncate_middle(data, cap);
  return sanitize_utf8(data);
}

}  // namespace caf_agent::sandbox
