#pragma once
// base/remove_tree.hpp: removes a directory tree (or one file, or a symlink) with nftw(3) from
// libc, depth first, never following a symlink (FTW_PHYS): a link is removed, its target is not
// touched, however the tree was built (workspaces hold whatever the agent wrote).
//
// Rationale: not std::filesystem::remove_all. A binary that links LibTorch from the PyPI wheel can
// bind std::filesystem calls to the copy libtorch_cpu.so exports (LD_DEBUG=bindings shows it), and
// that copy's remove_all jumped to address 0 on the H200 image (learner/weight_sync_bench, torch
// 2.11). tools/check_layering.sh keeps remove_all out of the sources.
#include <ftw.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstdio>
#include <string>
#include <system_error>

namespace caf_agent::base {

namespace detail {
inline int remove_entry(const char* path, const struct stat*, int, struct FTW*) {
  // remove(3) is unlink(2) for a file or link and rmdir(2) for a directory (emptied by now).
  return std::remove(path) == 0 || errno == ENOENT ? 0 : errno;
}
}  // namespace detail

/// Removes `path` and everything below it. A path that does not exist is no error; otherwise the
/// first error (e.g. EACCES on an unreadable directory), with what could be removed removed.
inline std::error_code remove_tree(const std::string& path) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0)
    return errno == ENOENT ? std::error_code{} : std::error_code(errno, std::generic_category());
  const int rc = ::nftw(path.c_str(), detail::remove_entry, 32, FTW_DEPTH | FTW_PHYS);
  if (rc == 0) return {};
  return std::error_code(rc > 0 ? rc : errno, std::generic_category());
}

}  // namespace caf_agent::base
