#include "sandbox/workspace_paths.hpp"

#include <fmt/format.h>

#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <cerrno>
#include <climits>
#include <cstring>
#include <filesystem>

namespace caf_agent::sandbox {

unique_fd::~unique_fd() {
  if (fd_ >= 0) ::close(fd_);
}

unique_fd& unique_fd::operator=(unique_fd&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = other.release();
  }
  return *this;
}

workspace_paths::workspace_paths(const std::string& host_dir, std::string visible_root,
                                 std::vector<std::string> protected_paths)
    : visible_root_(std::move(visible_root)), protected_(std::move(protected_paths)) {
  std::error_code ec;
  host_root_ = std::filesystem::canonical(host_dir, ec).string();
  if (ec) {
    error_ = fmt::format("workspace '{}' cannot be opened: {}", host_dir, ec.message());
    return;
  }
  root_ = unique_fd(::open(host_root_.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  if (!root_) error_ = fmt::format("workspace '{}' cannot be opened: {}", host_dir, std::strerror(errno));
  while (visible_root_.size() > 1 && visible_root_.back() == '/') visible_root_.pop_back();
  for (auto& p : protected_) p = std::filesystem::path(p).lexically_normal().string();
  for (auto& p : protected_)
    while (p.size() > 1 && p.back() == '/') p.pop_back();
}

path_result workspace_paths::to_relative(std::string_view agent_path) const {
  if (agent_path.empty()) return {"", "path is empty"};
  if (agent_path.find('\0') != std::string_view::npos) return {"", "path contains a NUL byte"};
  std::filesystem::path p(agent_path);
  if (!p.is_absolute()) p = std::filesystem::path(visible_root_) / p;
  const auto norm = p.lexically_normal();
  const auto rel = norm.lexically_relative(visible_root_);
  const std::string rel_s = rel.string();
  if (rel.empty() || rel_s == ".." || rel_s.rfind("../", 0) == 0)
    return {"", fmt::format("path '{}' is outside the workspace {}", agent_path, visible_root_)};
  std::string out = rel_s;
  while (out.size() > 1 && out.back() == '/') out.pop_back();
  return {out.empty() ? "." : out, ""};
}

int workspace_paths::open_beneath(const std::string& rel, int flags, unsigned mode) const {
  open_how how{};
  how.flags = static_cast<unsigned long long>(flags | O_CLOEXEC);
  how.mode = (flags & (O_CREAT | O_TMPFILE)) ? mode : 0;
  how.resolve = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS;
  for (;;) {
    long fd = ::syscall(SYS_openat2, root_.get(), rel.c_str(), &how, sizeof(how));
    if (fd >= 0) return static_cast<int>(fd);
    if (errno != EINTR && errno != EAGAIN) return -errno;
  }
}

path_result workspace_paths::real_relative(int fd) const {
  char buf[PATH_MAX];
  const std::string link = fmt::format("/proc/self/fd/{}", fd);
  const ssize_t n = ::readlink(link.c_str(), buf, sizeof(buf) - 1);
  if (n < 0) return {"", fmt::format("cannot resolve path: {}", std::strerror(errno))};
  const std::string real(buf, static_cast<std::size_t>(n));
  if (real == host_root_) return {".", ""};
  if (real.rfind(host_root_ + "/", 0) != 0) return {"", "path resolves outside the workspace"};
  return {real.substr(host_root_.size() + 1), ""};
}

bool workspace_paths::is_protected(const std::string& rel) const {
  for (const auto& p : protected_)
    if (rel == p || (rel.size() > p.size() && rel.compare(0, p.size(), p) == 0 && rel[p.size()] == '/')) return true;
  return false;
}

std::string workspace_paths::visible(const std::string& rel) const {
  if (rel == "." || rel.empty()) return visible_root_;
  return visible_root_ + "/" + rel;
}

std::string workspace_paths::describe_errno(int err, std::string_view agent_path) {
  switch (err) {
    case EXDEV:
      return fmt::format("path '{}' resolves outside the workspace (symlink or '..' escape); refused", agent_path);
    case ENOENT:
      return fmt::format("file does not exist: {}", agent_path);
    case ENOTDIR:
      return fmt::format("a component of '{}' is not a directory", agent_path);
    case EISDIR:
      return fmt::format("'{}' is a directory, not a file", agent_path);
    case EACCES:
    case EPERM:
      return fmt::format("permission denied: {}", agent_path);
    case ELOOP:
      return fmt::format("too many levels of symlinks: {}", agent_path);
    case ENAMETOOLONG:
      return fmt::format("path too long: {}", agent_path);
    default:
      return fmt::format("cannot open '{}': {}", agent_path, std::strerror(err));
  }
}

}  // namespace caf_agent::sandbox
