#include "sandbox/glob_match.hpp"

#include <fnmatch.h>

namespace caf_agent::sandbox {
namespace {

constexpr std::size_t kMaxExpansions = 64;

std::vector<std::string> split(std::string_view s) {
  std::vector<std::string> parts;
  std::size_t pos = 0;
  while (pos <= s.size()) {
    std::size_t end = s.find('/', pos);
    if (end == std::string_view::npos) end = s.size();
    if (end > pos) parts.emplace_back(s.substr(pos, end - pos));
    pos = end + 1;
  }
  return parts;
}

/// Dynamic programme over (pattern segment, path segment): no exponential `**` backtracking.
bool match_segments(const std::vector<std::string>& pat, const std::vector<std::string>& path) {
  const std::size_t np = pat.size(), ns = path.size();
  std::vector<char> dp((np + 1) * (ns + 1), 0);  // dp[pi*(ns+1)+si]: pat[pi..] matches path[si..]
  auto at = [&](std::size_t pi, std::size_t si) -> char& { return dp[pi * (ns + 1) + si]; };
  at(np, ns) = 1;
  for (std::size_t pi = np; pi-- > 0;) {
    for (std::size_t si = ns + 1; si-- > 0;) {
      if (pat[pi] == "**") {
        at(pi, si) = at(pi + 1, si) || (si < ns && at(pi, si + 1));
      } else {
        at(pi, si) = si < ns && at(pi + 1, si + 1) && ::fnmatch(pat[pi].c_str(), path[si].c_str(), 0) == 0;
      }
    }
  }
  return at(0, 0) != 0;
}

}  // namespace

std::vector<std::string> expand_braces(std::string_view pattern) {
  const std::size_t open = pattern.find('{');
  if (open == std::string_view::npos) return {std::string(pattern)};
  int depth = 0;
  std::size_t close = std::string_view::npos;
  std::vector<std::size_t> commas;
  for (std::size_t i = open; i < pattern.size() && close == std::string_view::npos; ++i) {
    if (pattern[i] == '{') ++depth;
    if (pattern[i] == '}' && --depth == 0) close = i;
    if (pattern[i] == ',' && depth == 1) commas.push_back(i);
  }
  if (close == std::string_view::npos) return {std::string(pattern)};
  std::vector<std::string> out;
  std::size_t start = open + 1;
  commas.push_back(close);
  for (std::size_t c : commas) {
    std::string alt = std::string(pattern.substr(0, open)) + std::string(pattern.substr(start, c - start)) +
                      std::string(pattern.substr(close + 1));
    for (auto& e : expand_braces(alt)) {
      if (out.size() >= kMaxExpansions) return out;
      out.push_back(std::move(e));
    }
    start = c + 1;
  }
  return out;
}

bool glob_match(std::string_view pattern, std::string_view rel) {
  std::string pat(pattern);
  if (pat.rfind("./", 0) == 0) pat.erase(0, 2);
  if (pat.find('/') == std::string::npos) pat = "**/" + pat;
  return match_segments(split(pat), split(rel));
}

}  // namespace caf_agent::sandbox
