#include "sandbox/file_io.hpp"

#include <fmt/format.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>

namespace caf_agent::sandbox {
namespace {

std::int64_t mtime_of(const struct stat& st) {
  return static_cast<std::int64_t>(st.st_mtim.tv_sec) * 1000000000LL + st.st_mtim.tv_nsec;
}

std::string join(const std::string& dir, const std::string& name) {
  return dir == "." || dir.empty() ? name : dir + "/" + name;
}

std::string protected_message(std::string_view agent_path) {
  return fmt::format(
      "'{}' is a protected infrastructure file and cannot be modified; "
      "write your own files instead (e.g. model_new.py)",
      agent_path);
}

/// Opens the directory `rel`, creating missing components when `create`.
int open_dir(const workspace_paths& ws, const std::string& rel, const file_owner& owner, bool create) {
  int fd = ws.open_beneath(rel, O_PATH | O_DIRECTORY);
  if (fd != -ENOENT || !create) return fd;
  std::string cur = ".";
  for (const auto& part : std::filesystem::path(rel)) {
    const std::string next = join(cur, part.string());
    int nfd = ws.open_beneath(next, O_PATH | O_DIRECTORY);
    if (nfd == -ENOENT) {
      unique_fd parent(ws.open_beneath(cur, O_PATH | O_DIRECTORY));
      if (!parent) return parent.get();
      if (::mkdirat(parent.get(), part.c_str(), 0755) != 0 && errno != EEXIST) return -errno;
      if (owner.uid >= 0) (void)::fchownat(parent.get(), part.c_str(), owner.uid, owner.gid, AT_SYMLINK_NOFOLLOW);
      nfd = ws.open_beneath(next, O_PATH | O_DIRECTORY);
    }
    if (nfd < 0) return nfd;
    ::close(nfd);
    cur = next;
  }
  return ws.open_beneath(rel, O_PATH | O_DIRECTORY);
}

}  // namespace

file_contents read_workspace_file(const workspace_paths& ws, std::string_view agent_path, std::size_t max_bytes) {
  file_contents out;
  auto fail = [&out](std::string e) {
    out.error = std::move(e);
    return std::move(out);
  };
  const auto rel = ws.to_relative(agent_path);
  if (!rel.ok()) return fail(rel.error);
  unique_fd fd(ws.open_beneath(rel.rel, O_RDONLY | O_NONBLOCK | O_NOCTTY));
  if (!fd) return fail(workspace_paths::describe_errno(-fd.get(), agent_path));
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) return fail(workspace_paths::describe_errno(errno, agent_path));
  if (S_ISDIR(st.st_mode))
    return fail(fmt::format("'{}' is a directory; use Glob or `ls` in Bash to list it", agent_path));
  if (!S_ISREG(st.st_mode)) return fail(fmt::format("'{}' is not a regular file", agent_path));
  if (static_cast<std::uint64_t>(st.st_size) > max_bytes)
    return fail(
        fmt::format("'{}' is {} bytes, more than the {} byte limit of this tool; use "
                    "Grep, or head/sed -n in Bash, to look at parts of it",
                    agent_path, st.st_size, max_bytes));
  auto real = ws.real_relative(fd.get());
  if (!real.ok()) return fail(real.error);
  out.real_rel = real.rel;
  out.mtime_ns = mtime_of(st);
  out.data.resize(static_cast<std::size_t>(st.st_size));
  std::size_t got = 0;
  while (got < out.data.size()) {
    const ssize_t n = ::pread(fd.get(), out.data.data() + got, out.data.size() - got, static_cast<off_t>(got));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return fail(workspace_paths::describe_errno(errno, agent_path));
    if (n == 0) break;
    got += static_cast<std::size_t>(n);
  }
  out.data.resize(got);
  return out;
}

