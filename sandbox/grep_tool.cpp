#include "sandbox/file_io.hpp"
#include "sandbox/glob_match.hpp"
#include "sandbox/grep_glob.hpp"
#include "sandbox/line_regex.hpp"
#include "sandbox/output_format.hpp"
#include "sandbox/workspace_walk.hpp"

#include <fmt/format.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <algorithm>
#include <map>

namespace caf_agent::sandbox {
namespace {

const std::map<std::string, std::vector<std::string>>& type_globs() {
  static const std::map<std::string, std::vector<std::string>> t = {
      {"py", {"*.py", "*.pyi"}},
      {"cpp", {"*.cpp", "*.cc", "*.cxx", "*.hpp", "*.hh", "*.h"}},
      {"c", {"*.c", "*.h"}},
      {"cuda", {"*.cu", "*.cuh"}},
      {"cu", {"*.cu", "*.cuh"}},
      {"md", {"*.md"}},
      {"json", {"*.json"}},
      {"sh", {"*.sh"}},
      {"txt", {"*.txt"}},
      {"toml", {"*.toml"}},
      {"yaml", {"*.yaml", "*.yml"}},
      {"js", {"*.js"}},
      {"ts", {"*.ts", "*.tsx"}},
      {"rust", {"*.rs"}}};
  return t;
}

struct grep_options {
  std::string mode = "files_with_matches";
  bool line_numbers = false;
  std::size_t before = 0, after = 0, head_limit = 0;
  bool single_file = false;
};

/// Appends the content-mode lines of one file; returns the number of matching lines.
std::size_t grep_content(const std::string& shown, std::string_view text, const line_regex& re, const grep_options& o,
                         std::string& out) {
  std::vector<std::string_view> lines;
  for (std::size_t pos = 0; pos < text.size();) {
    std::size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    lines.push_back(text.substr(pos, end - pos));
    pos = end + 1;
  }
  std::size_t matches = 0, last_printed = 0;  // index of the next unprinted line
  for (std::size_t i = 0; i < lines.size(); ++i) {
    if (!re.search(lines[i])) continue;
    ++matches;
    const std::size_t from = i >= o.before ? i - o.before : 0;
    const std::size_t to = std::min(lines.size() - 1, i + o.after);
    if (last_printed > 0 && from > last_printed && (o.before || o.after)) out += "--\n";
    for (std::size_t k = std::max(from, last_printed); k <= to; ++k) {
      const char sep = (k == i || re.search(lines[k])) ? ':' : '-';
      if (!o.single_file) out += shown + sep;
      if (o.line_numbers) out += std::to_string(k + 1) + sep;
      out.append(lines[k].substr(0, 2000));
      out += '\n';
    }
    last_printed = to + 1;
  }
  return matches;
}

}  // namespace

namespace {

/// Parses the Grep arguments into options; returns an error message or "".
std::string parse_options(tool_args& a, grep_options& o) {
  o.mode = a.opt_str("output_mode").value_or("files_with_matches");
  o.line_numbers = a.opt_bool("-n").value_or(false);
  // Rationale: 100 context lines either side is more than any useful excerpt.
  const auto c = a.opt_int("-C", 0, 100);
  o.before = static_cast<std::size_t>(a.opt_int("-B", 0, 100).value_or(c.value_or(0)));
  o.after = static_cast<std::size_t>(a.opt_int("-A", 0, 100).value_or(c.value_or(0)));
  o.head_limit = static_cast<std::size_t>(a.opt_int("head_limit", 1, 1000000).value_or(0));
  if (!a.error().empty()) return a.error();
  if (o.mode != "content" && o.mode != "files_with_matches" && o.mode != "count")
    return fmt::format("argument 'output_mode' must be content, files_with_matches or count, got '{}'", o.mode);
  return {};
}

/// Files to search: the single file, or the walk of a directory filtered by glob/type.
std::string collect_files(const workspace_paths& ws, const std::string& path, const std::vector<std::string>& globs,
                          std::vector<walk_entry>& files, bool& single) {
  auto rel = ws.to_relative(path);
  if (!rel.ok()) return rel.error;
  unique_fd fd(ws.open_beneath(rel.rel, O_PATH));
  if (!fd) return workspace_paths::describe_errno(-fd.get(), path);
  auto real = ws.real_relative(fd.get());
  if (!real.ok()) return real.error;
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) return workspace_paths::describe_errno(errno, path);
  single = !S_ISDIR(st.st_mode);
  if (single) {
    files.push_back(
        {real.rel, static_cast<std::uint64_t>(st.st_size), st.st_mtim.tv_sec * 1000000000LL + st.st_mtim.tv_nsec});
    return {};
  }
  const std::size_t strip = real.rel == "." ? 0 : real.rel.size() + 1;
  walk_files(ws, real.rel, kMaxWalkEntries, [&](const walk_entry& e) {
    const std::string_view sub = std::string_view(e.rel).substr(strip);
    bool keep = globs.empty();
    for (const auto& g : globs) keep = keep || glob_match(g, sub);
    if (keep) files.push_back(e);
  });
  return {};
}

std::vector<std::string> filter_globs(tool_args& a) {
  std::vector<std::string> globs;
  if (auto g = a.opt_str("glob")) globs = expand_braces(*g);
  if (auto t = a.opt_str("type")) {
    auto it = type_globs().find(*t);
    if (it == type_globs().end()) return {"\x01unknown"};
    globs.insert(globs.end(), it->second.begin(), it->second.end());
  }
  return globs;
}

}  // namespace

