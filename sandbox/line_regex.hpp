#pragma once
/// @file line_regex.hpp
/// Linear-time regular expressions over untrusted patterns and text (RE2).
///
/// The agent writes both the pattern (Grep, BashOutput's filter) and the text it is matched
/// against, so a backtracking engine (POSIX regexec, std::regex) can be driven into
/// exponential time or stack overflow on the host. RE2 matches in time linear in the text and
/// refuses patterns whose compiled program exceeds a memory budget.

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>

namespace re2 {
class RE2;
}

namespace caf_agent::sandbox {

/// A compiled pattern; immutable after `compile`, safe to share between threads.
class line_regex {
 public:
  /// Compiles `pattern` (RE2 syntax: ERE plus \d \w \s \b and Perl classes; no backreferences
  /// or lookaround). `max_program_bytes` bounds the compiled program's memory.
  /// Returns null and sets `error` (naming the pattern) when it does not compile.
  static std::unique_ptr<line_regex> compile(std::string_view pattern, bool ignore_case, std::size_t max_program_bytes,
                                             std::string& error);
  ~line_regex();
  line_regex(const line_regex&) = delete;
  line_regex& operator=(const line_regex&) = delete;
  /// True when the pattern matches anywhere in `line`.
  bool search(std::string_view line) const;

 private:
  explicit line_regex(std::unique_ptr<re2::RE2> re);
  std::unique_ptr<re2::RE2> re_;
};

}  // namespace caf_agent::sandbox
