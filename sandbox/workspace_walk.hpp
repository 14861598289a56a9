#pragma once
/// @file workspace_walk.hpp
/// Race-free recursive listing of a workspace subtree (openat per level, no symlink follow).

#include "sandbox/workspace_paths.hpp"

#include <cstdint>
#include <functional>
#include <string>

namespace caf_agent::sandbox {

/// One regular file found by `walk_files`.
struct walk_entry {
  /// Workspace-relative path.
  std::string rel;
  /// Size in bytes.
  std::uint64_t size = 0;
  /// Modification time, ns since the epoch.
  std::int64_t mtime_ns = 0;
};

/// Calls `visit` for each regular file under directory `start_rel`, skipping hidden names
/// (leading '.') and never following symlinks. Stops after `max_entries` directory entries;
/// returns false when it stopped early.
bool walk_files(const workspace_paths& ws, const std::string& start_rel, std::size_t max_entries,
                const std::function<void(const walk_entry&)>& visit);

}  // namespace caf_agent::sandbox
