#pragma once
/// @file file_io.hpp
/// Race-free reads and atomic writes of workspace files (used by the file tools).

#include "sandbox/workspace_paths.hpp"

#include <sys/types.h>
#include <cstdint>
#include <string>
#include <string_view>

namespace caf_agent::sandbox {

/// Host owner given to files the tools create; -1 keeps the caller's.
struct file_owner {
  /// Host uid, or -1.
  int uid = -1;
  /// Host gid, or -1.
  int gid = -1;
};

/// A regular file read from the workspace.
struct file_contents {
  /// The bytes.
  std::string data;
  /// Workspace-relative real path (symlinks resolved).
  std::string real_rel;
  /// Modification time, ns since the epoch.
  std::int64_t mtime_ns = 0;
  /// Agent-visible error; empty on success.
  std::string error;
};

/// Reads a regular file named by the agent, refusing non-regular files and files over `max_bytes`.
file_contents read_workspace_file(const workspace_paths& ws, std::string_view agent_path, std::size_t max_bytes);

/// Where a write will land: the parent directory and final name after symlinks.
struct write_target {
  /// O_PATH descriptor of the real parent directory.
  unique_fd parent;
  /// Final component.
  std::string name;
  /// Workspace-relative real path of the file.
  std::string real_rel;
  /// True when the file exists.
  bool exists = false;
  /// Mode of the existing file (0644 for new ones).
  mode_t mode = 0644;
  /// Modification time of the existing file, ns.
  std::int64_t mtime_ns = 0;
  /// Agent-visible error; empty on success.
  std::string error;
};

/// Resolves `agent_path` for writing: confined to the workspace, symlinks followed only
/// inside it, protected paths refused; creates missing parents when `create_parents`.
write_target resolve_write_target(const workspace_paths& ws, std::string_view agent_path, const file_owner& owner,
                                  bool create_parents);

/// Replaces the target's content atomically (temp file + rename); returns an error or "".
/// On success `target.mtime_ns` holds the new modification time.
std::string atomic_write(write_target& target, std::string_view content, const file_owner& owner);

}  // namespace caf_agent::sandbox
