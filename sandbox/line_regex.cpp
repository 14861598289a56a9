#include "sandbox/line_regex.hpp"

#include <fmt/format.h>
#include <re2/re2.h>

namespace caf_agent::sandbox {

line_regex::line_regex(std::unique_ptr<re2::RE2> re) : re_(std::move(re)) {}

line_regex::~line_regex() = default;

std::unique_ptr<line_regex> line_regex::compile(std::string_view pattern, bool ignore_case,
                                                std::size_t max_program_bytes, std::string& error) {
  re2::RE2::Options options;
  options.set_log_errors(false);
  options.set_case_sensitive(!ignore_case);
  // Rationale: Grep matches line by line, so '.' and classes never span a newline anyway;
  // never_nl keeps a pattern from matching across one when text holds several lines.
  options.set_never_nl(true);
  options.set_max_mem(static_cast<int64_t>(max_program_bytes));
  auto re = std::make_unique<re2::RE2>(re2::StringPiece(pattern.data(), pattern.size()), options);
  if (!re->ok()) {
    const bool too_big = re->error_code() == re2::RE2::ErrorPatternTooLarge;
    error = too_big ? fmt::format("regex '{}' is too large (its compiled form exceeds {} bytes)", pattern,
                                  max_program_bytes)
                    : fmt::format("invalid regex '{}': {}", pattern, re->error());
    return nullptr;
  }
  return std::unique_ptr<line_regex>(new line_regex(std::move(re)));
}

bool line_regex::search(std::string_view line) const {
  return re2::RE2::PartialMatch(re2::StringPiece(line.data(), line.size()), *re_);
}

}  // namespace caf_agent::sandbox
