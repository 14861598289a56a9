#include "sandbox/file_tools.hpp"

#include "sandbox/output_format.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace caf_agent::sandbox {

std::size_t count_lines(std::string_view text) {
  if (text.empty()) return 0;
  const auto n = static_cast<std::size_t>(std::count(text.begin(), text.end(), '\n'));
  return text.back() == '\n' ? n : n + 1;
}

std::string number_lines(std::string_view text, std::size_t first_line, std::size_t max_lines,
                         std::size_t max_line_chars, std::size_t max_bytes, std::size_t& emitted) {
  std::string out;
  emitted = 0;
  std::size_t line_no = 1;
  std::size_t pos = 0;
  while (pos < text.size() && emitted < max_lines) {
    std::size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    if (line_no >= first_line) {
      std::string_view line = text.substr(pos, end - pos);
      if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
      std::string row = fmt::format("{:>6}\t", line_no);
      if (line.size() > max_line_chars) {
        row.append(line.substr(0, max_line_chars));
        row += fmt::format(" [... line truncated: {} more characters]", line.size() - max_line_chars);
      } else {
        row.append(line);
      }
      if (!out.empty() && out.size() + row.size() > max_bytes) break;
      out += row;
      out += '\n';
      ++emitted;
    }
    ++line_no;
    pos = end + 1;
  }
  return out;
}

std::string apply_edit(std::string& text, const text_edit& e, std::size_t& first_pos, std::size_t max_bytes) {
  if (e.old_string == e.new_string) return "no changes to make: old_string and new_string are exactly the same";
  if (e.old_string.empty()) {
    if (!text.empty()) return "old_string is empty but the file is not; give the exact text to replace";
    if (e.new_string.size() > max_bytes)
      return fmt::format("the result would be {} bytes, over the file size limit of {} bytes", e.new_string.size(),
                         max_bytes);
    text = e.new_string;
    first_pos = 0;
    return {};
  }
  std::size_t count = 0;
  for (std::size_t p = text.find(e.old_string); p != std::string::npos;
       p = text.find(e.old_string, p + e.old_string.size()))
    ++count;
  if (count == 0)
    return fmt::format(
        "old_string was not found in the file (it must match exactly, including "
        "whitespace and indentation):\n{}",
        e.old_string);
  if (count > 1 && !e.replace_all)
    return fmt::format(
        "found {} matches of old_string, but replace_all is false; set replace_all "
        "to true to replace every occurrence, or add surrounding context to make "
        "the match unique:\n{}",
        count, e.old_string);
  // Compared by division, so count * new_string.size() cannot overflow into a small number.
  const std::size_t removed = count * e.old_string.size();
  const std::size_t kept = text.size() - removed;
  if (e.new_string.size() != 0 && count > (max_bytes - std::min(kept, max_bytes)) / e.new_string.size())
    return fmt::format(
        "the result would exceed the file size limit of {} bytes ({} replacements of {} bytes); "
        "nothing was changed",
        max_bytes, count, e.new_string.size());
  if (kept > max_bytes) return fmt::format("the result would exceed the file size limit of {} bytes", max_bytes);
  first_pos = text.find(e.old_string);
  std::string out;
  out.reserve(text.size() + count * e.new_string.size());
  std::size_t from = 0;
  for (std::size_t p = first_pos; p != std::string::npos; p = text.find(e.old_string, from)) {
    out.append(text, from, p - from);
    out += e.new_string;
    from = p + e.old_string.size();
  }
  out.append(text, from, std::string::npos);
  text = std::move(out);
  return {};
}

file_tools::file_tools(const workspace_paths& ws, const sandbox_config& cfg, file_owner owner)
    : ws_(ws), cfg_(cfg), owner_(owner) {}

tool_outcome file_tools::read(const nlohmann::json& args) {
  tool_args a(args, "Read");
  a.reject_unknown({"file_path", "offset", "limit"});
  const auto path = a.str("file_path");
  const auto offset = a.opt_int("offset", 1, INT32_MAX).value_or(1);
  const auto limit = a.opt_int("limit", 1, INT32_MAX).value_or(static_cast<std::int64_t>(cfg_.read_default_lines));
  if (!a.error().empty()) return a.error_outcome();
  auto file = read_workspace_file(ws_, path, cfg_.read_max_file_bytes);
  if (!file.error.empty()) return error_outcome(file.error);
  seen_mtime_ns_[file.real_rel] = file.mtime_ns;
  if (looks_binary(file.data))
    return ok_outcome(
        fmt::format("'{}' is a binary file ({} bytes); not shown. Use xxd or od in "
                    "Bash to inspect it.",
                    path, file.data.size()));
  if (file.data.empty()) return ok_outcome(fmt::format("(the file '{}' exists but is empty)", path));
  const std::size_t total = count_lines(file.data);
  if (static_cast<std::size_t>(offset) > total)
    return error_outcome(fmt::format("offset {} is past the end of '{}' ({} lines)", offset, path, total));
  std::size_t emitted = 0;
  std::string out = number_lines(file.data, static_cast<std::size_t>(offset), static_cast<std::size_t>(limit),
                                 cfg_.read_max_line_chars, cfg_.output_cap_bytes, emitted);
  const std::size_t next = static_cast<std::size_t>(offset) + emitted;
  if (next <= total)
    out += fmt::format("[... {} more lines; call Read with offset={} to continue ...]\n", total - next + 1, next);
  return ok_outcome(sanitize_utf8(out));
}

std::string file_tools::check_fresh(const write_target& target, std::string_view agent_path) const {
  if (!cfg_.require_read_before_edit || !target.exists) return {};
  auto it = seen_mtime_ns_.find(target.real_rel);
  if (it == seen_mtime_ns_.end())
    return fmt::format("'{}' has not been read yet in this episode; Read it first before changing it", agent_path);
  if (it->second != target.mtime_ns)
    return fmt::format(
        "'{}' was modified since it was last read (by a command or another tool); "
        "Read it again before changing it",
        agent_path);
  return {};
}

tool_outcome file_tools::commit(write_target& target, const std::string& content, std::string_view agent_path,
                                std::string success) {
  if (content.size() > cfg_.limits.file_size_bytes)
    return error_outcome(fmt::format("content of {} bytes exceeds the file size limit of {} bytes", content.size(),
                                     cfg_.limits.file_size_bytes));
  if (auto err = atomic_write(target, content, owner_); !err.empty())
    return error_outcome(fmt::format("cannot write '{}': {}", agent_path, err));
  seen_mtime_ns_[target.real_rel] = target.mtime_ns;
  return ok_outcome(std::move(success));
}

tool_outcome file_tools::write(const nlohmann::json& args) {
  tool_args a(args, "Write");
  a.reject_unknown({"file_path", "content"});
  const auto path = a.str("file_path");
  const auto content = a.str("content");
  if (!a.error().empty()) return a.error_outcome();
  auto target = resolve_write_target(ws_, path, owner_, true);
  if (!target.error.empty()) return error_outcome(target.error);
  if (auto err = check_fresh(target, path); !err.empty()) return error_outcome(err);
  const bool existed = target.exists;
  return commit(
      target, content, path,
      existed
          ? fmt::format("The file {} has been overwritten ({} bytes).", ws_.visible(target.real_rel), content.size())
          : fmt::format("File created successfully at: {} ({} bytes)", ws_.visible(target.real_rel), content.size()));
}

}  // namespace caf_agent::sandbox
