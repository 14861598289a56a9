#pragma once
/// @file uid_pool.hpp
/// One host uid per live episode (when running as root).
///
/// Rationale: RLIMIT_NPROC counts the processes of a uid and is not enforced for root, so a
/// fork bomb is only contained when each episode runs as its own unprivileged uid. Giving
/// every episode a distinct uid also lets close() kill everything the episode left behind
/// with one kill(-1) issued as that uid, including processes that escaped with setsid.

#include "sandbox/config.hpp"

#include <memory>
#include <string>

namespace caf_agent::sandbox {

/// Sends SIGKILL to every process of host `uid` until /proc shows none (forks a helper that
/// switches to `uid` and calls kill(-1)). Returns the rounds needed, -1 if some survived.
int kill_all_of_uid(unsigned uid);

/// An exclusively held uid from the pool; released (after killing its processes) on destruction.
class uid_lease {
 public:
  /// Takes a free uid (an flock on `<uid_lock_dir>/<uid>.lock` marks it in use across
  /// processes). Returns null and sets `error` when none is free.
  static std::unique_ptr<uid_lease> acquire(const sandbox_config& cfg, std::string& error);
  ~uid_lease();
  uid_lease(const uid_lease&) = delete;
  uid_lease& operator=(const uid_lease&) = delete;
  /// The leased host uid (also used as gid).
  unsigned uid() const { return uid_; }

 private:
  uid_lease(unsigned uid, int lock_fd) : uid_(uid), lock_fd_(lock_fd) {}
  unsigned uid_;
  int lock_fd_;
};

}  // namespace caf_agent::sandbox
