#pragma once
/// @file output_format.hpp
/// Bounded capture of process output and its conversion into an agent observation.

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace caf_agent::sandbox {

/// Keeps the first and last `cap/2` bytes of a stream and counts what lies between.
/// Rationale: compiler errors sit at the start, test summaries at the end; both matter.
class capped_buffer {
 public:
  /// Creates a buffer that holds at most `cap` bytes.
  explicit capped_buffer(std::size_t cap);
  /// Appends bytes, dropping the middle of the stream once full.
  void append(std::string_view data);
  /// Total bytes ever appended.
  std::uint64_t total_bytes() const { return total_; }
  /// Bytes dropped from the middle.
  std::uint64_t omitted_bytes() const { return total_ - head_.size() - tail_.size(); }
  /// Returns head + marker + tail, and clears the buffer.
  std::string take();
  /// True when nothing is buffered.
  bool empty() const { return head_.empty() && tail_.empty(); }

 private:
  std::size_t cap_;
  std::string head_;
  std::string tail_;  // ring storage in order; trimmed from the front
  std::uint64_t total_ = 0;
};

/// Returns the marker inserted where `omitted` bytes were dropped.
std::string truncation_marker(std::uint64_t omitted);

/// The one truncation of text for the agent (tool output here, observations in
/// rollout/conversation): text longer than `limit` bytes keeps its first limit/2 and last
/// limit/2 bytes around truncation_marker, cut at UTF-8 character boundaries (a character
/// the cut would split is dropped whole and counted as omitted).
std::string truncate_middle(std::string_view text, std::size_t limit);

/// Joins the kept head and tail of a text whose middle (`omitted` bytes) was dropped: the
/// head loses a trailing partial UTF-8 character, the tail a leading one (both counted).
std::string join_truncated(std::string_view head, std::string_view tail, std::uint64_t omitted);

/// True when `data` looks binary (NUL bytes or mostly non-text bytes).
bool looks_binary(std::string_view data);

/// Makes `data` safe for an observation: binary data becomes a one-line summary (reporting
/// `total_bytes` when given), invalid UTF-8 is replaced, and the text is cut to `cap` bytes
/// with a marker.
std::string to_observation(std::string data, std::size_t cap, std::uint64_t total_bytes = 0);

/// Replaces invalid UTF-8 sequences with U+FFFD so the text serialises as JSON.
std::string sanitize_utf8(std::string_view data);

}  // namespace caf_agent::sandbox
