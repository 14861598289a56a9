#include "sandbox/fd_hygiene.hpp"

#include <fcntl.h>
#include <linux/close_range.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <cerrno>

namespace caf_agent::sandbox {

bool mark_fds_cloexec_from(int first_fd) noexcept {
  if (::syscall(SYS_close_range, static_cast<unsigned>(first_fd), ~0U, CLOSE_RANGE_CLOEXEC) == 0) return true;
  rlimit rl{};
  if (::getrlimit(RLIMIT_NOFILE, &rl) != 0) return false;
  // Rationale: the fallback walks at most 1 M descriptors (~10 ms); larger soft limits are
  // clamped there, since no process of ours opens that many.
  const rlim_t top = rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur > (1U << 20) ? (1U << 20) : rl.rlim_cur;
  for (rlim_t fd = static_cast<rlim_t>(first_fd); fd < top; ++fd) {
    const int flags = ::fcntl(static_cast<int>(fd), F_GETFD);
    if (flags >= 0 && (flags & FD_CLOEXEC) == 0) ::fcntl(static_cast<int>(fd), F_SETFD, flags | FD_CLOEXEC);
  }
  return true;
}

}  // namespace caf_agent::sandbox
