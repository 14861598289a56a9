#pragma once
/// @file file_tools.hpp
/// The in-process file tools: Read, Write, Edit, MultiEdit.

#include "sandbox/config.hpp"
#include "sandbox/file_io.hpp"
#include "sandbox/tool_args.hpp"
#include "sandbox/workspace_paths.hpp"

#include <cstdint>
#include <string>
#include <unordered_map>

namespace caf_agent::sandbox {

/// Read/Write/Edit/MultiEdit of one episode; remembers which files the agent has read.
class file_tools {
 public:
  /// Tools over `ws`, configured by `cfg`; files they create get `owner`.
  file_tools(const workspace_paths& ws, const sandbox_config& cfg, file_owner owner);
  /// Read: numbered lines (`cat -n` style) from `offset` (1-based), at most `limit` lines.
  tool_outcome read(const nlohmann::json& args);
  /// Write: creates or replaces a file (parents created).
  tool_outcome write(const nlohmann::json& args);
  /// Edit: replaces one unique `old_string` (or all with `replace_all`).
  tool_outcome edit(const nlohmann::json& args);
  /// MultiEdit: applies a list of edits in order, all or none.
  tool_outcome multi_edit(const nlohmann::json& args);

 private:
  /// Error text when the read-before-edit rule forbids changing `target`, else "".
  std::string check_fresh(const write_target& target, std::string_view agent_path) const;
  /// Writes `content` to `target` and records it as seen.
  tool_outcome commit(write_target& target, const std::string& content, std::string_view agent_path,
                      std::string success);

  const workspace_paths& ws_;
  const sandbox_config& cfg_;
  file_owner owner_;
  std::unordered_map<std::string, std::int64_t> seen_mtime_ns_;
};

/// One replacement inside a text (shared by Edit and MultiEdit).
struct text_edit {
  /// Exact text to find.
  std::string old_string;
  /// Replacement.
  std::string new_string;
  /// Replace every occurrence instead of exactly one.
  bool replace_all = false;
};

/// Applies `e` to `text`; returns an agent-visible error or "" (then `text` is updated and
/// `first_pos` is the byte offset of the first replacement). The size of the result is
/// computed before it is built: an edit whose result would exceed `max_bytes` is refused
/// without allocating it (a replace_all of a 1-byte string by a 100 kB one would otherwise
/// grow the host process by gigabytes before the write-size check).
std::string apply_edit(std::string& text, const text_edit& e, std::size_t& first_pos, std::size_t max_bytes);

/// Formats lines of `text` from 1-based `first_line` as `cat -n` output: at most `max_lines`
/// lines and about `max_bytes` bytes, lines cut at `max_line_chars`. `emitted` gets the count.
std::string number_lines(std::string_view text, std::size_t first_line, std::size_t max_lines,
                         std::size_t max_line_chars, std::size_t max_bytes, std::size_t& emitted);

/// Number of lines in `text` (a final line without newline counts).
std::size_t count_lines(std::string_view text);

}  // namespace caf_agent::sandbox