write_target resolve_write_target(const workspace_paths& ws, std::string_view agent_path, const file_owner& owner,
                                  bool create_parents) {
  write_target t;
  auto fail = [&t](std::string e) {
    t.error = std::move(e);
    return std::move(t);
  };
  auto rel = ws.to_relative(agent_path);
  if (!rel.ok()) return fail(rel.error);
  // Rationale: a bounded number of hops through in-workspace symlinks, like the kernel's ELOOP.
  for (int hop = 0; hop < 8; ++hop) {
    if (rel.rel == ".") return fail(fmt::format("'{}' is a directory, not a file", agent_path));
    if (ws.is_protected(rel.rel)) return fail(protected_message(agent_path));
    const std::filesystem::path p(rel.rel);
    const std::string parent_rel = p.has_parent_path() ? p.parent_path().string() : ".";
    t.name = p.filename().string();
    t.parent = unique_fd(open_dir(ws, parent_rel, owner, create_parents));
    if (!t.parent) return fail(workspace_paths::describe_errno(-t.parent.get(), agent_path));
    const auto real_parent = ws.real_relative(t.parent.get());
    if (!real_parent.ok()) return fail(real_parent.error);
    t.real_rel = join(real_parent.rel, t.name);
    if (ws.is_protected(t.real_rel)) return fail(protected_message(agent_path));
    struct stat st {};
    if (::fstatat(t.parent.get(), t.name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
      if (errno != ENOENT) return fail(workspace_paths::describe_errno(errno, agent_path));
      return t;  // new file
    }
    if (S_ISLNK(st.st_mode)) {
      unique_fd target(ws.open_beneath(t.real_rel, O_PATH));
      if (target.get() == -EXDEV)
        return fail(fmt::format("'{}' is a symlink that points outside the workspace; refused", agent_path));
      if (target.get() == -ENOENT)
        return fail(fmt::format("'{}' is a dangling symlink; write to its target path instead", agent_path));
      if (!target) return fail(workspace_paths::describe_errno(-target.get(), agent_path));
      rel = ws.real_relative(target.get());
      if (!rel.ok()) return fail(rel.error);
      continue;
    }
    if (S_ISDIR(st.st_mode)) return fail(fmt::format("'{}' is a directory, not a file", agent_path));
    if (!S_ISREG(st.st_mode)) return fail(fmt::format("'{}' is not a regular file", agent_path));
    t.exists = true;
    t.mode = st.st_mode & 07777 & ~(S_ISUID | S_ISGID);
    t.mtime_ns = mtime_of(st);
    return t;
  }
  t.error = fmt::format("too many levels of symlinks: {}", agent_path);
  return t;
}

std::string atomic_write(write_target& target, std::string_view content, const file_owner& owner) {
  static std::atomic<unsigned> counter{0};
  const std::string tmp = fmt::format(".{}.caf_tmp.{}.{}", target.name, ::getpid(), counter++);
  const int pfd = target.parent.get();
  unique_fd fd(::openat(pfd, tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
  if (!fd) return fmt::format("cannot create file: {}", std::strerror(errno));
  std::size_t done = 0;
  while (done < content.size()) {
    const ssize_t n = ::write(fd.get(), content.data() + done, content.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int err = errno;
      ::unlinkat(pfd, tmp.c_str(), 0);
      return fmt::format("write failed: {}", std::strerror(err));
    }
    done += static_cast<std::size_t>(n);
  }
  if (owner.uid >= 0) (void)::fchown(fd.get(), owner.uid, owner.gid);
  (void)::fchmod(fd.get(), target.mode);
  if (::renameat(pfd, tmp.c_str(), pfd, target.name.c_str()) != 0) {
    const int err = errno;
    ::unlinkat(pfd, tmp.c_str(), 0);
    return fmt::format("cannot replace file: {}", std::strerror(err));
  }
  struct stat st {};
  if (::fstat(fd.get(), &st) == 0) target.mtime_ns = mtime_of(st);
  target.exists = true;
  return {};
}

}  // namespace caf_agent::sandbox
