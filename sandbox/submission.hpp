#pragma once
/// @file submission.hpp
/// Reads what the judge takes from a workspace (model_new.py and kernels/**) on the host,
/// without ever following a link the agent planted.
///
/// The node reads the workspace as root while the agent controls its contents. A symlink
/// `model_new.py -> /etc/shadow`, or a symlinked `kernels/`, would otherwise make the host
/// read files the agent cannot, and ship them to the GPU pool. Every component is opened
/// with openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS) or openat(O_NOFOLLOW) relative to the
/// directory above it, so the check and the use are the same system call: there is no
/// window in which a running background shell could swap a file for a link.

#include <cstdint>
#include <map>
#include <string>

namespace caf_agent::sandbox {

/// Bounds on one submission.
struct submission_limits {
  /// Largest single file, bytes.
  // Rationale: a kernel submission is a few source files; 1 MiB per file and 4 MiB in all
  // are far above any real one and keep a runaway write from flooding the pool's messages.
  std::uint64_t max_file_bytes = 1ULL << 20;
  /// Largest total, bytes.
  std::uint64_t max_total_bytes = 4ULL << 20;
  /// Directory entries visited under kernels/ before giving up.
  // Rationale: thousands of files are a directory bomb, not a kernel library.
  std::size_t max_entries = 4096;
  /// Directory depth under kernels/.
  std::size_t max_depth = 16;
};

/// The collected files (workspace-relative path -> bytes) or the reason there are none.
struct submission {
  /// model_new.py and every regular file under kernels/.
  std::map<std::string, std::string> files;
  /// Agent-visible reason the submission was refused (names the path); empty when fine.
  std::string error;
};

/// Collects model_new.py and kernels/** from the workspace directory `host_dir`. A symlink,
/// a file with several hard links, or a file that is not regular (FIFO, socket, device)
/// anywhere in the submission refuses it by name; so do the size limits.
submission collect_submission(const std::string& host_dir, const submission_limits& limits = {});

}  // namespace caf_agent::sandbox
