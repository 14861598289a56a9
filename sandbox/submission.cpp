#include "sandbox/submission.hpp"

#include "sandbox/workspace_paths.hpp"

#include <fmt/format.h>

#include <dirent.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <cerrno>
#include <cstring>

namespace caf_agent::sandbox {
namespace {

constexpr int kOpenFlags = O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | O_NOCTTY;

/// Opens `name` (one component) in `dir_fd` without following a final symlink; -errno.
int open_component(int dir_fd, const std::string& name, int extra_flags) {
  const int fd = ::openat(dir_fd, name.c_str(), kOpenFlags | extra_flags);
  return fd >= 0 ? fd : -errno;
}

class collector {
 public:
  collector(const submission_limits& limits, submission& out) : limits_(limits), out_(out) {}

  /// Reads the open regular file `fd` as `rel`; false (with out_.error) when refused.
  bool add_file(int fd, const std::string& rel) {
    struct stat st {};
    if (::fstat(fd, &st) != 0) return fail(fmt::format("cannot stat {}: {}", rel, std::strerror(errno)));
    if (!S_ISREG(st.st_mode))
      return fail(fmt::format("{} is not a regular file; the submission may hold only regular files", rel));
    if (st.st_nlink > 1)
      return fail(
          fmt::format("{} has {} hard links; links are refused in a submission (copy the file "
                      "instead)",
                      rel, st.st_nlink));
    if (static_cast<std::uint64_t>(st.st_size) > limits_.max_file_bytes)
      return fail(fmt::format("{} is larger than {} bytes", rel, limits_.max_file_bytes));
    std::string data;
    data.resize(static_cast<std::size_t>(st.st_size));
    std::size_t got = 0;
    // Bounded by the size seen at fstat: a file growing under us is cut there, never read on.
    while (got < data.size()) {
      const ssize_t n = ::read(fd, data.data() + got, data.size() - got);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) return fail(fmt::format("cannot read {}: {}", rel, std::strerror(errno)));
      if (n == 0) break;
      got += static_cast<std::size_t>(n);
    }
    data.resize(got);
    total_ += got;
    if (total_ > limits_.max_total_bytes)
      return fail(fmt::format("the submission is larger than {} bytes in all", limits_.max_total_bytes));
    out_.files[rel] = std::move(data);
    return true;
  }

  /// Walks the open directory `dir_fd` (owned) as `rel`.
  bool add_dir(int dir_fd, const std::string& rel, std::size_t depth) {
    if (depth > limits_.max_depth)
      return ::close(dir_fd), fail(fmt::format("{} is nested deeper than {} directories", rel, limits_.max_depth));
    DIR* dir = ::fdopendir(dir_fd);
    if (dir == nullptr) return ::close(dir_fd), fail(fmt::format("cannot list {}: {}", rel, std::strerror(errno)));
    bool ok = true;
    while (ok) {
      errno = 0;
      const dirent* d = ::readdir(dir);
      if (d == nullptr) break;
      const std::string name = d->d_name;
      if (name == "." || name == "..") continue;
      const std::string child = rel + "/" + name;
      if (++entries_ > limits_.max_entries) {
        ok = fail(fmt::format("kernels/ holds more than {} entries", limits_.max_entries));
        break;
      }
      struct stat st {};
      if (::fstatat(::dirfd(dir), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) continue;  // removed meanwhile
      if (S_ISLNK(st.st_mode)) {
        ok = fail(link_refused(child));
      } else if (S_ISDIR(st.st_mode)) {
        const int fd = open_component(::dirfd(dir), name, O_DIRECTORY);
        ok = fd >= 0 ? add_dir(fd, child, depth + 1) : fail(open_error(-fd, child));
      } else {
        const int fd = open_component(::dirfd(dir), name, 0);
        if (fd < 0) {
          ok = fail(open_error(-fd, child));
        } else {
          ok = add_file(fd, child);
          ::close(fd);
        }
      }
    }
    ::closedir(dir);
    return ok;
  }

  bool fail(std::string message) {
    if (out_.error.empty()) out_.error = std::move(message);
    return false;
  }

  static std::string link_refused(const std::string& rel) {
    return fmt::format("{} is a symbolic link; links are refused in a submission (copy the file instead)", rel);
  }

  static std::string open_error(int err, const std::string& rel) {
    // ELOOP: the final component became a symlink between fstatat and open (O_NOFOLLOW).
    if (err == ELOOP || err == EXDEV) return link_refused(rel);
    return fmt::format("cannot open {}: {}", rel, std::strerror(err));
  }

 private:
  const submission_limits& limits_;
  submission& out_;
  std::uint64_t total_ = 0;
  std::size_t entries_ = 0;
};

/// openat2 beneath `root_fd` refusing every symlink on the way; -errno.
int open_beneath_no_links(int root_fd, const char* rel, int flags) {
  open_how how{};
  how.flags = static_cast<unsigned long long>(flags);
  how.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS;
  for (;;) {
    const long fd = ::syscall(SYS_openat2, root_fd, rel, &how, sizeof(how));
    if (fd >= 0) return static_cast<int>(fd);
    if (errno != EINTR && errno != EAGAIN) return -errno;
  }
}

}  // namespace

submission collect_submission(const std::string& host_dir, const submission_limits& limits) {
  submission out;
  unique_fd root(::open(host_dir.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  if (!root) {
    out.error = fmt::format("cannot open the workspace: {}", std::strerror(errno));
    return out;
  }
  collector c(limits, out);
  const int model_fd = open_beneath_no_links(root.get(), "model_new.py", kOpenFlags);
  if (model_fd >= 0) {
    const bool ok = c.add_file(model_fd, "model_new.py");
    ::close(model_fd);
    if (!ok) return out;
  } else if (-model_fd != ENOENT) {
    c.fail(collector::open_error(-model_fd, "model_new.py"));
    return out;
  }
  const int kernels_fd = open_beneath_no_links(root.get(), "kernels", kOpenFlags | O_DIRECTORY);
  if (kernels_fd >= 0) {
    c.add_dir(kernels_fd, "kernels", 0);
  } else if (-kernels_fd != ENOENT) {
    // ENOTDIR: a symlink (refused) or a plain file named kernels (no kernels; ignored).
    struct stat st {};
    const bool link = ::fstatat(root.get(), "kernels", &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(st.st_mode);
    if (link || -kernels_fd != ENOTDIR) c.fail(collector::open_error(link ? ELOOP : -kernels_fd, "kernels"));
  }
  if (!out.error.empty()) out.files.clear();
  return out;
}

}  // namespace caf_agent::sandbox
