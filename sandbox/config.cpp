#include "sandbox/config.hpp"

#include <fmt/format.h>

namespace caf_agent::sandbox {
namespace {

std::string check_limits(const resource_limits& l) {
  if (l.cpu_seconds == 0) return "limits.cpu_seconds must be > 0";
  // Rationale: below 256 MiB even bash and the dynamic loader fail to start.
  if (l.address_space_bytes < (256ULL << 20)) return "limits.address_space_bytes must be >= 256 MiB";
  // Rationale: bwrap needs two processes of its own before the command starts.
  if (l.max_processes < 8) return "limits.max_processes must be >= 8";
  if (l.file_size_bytes == 0) return "limits.file_size_bytes must be > 0";
  // Rationale: the dynamic loader and bash need a handful of descriptors.
  if (l.open_files < 32) return "limits.open_files must be >= 32";
  return {};
}

std::string check_relative(const std::string& field, const std::string& p) {
  std::filesystem::path path(p);
  if (p.empty() || path.is_absolute()) return fmt::format("{} entry '{}' must be a non-empty relative path", field, p);
  for (const auto& part : path)
    if (part == "..") return fmt::format("{} entry '{}' must not contain '..'", field, p);
  return {};
}

std::string check_binds(const sandbox_config& c) {
  for (const auto& p : c.protected_paths)
    if (auto e = check_relative("protected_paths", p); !e.empty()) return e;
  for (const auto& p : c.system_ro_binds)
    if (p.empty() || p[0] != '/') return fmt::format("system_ro_binds entry '{}' must be absolute", p);
  for (const auto& b : c.extra_ro_binds) {
    if (b.source.empty() || b.source[0] != '/')
      return fmt::format("extra_ro_binds source '{}' must be absolute", b.source);
    if (!b.dest.empty() && b.dest[0] != '/') return fmt::format("extra_ro_binds dest '{}' must be absolute", b.dest);
    if (!std::filesystem::exists(b.source)) return fmt::format("extra_ro_binds source '{}' does not exist", b.source);
  }
  return {};
}

}  // namespace

std::string sandbox_config::validate() const {
  if (workspace.empty() || !workspace.is_absolute()) return "workspace must be an absolute path";
  std::error_code ec;
  if (!std::filesystem::is_directory(workspace, ec))
    return fmt::format("workspace '{}' is not an existing directory", workspace.string());
  if (mount_point.size() < 2 || mount_point[0] != '/') return "mount_point must be an absolute path other than /";
  if (!(default_timeout_s > 0)) return "default_timeout_s must be > 0";
  if (!(max_timeout_s >= default_timeout_s)) return "max_timeout_s must be >= default_timeout_s";
  // Rationale: below 1 kB not even one compiler error fits in an observation.
  if (output_cap_bytes < 1024) return "output_cap_bytes must be >= 1024";
  if (read_max_file_bytes == 0) return "read_max_file_bytes must be > 0";
  if (read_default_lines == 0) return "read_default_lines must be > 0";
  if (read_max_line_chars < 80) return "read_max_line_chars must be >= 80";
  if (grep_max_file_bytes == 0) return "grep_max_file_bytes must be > 0";
  // Rationale: RE2 needs some tens of kB for even a trivial program.
  if (regex_max_program_bytes < (64U << 10)) return "regex_max_program_bytes must be >= 64 KiB";
  if (background_buffer_bytes < 1024) return "background_buffer_bytes must be >= 1024";
  if (tmpfs_bytes < (1ULL << 20)) return "tmpfs_bytes must be >= 1 MiB";
  if (shm_bytes < (1ULL << 20)) return "shm_bytes must be >= 1 MiB";
  if (host_uid_count == 0 || host_uid_base < 1000 || host_uid_base + std::uint64_t{host_uid_count} > 0xFFFFFFFEULL)
    return "host_uid_base/host_uid_count must describe a range of unprivileged uids (>= 1000)";
  if (uid_lock_dir.empty() || uid_lock_dir[0] != '/') return "uid_lock_dir must be absolute";
  if (bwrap_path.empty()) return "bwrap_path must not be empty";
  if (bash_path.empty() || bash_path[0] != '/') return "bash_path must be absolute";
  if (auto e = check_limits(limits); !e.empty()) return e;
  // Rationale: below 256 MiB a compiler or the Python interpreter cannot start.
  if (episode_limits.memory_bytes != 0 && episode_limits.memory_bytes < (256ULL << 20))
    return "episode_limits.memory_bytes must be 0 (no limit) or >= 256 MiB";
  if (episode_limits.max_pids != 0 && episode_limits.max_pids < 16) return "episode_limits.max_pids must be 0 or >= 16";
  if (!(episode_limits.cpus >= 0)) return "episode_limits.cpus must be >= 0";
  // Rationale: the template and harness need a few MB before the agent writes anything.
  if (workspace_bytes != 0 && workspace_bytes < (16ULL << 20)) return "workspace_bytes must be 0 (no cap) or >= 16 MiB";
  return check_binds(*this);
}

}  // namespace caf_agent::sandbox
