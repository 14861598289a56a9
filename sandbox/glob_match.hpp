#pragma once
/// @file glob_match.hpp
/// Shell-style path globbing: `*`, `?`, `[...]` within a segment, `**` across segments, `{a,b}`.

#include <string>
#include <string_view>
#include <vector>

namespace caf_agent::sandbox {

/// Expands `{a,b}` alternatives (nested ones too) into plain patterns.
/// Rationale: capped at 64 expansions so `{a,b}{c,d}...` cannot blow up.
std::vector<std::string> expand_braces(std::string_view pattern);

/// True when the relative path `rel` matches `pattern` (already brace-expanded).
/// A pattern without '/' matches the file name at any depth, as `**/pattern`.
bool glob_match(std::string_view pattern, std::string_view rel);

}  // namespace caf_agent::sandbox