tool_outcome grep_tool(const workspace_paths& ws, const sandbox_config& cfg, const nlohmann::json& args) {
  tool_args a(args, "Grep");
  a.reject_unknown({"pattern", "path", "glob", "type", "output_mode", "-i", "-n", "-A", "-B", "-C", "head_limit"});
  const auto pattern = a.str("pattern");
  const auto path = a.opt_str("path").value_or(".");
  const bool icase = a.opt_bool("-i").value_or(false);
  grep_options o;
  const auto globs = filter_globs(a);
  if (auto err = parse_options(a, o); !err.empty()) return error_outcome("invalid arguments for Grep: " + err);
  if (globs.size() == 1 && globs[0] == "\x01unknown")
    return error_outcome(
        "invalid arguments for Grep: unknown 'type' (known: py, cpp, c, cuda, md, json, sh, txt, toml, yaml, js, ts, "
        "rust)");
  std::string regex_error;
  const auto re = line_regex::compile(pattern, icase, cfg.regex_max_program_bytes, regex_error);
  if (!re) return error_outcome(regex_error);
  std::vector<walk_entry> files;
  if (auto err = collect_files(ws, path, globs, files, o.single_file); !err.empty()) return error_outcome(err);
  std::sort(files.begin(), files.end(), [&](const walk_entry& x, const walk_entry& y) {
    if (o.mode == "files_with_matches" && x.mtime_ns != y.mtime_ns) return x.mtime_ns > y.mtime_ns;
    return x.rel < y.rel;
  });
  std::string out;
  std::size_t entries = 0, total_matches = 0;
  for (const auto& f : files) {
    if (f.size > cfg.grep_max_file_bytes) continue;
    if (out.size() > 4 * cfg.output_cap_bytes || (o.head_limit && entries >= o.head_limit)) break;
    auto file = read_workspace_file(ws, ws.visible(f.rel), cfg.grep_max_file_bytes);
    if (!file.error.empty() || looks_binary(file.data)) continue;
    const std::string shown = ws.visible(f.rel);
    std::string chunk;
    const std::size_t n = grep_content(shown, file.data, *re, o, chunk);
    if (n == 0) continue;
    total_matches += n;
    if (o.mode == "content")
      out += chunk;
    else if (o.mode == "count")
      out += fmt::format("{}:{}\n", shown, n);
    else
      out += shown + "\n";
    ++entries;
  }
  if (o.mode == "content" && o.head_limit) {
    std::size_t pos = 0, kept = 0;
    while (pos < out.size() && kept < o.head_limit) pos = out.find('\n', pos) + 1, ++kept;
    if (pos > 0 && pos < out.size()) out.resize(pos);
  }
  if (out.empty()) return ok_outcome("No matches found");
  if (o.mode == "count") out += fmt::format("Total: {} matching lines in {} files\n", total_matches, entries);
  return ok_outcome(to_observation(std::move(out), cfg.output_cap_bytes));
}

}  // namespace caf_agent::sandbox
