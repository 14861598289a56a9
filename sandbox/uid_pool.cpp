#include "sandbox/uid_pool.hpp"

#include <fmt/format.h>

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>

namespace caf_agent::sandbox {

namespace {

/// True when a non-zombie process with real uid `uid` exists (reads /proc/<pid>/status).
bool uid_has_live_processes(unsigned uid) {
  DIR* d = ::opendir("/proc");
  if (d == nullptr) return false;
  bool found = false;
  char path[64];
  char buf[2048];
  while (!found) {
    const dirent* e = ::readdir(d);
    if (e == nullptr) break;
    if (e->d_name[0] < '1' || e->d_name[0] > '9') continue;
    std::snprintf(path, sizeof(path), "/proc/%s/status", e->d_name);
    const int fd = ::open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) continue;
    const ssize_t n = ::read(fd, buf, sizeof(buf) - 1);
    ::close(fd);
    if (n <= 0) continue;
    buf[n] = '\0';
    const char* state = std::strstr(buf, "\nState:\t");
    const char* uid_line = std::strstr(buf, "\nUid:\t");
    if (uid_line == nullptr || (state != nullptr && state[8] == 'Z')) continue;
    found = std::strtoul(uid_line + 6, nullptr, 10) == uid;
  }
  ::closedir(d);
  return found;
}

/// Forks a helper that becomes `uid` and sends SIGKILL to every process it may signal.
void kill_once_as(unsigned uid) {
  const pid_t pid = ::fork();
  if (pid < 0) return;
  if (pid == 0) {
    // Child of a possibly multi-threaded parent: raw syscalls only.
    if (::syscall(SYS_setresgid, uid, uid, uid) != 0 || ::syscall(SYS_setresuid, uid, uid, uid) != 0) ::_exit(1);
    ::kill(-1, SIGKILL);
    ::_exit(0);
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
}

}  // namespace

int kill_all_of_uid(unsigned uid) {
  // Rationale: kill(-1) reports success even when it hit nobody, so /proc decides when we are
  // done. A fork bomb's children forked during one round die in the next; 100 rounds of
  // 10 ms bound the sweep to about a second.
  for (int round = 0; round < 100; ++round) {
    if (!uid_has_live_processes(uid)) return round;
    kill_once_as(uid);
    const timespec ts{0, 10'000'000};
    ::nanosleep(&ts, nullptr);
  }
  return -1;
}

std::unique_ptr<uid_lease> uid_lease::acquire(const sandbox_config& cfg, std::string& error) {
  if (::mkdir(cfg.uid_lock_dir.c_str(), 0700) != 0 && errno != EEXIST) {
    error = fmt::format("cannot create uid_lock_dir '{}': {}", cfg.uid_lock_dir, std::strerror(errno));
    return nullptr;
  }
  static std::atomic<std::uint32_t> cursor{std::random_device{}()};
  for (std::uint32_t tries = 0; tries < cfg.host_uid_count; ++tries) {
    const unsigned uid = cfg.host_uid_base + cursor.fetch_add(1) % cfg.host_uid_count;
    const auto path = fmt::format("{}/{}.lock", cfg.uid_lock_dir, uid);
    const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0) {
      error = fmt::format("cannot open uid lock '{}': {}", path, std::strerror(errno));
      return nullptr;
    }
    if (::flock(fd, LOCK_EX | LOCK_NB) == 0) {
      kill_all_of_uid(uid);  // leftovers of a crashed earlier holder
      return std::unique_ptr<uid_lease>(new uid_lease(uid, fd));
    }
    ::close(fd);
  }
  error = fmt::format("no free uid in [{}, {}): too many concurrent sandboxes", cfg.host_uid_base,
                      cfg.host_uid_base + cfg.host_uid_count);
  return nullptr;
}

uid_lease::~uid_lease() {
  kill_all_of_uid(uid_);
  ::close(lock_fd_);  // releases the flock
}

}  // namespace caf_agent::sandbox
