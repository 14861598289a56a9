#pragma once
/// @file workspace_paths.hpp
/// Confines in-process file access to one workspace directory.
///
/// Every open goes through openat2(RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS) relative to a
/// descriptor of the workspace, so `..`, absolute symlinks and symlinks that leave the
/// workspace fail in the kernel, with no check-then-use race against a running shell.

#include <string>
#include <string_view>
#include <vector>

namespace caf_agent::sandbox {

/// A path the agent named, resolved to a workspace-relative form, or an error message.
struct path_result {
  /// Workspace-relative path ("." for the root); empty on error.
  std::string rel;
  /// Agent-visible error message; empty on success.
  std::string error;
  /// True on success.
  bool ok() const { return error.empty(); }
};

/// An owned file descriptor (closed on destruction).
class unique_fd {
 public:
  /// Takes ownership of `fd` (-1 means none).
  explicit unique_fd(int fd = -1) : fd_(fd) {}
  ~unique_fd();
  unique_fd(unique_fd&& other) noexcept : fd_(other.release()) {}
  unique_fd& operator=(unique_fd&& other) noexcept;
  unique_fd(const unique_fd&) = delete;
  unique_fd& operator=(const unique_fd&) = delete;
  /// The raw descriptor.
  int get() const { return fd_; }
  /// Gives up ownership.
  int release() {
    int f = fd_;
    fd_ = -1;
    return f;
  }
  /// True when a descriptor is held.
  explicit operator bool() const { return fd_ >= 0; }

 private:
  int fd_;
};

/// The workspace as seen by the file tools.
class workspace_paths {
 public:
  /// Opens `host_dir`; `visible_root` is the absolute path the agent sees for it.
  /// On failure `error()` is non-empty.
  workspace_paths(const std::string& host_dir, std::string visible_root, std::vector<std::string> protected_paths);
  /// Empty when the workspace opened fine.
  const std::string& error() const { return error_; }
  /// Turns an agent path (relative, or absolute under the visible root) into a relative one.
  path_result to_relative(std::string_view agent_path) const;
  /// Opens `rel` beneath the workspace; returns the fd or -errno.
  int open_beneath(const std::string& rel, int flags, unsigned mode = 0) const;
  /// The workspace-relative real path of an open descriptor, or an error.
  path_result real_relative(int fd) const;
  /// True when `rel` is, or lies inside, a protected path.
  bool is_protected(const std::string& rel) const;
  /// The absolute path the agent sees for `rel`.
  std::string visible(const std::string& rel) const;
  /// The agent-visible root.
  const std::string& visible_root() const { return visible_root_; }
  /// The host directory (real path).
  const std::string& host_root() const { return host_root_; }
  /// Descriptor of the workspace directory.
  int root_fd() const { return root_.get(); }
  /// Message for an errno from `open_beneath`, naming the agent's path.
  static std::string describe_errno(int err, std::string_view agent_path);

 private:
  unique_fd root_;
  std::string host_root_;
  std::string visible_root_;
  std::vector<std::string> protected_;
  std::string error_;
};

}  // namespace caf_agent::sandbox
