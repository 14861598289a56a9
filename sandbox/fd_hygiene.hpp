#pragma once
/// @file fd_hygiene.hpp
/// Keeps the host's descriptors out of every process the project starts.
///
/// A node holds descriptors the agent must never reach: the trajectory store's segment open
/// for writing, directory descriptors of the host's `/`, sockets to other nodes. Any of them
/// opened without O_CLOEXEC (by us, by a library, by a thread racing a fork) would survive
/// exec into the agent's shell or the judge's child. So every spawn marks all descriptors from
/// 3 up close-on-exec in the forked child, just before exec: the class is closed at the one
/// place every such descriptor must pass, whoever opened it.

namespace caf_agent::sandbox {

/// Marks every descriptor >= `first_fd` close-on-exec. Async-signal-safe (only raw system
/// calls), for use between fork and exec. Uses close_range(CLOSE_RANGE_CLOEXEC) (Linux 5.11);
/// on older kernels walks the descriptor table up to RLIMIT_NOFILE. Returns false when
/// neither worked (the caller's child should then refuse to exec).
bool mark_fds_cloexec_from(int first_fd) noexcept;

}  // namespace caf_agent::sandbox
