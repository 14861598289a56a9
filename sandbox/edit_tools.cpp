// Edit and MultiEdit: exact-match replacement with all-or-nothing semantics.
#include "sandbox/file_tools.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace caf_agent::sandbox {
namespace {

/// A few numbered lines around byte `pos` so the agent sees the result of its edit.
std::string snippet(const std::string& text, std::size_t pos, std::size_t new_len, std::size_t max_chars) {
  // Rationale: 4 lines of context either side, as coding agents show after an edit.
  constexpr std::size_t kContext = 4;
  const std::size_t line = static_cast<std::size_t>(std::count(
                               text.begin(), text.begin() + static_cast<long>(std::min(pos, text.size())), '\n')) +
                           1;
  const std::size_t span = static_cast<std::size_t>(
      std::count(text.begin() + static_cast<long>(std::min(pos, text.size())),
                 text.begin() + static_cast<long>(std::min(pos + new_len, text.size())), '\n'));
  const std::size_t first = line > kContext ? line - kContext : 1;
  std::size_t emitted = 0;
  // Rationale: a snippet of at most 40 lines / 4 kB; the agent can Read for more.
  return number_lines(text, first, std::min<std::size_t>(span + 2 * kContext + 1, 40), max_chars, 4096, emitted);
}

/// Parses one element of MultiEdit's `edits` array.
std::string parse_edit(const nlohmann::json& j, std::size_t index, text_edit& out) {
  if (!j.is_object()) return fmt::format("edits[{}] must be an object", index);
  auto it = j.find("old_string");
  if (it == j.end() || !it->is_string()) return fmt::format("edits[{}].old_string must be a string", index);
  out.old_string = it->get<std::string>();
  it = j.find("new_string");
  if (it == j.end() || !it->is_string()) return fmt::format("edits[{}].new_string must be a string", index);
  out.new_string = it->get<std::string>();
  it = j.find("replace_all");
  if (it != j.end() && !it->is_null()) {
    if (!it->is_boolean()) return fmt::format("edits[{}].replace_all must be a boolean", index);
    out.replace_all = it->get<bool>();
  }
  for (const auto& [key, value] : j.items())
    if (key != "old_string" && key != "new_string" && key != "replace_all")
      return fmt::format("edits[{}] has unknown key '{}'", index, key);
  return {};
}

}  // namespace

tool_outcome file_tools::edit(const nlohmann::json& args) {
  tool_args a(args, "Edit");
  a.reject_unknown({"file_path", "old_string", "new_string", "replace_all"});
  text_edit e;
  const auto path = a.str("file_path");
  e.old_string = a.str("old_string");
  e.new_string = a.str("new_string");
  e.replace_all = a.opt_bool("replace_all").value_or(false);
  if (!a.error().empty()) return a.error_outcome();
  auto target = resolve_write_target(ws_, path, owner_, e.old_string.empty());
  if (!target.error.empty()) return error_outcome(target.error);
  if (!target.exists && !e.old_string.empty()) return error_outcome(fmt::format("file does not exist: {}", path));
  if (auto err = check_fresh(target, path); !err.empty()) return error_outcome(err);
  std::string text;
  if (target.exists) {
    auto file = read_workspace_file(ws_, ws_.visible(target.real_rel), cfg_.limits.file_size_bytes);
    if (!file.error.empty()) return error_outcome(file.error);
    text = std::move(file.data);
  }
  std::size_t pos = 0;
  if (auto err = apply_edit(text, e, pos, cfg_.limits.file_size_bytes); !err.empty()) return error_outcome(err);
  const std::string shown = ws_.visible(target.real_rel);
  const auto msg = fmt::format("The file {} has been updated. Result around the edit:\n{}", shown,
                               snippet(text, pos, e.new_string.size(), cfg_.read_max_line_chars));
  return commit(target, text, path, msg);
}

tool_outcome file_tools::multi_edit(const nlohmann::json& args) {
  tool_args a(args, "MultiEdit");
  a.reject_unknown({"file_path", "edits"});
  const auto path = a.str("file_path");
  const auto& list = a.array("edits");
  if (a.error().empty() && list.empty())
    return error_outcome("invalid arguments for MultiEdit: 'edits' must not be empty");
  if (!a.error().empty()) return a.error_outcome();
  std::vector<text_edit> edits(list.size());
  for (std::size_t i = 0; i < list.size(); ++i)
    if (auto err = parse_edit(list[i], i, edits[i]); !err.empty())
      return error_outcome("invalid arguments for MultiEdit: " + err);
  auto target = resolve_write_target(ws_, path, owner_, edits.front().old_string.empty());
  if (!target.error.empty()) return error_outcome(target.error);
  if (!target.exists && !edits.front().old_string.empty())
    return error_outcome(fmt::format("file does not exist: {}", path));
  if (auto err = check_fresh(target, path); !err.empty()) return error_outcome(err);
  std::string text;
  if (target.exists) {
    auto file = read_workspace_file(ws_, ws_.visible(target.real_rel), cfg_.limits.file_size_bytes);
    if (!file.error.empty()) return error_outcome(file.error);
    text = std::move(file.data);
  }
  for (std::size_t i = 0; i < edits.size(); ++i) {
    std::size_t pos = 0;
    if (auto err = apply_edit(text, edits[i], pos, cfg_.limits.file_size_bytes); !err.empty())
      return error_outcome(fmt::format("edit {} of {} failed, no edits were applied: {}", i + 1, edits.size(), err));
  }
  return commit(target, text, path, fmt::format("Applied {} edits to {}.", edits.size(), ws_.visible(target.real_rel)));
}

}  // namespace caf_agent::sandbox
