#include "sandbox/glob_match.hpp"
#include "sandbox/grep_glob.hpp"
#include "sandbox/workspace_walk.hpp"

#include <fmt/format.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <algorithm>

namespace caf_agent::sandbox {

tool_outcome glob_tool(const workspace_paths& ws, const sandbox_config& cfg, const nlohmann::json& args) {
  tool_args a(args, "Glob");
  a.reject_unknown({"pattern", "path"});
  const auto pattern = a.str("pattern");
  const auto path = a.opt_str("path").value_or(".");
  if (!a.error().empty()) return a.error_outcome();
  if (pattern.empty()) return error_outcome("invalid arguments for Glob: 'pattern' must not be empty");
  auto rel = ws.to_relative(path);
  if (!rel.ok()) return error_outcome(rel.error);
  unique_fd dir(ws.open_beneath(rel.rel, O_PATH | O_DIRECTORY));
  if (!dir) return error_outcome(workspace_paths::describe_errno(-dir.get(), path));
  auto base = ws.real_relative(dir.get());
  if (!base.ok()) return error_outcome(base.error);
  auto pat = pattern;
  const std::string root_prefix = ws.visible(base.rel) + "/";
  if (pat.rfind(root_prefix, 0) == 0) pat.erase(0, root_prefix.size());
  const auto patterns = expand_braces(pat);
  std::vector<walk_entry> hits;
  const std::size_t strip = base.rel == "." ? 0 : base.rel.size() + 1;
  const bool complete = walk_files(ws, base.rel, kMaxWalkEntries, [&](const walk_entry& e) {
    const std::string_view sub = std::string_view(e.rel).substr(strip);
    for (const auto& p : patterns)
      if (glob_match(p, sub)) {
        hits.push_back(e);
        return;
      }
  });
  if (hits.empty())
    return ok_outcome(complete ? "No files found" : "No files found (search stopped early: too many files)");
  std::sort(hits.begin(), hits.end(), [](const walk_entry& x, const walk_entry& y) {
    return x.mtime_ns != y.mtime_ns ? x.mtime_ns > y.mtime_ns : x.rel < y.rel;
  });
  std::string out;
  for (std::size_t i = 0; i < hits.size() && i < kMaxGlobResults; ++i) out += ws.visible(hits[i].rel) + "\n";
  if (hits.size() > kMaxGlobResults)
    out += fmt::format("[... {} more files not shown; use a more specific pattern or path ...]\n",
                       hits.size() - kMaxGlobResults);
  if (!complete) out += "[... search stopped early: too many files ...]\n";
  (void)cfg;
  return ok_outcome(out);
}

}  // namespace caf_agent::sandbox
