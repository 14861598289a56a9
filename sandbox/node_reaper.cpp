#include "sandbox/node_reaper.hpp"

#include "sandbox/fd_hygiene.hpp"

#include <fmt/format.h>

#include <fcntl.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <atomic>
#include <cerrno>
#include <climits>
#include <csignal>
#include <cstring>

namespace caf_agent::sandbox {
namespace {

/// The node's end of the socket pair to the reaper (-1: no reaper).
std::atomic<int> reaper_fd{-1};
/// The reaper's pid (0: none).
pid_t reaper_pid = 0;

// -- the reaper process: no allocation (it may be forked from a process whose other threads
// -- hold the allocator's lock), only raw system calls on fixed tables ----------------------

// Rationale: a gpu-pool node has one worker and one builder per slot (16 on an 8-GPU host),
// a rollout node one process group per running tool call; 4096 groups and 512 cgroups are
// far above either, and a registration past them is dropped (the parent-death signal and
// the episode's cgroup still hold).
constexpr int max_groups = 4096;
constexpr int max_cgroups = 512;
constexpr int max_path = 512;

struct reaper_tables {
  pid_t groups[max_groups];
  int group_count = 0;
  char cgroups[max_cgroups][max_path];
  int cgroup_count = 0;
};

void add_group(reaper_tables& t, pid_t g) {
  for (int i = 0; i < t.group_count; ++i)
    if (t.groups[i] == g) return;
  if (t.group_count < max_groups) t.groups[t.group_count++] = g;
}

void drop_group(reaper_tables& t, pid_t g) {
  for (int i = 0; i < t.group_count; ++i)
    if (t.groups[i] == g) {
      t.groups[i] = t.groups[--t.group_count];
      return;
    }
}

void add_cgroup(reaper_tables& t, const char* dir, size_t n) {
  if (n == 0 || n >= max_path || t.cgroup_count >= max_cgroups) return;
  std::memcpy(t.cgroups[t.cgroup_count], dir, n);
  t.cgroups[t.cgroup_count++][n] = '\0';
}

void drop_cgroup(reaper_tables& t, const char* dir, size_t n) {
  for (int i = 0; i < t.cgroup_count; ++i)
    if (std::strlen(t.cgroups[i]) == n && std::memcmp(t.cgroups[i], dir, n) == 0) {
      std::memcpy(t.cgroups[i], t.cgroups[--t.cgroup_count], max_path);
      return;
    }
}

/// One line of the node: "g PGID", "G PGID" (forget), "c DIR", "C DIR" (forget).
void apply_line(reaper_tables& t, const char* line, size_t n) {
  if (n < 3 || line[1] != ' ') return;
  const char* arg = line + 2;
  const size_t len = n - 2;
  if (line[0] == 'g' || line[0] == 'G') {
    long v = 0;
    for (size_t i = 0; i < len; ++i) {
      if (arg[i] < '0' || arg[i] > '9') return;
      v = v * 10 + (arg[i] - '0');
      if (v > INT_MAX) return;
    }
    if (v <= 1) return;  // never "every process" (kill(-1)) nor init's group
    line[0] == 'g' ? add_group(t, static_cast<pid_t>(v)) : drop_group(t, static_cast<pid_t>(v));
  } else if (line[0] == 'c') {
    add_cgroup(t, arg, len);
  } else if (line[0] == 'C') {
    drop_cgroup(t, arg, len);
  }
}

/// SIGKILLs every process listed in DIR/cgroup.procs; returns how many there were.
int kill_cgroup_members(const char* dir) {
  char path[max_path + 32];
  const size_t n = std::strlen(dir);
  std::memcpy(path, dir, n);
  std::memcpy(path + n, "/cgroup.kill", 13);
  if (int fd = ::open(path, O_WRONLY | O_CLOEXEC); fd >= 0) {  // v2: one write kills all
    (void)!::write(fd, "1", 1);
    ::close(fd);
  }
  std::memcpy(path + n, "/cgroup.procs", 14);
  const int fd = ::open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  int found = 0;
  long pid = 0;
  bool digits = false;
  char buf[4096];
  for (;;) {
    const ssize_t r = ::read(fd, buf, sizeof buf);
    if (r <= 0) break;
    for (ssize_t i = 0; i < r; ++i) {
      if (buf[i] >= '0' && buf[i] <= '9') {
        pid = pid * 10 + (buf[i] - '0');
        digits = true;
      } else {
        if (digits && pid > 1) ::kill(static_cast<pid_t>(pid), SIGKILL), ++found;
        pid = 0;
        digits = false;
      }
    }
  }
  if (digits && pid > 1) ::kill(static_cast<pid_t>(pid), SIGKILL), ++found;
  ::close(fd);
  return found;
}

/// Kills everything registered, in rounds (a process forking while it is killed is caught in
/// the next round), and removes the emptied cgroups.
void reap_all(reaper_tables& t) {
  // Rationale: 200 rounds of 5 ms: the test of the feature asks for every child gone within
  // 2 s of the node's death; a killed process leaves its cgroup within a few ms.
  for (int round = 0; round < 200 && (t.group_count > 0 || t.cgroup_count > 0); ++round) {
    for (int i = 0; i < t.group_count;) {
      if (::kill(-t.groups[i], SIGKILL) != 0 && errno == ESRCH)
        t.groups[i] = t.groups[--t.group_count];
      else
        ++i;
    }
    for (int i = 0; i < t.cgroup_count;) {
      const int alive = kill_cgroup_members(t.cgroups[i]);
      if (alive == 0 && (::rmdir(t.cgroups[i]) == 0 || errno == ENOENT || errno == ENOTDIR))
        std::memcpy(t.cgroups[i], t.cgroups[--t.cgroup_count], max_path);
      else
        ++i;
    }
    const timespec pause{0, 5 * 1000 * 1000};
    ::nanosleep(&pause, nullptr);
  }
}

[[noreturn]] void reaper_main(int read_fd) {
  ::setsid();  // out of the terminal's foreground group: a Ctrl-C for the node is not for us
  ::prctl(PR_SET_NAME, "caf-agent-reap", 0, 0, 0);
  for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGPIPE, SIGQUIT}) ::signal(sig, SIG_IGN);
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  // Nothing of the node's but the socket stays open here (a held socket or pipe would keep the
  // node's peers from seeing it gone).
  const int null_fd = ::open("/dev/null", O_RDWR | O_CLOEXEC);
  for (int fd = 0; fd < 3; ++fd)
    if (null_fd >= 0 && null_fd != fd) ::dup2(null_fd, fd);
  if (read_fd != 3) {
    ::dup2(read_fd, 3);
    read_fd = 3;
  }
  if (::syscall(SYS_close_range, 4U, ~0U, 0U) != 0)
    for (int fd = 4; fd < 65536; ++fd) ::close(fd);
  static reaper_tables t;
  char buf[max_path + 8];
  for (;;) {
    const ssize_t r = ::recv(read_fd, buf, sizeof buf, 0);  // one registration a packet
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) break;  // EOF: the node is gone
    apply_line(t, buf, static_cast<size_t>(r));
  }
  reap_all(t);
  ::_exit(0);
}

void send_line(char op, const std::string& arg) {
  const int fd = reaper_fd.load();
  if (fd < 0) return;
  const std::string line = std::string(1, op) + " " + arg;
  if (line.size() > max_path) return;  // not one of ours; its owner still kills it while alive
  // A seqpacket send is one message, so threads need no lock; MSG_NOSIGNAL: a reaper that
  // was killed must not take the node down with SIGPIPE.
  ssize_t n;
  do n = ::send(fd, line.data(), line.size(), MSG_NOSIGNAL);
  while (n < 0 && errno == EINTR);
}

}  // namespace

std::string start_node_reaper() {
  if (reaper_fd.load() >= 0) return {};
  int fds[2];
  if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, fds) != 0)
    return fmt::format("socketpair: {}", std::strerror(errno));
  const pid_t pid = ::fork();
  if (pid < 0) {
    const int err = errno;
    ::close(fds[0]);
    ::close(fds[1]);
    return fmt::format("fork: {}", std::strerror(err));
  }
  if (pid == 0) {
    ::close(fds[1]);
    reaper_main(fds[0]);
  }
  ::close(fds[0]);
  reaper_pid = pid;
  reaper_fd.store(fds[1]);
  return {};
}

void stop_node_reaper() {
  const int fd = reaper_fd.exchange(-1);
  if (fd < 0) return;
  ::close(fd);  // EOF: the reaper kills what is still registered, then exits
  if (reaper_pid > 0) {
    int status = 0;
    while (::waitpid(reaper_pid, &status, 0) < 0 && errno == EINTR) {
    }
    reaper_pid = 0;
  }
}

bool node_reaper_running() {
  return reaper_fd.load() >= 0;
}

void reaper_watch_group(pid_t pgid) {
  send_line('g', std::to_string(pgid));
}
void reaper_forget_group(pid_t pgid) {
  send_line('G', std::to_string(pgid));
}
void reaper_watch_cgroup(const std::string& dir) {
  send_line('c', dir);
}
void reaper_forget_cgroup(const std::string& dir) {
  send_line('C', dir);
}

void die_with_parent(pid_t parent) noexcept {
  ::prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
  // The parent may have died between fork and prctl: then we are already an orphan and no
  // signal will come.
  if (::getppid() != parent) ::_exit(126);
}

node_child_guard::node_child_guard(const std::string& name) : parent_(::getpid()) {
  if (probe_cgroups().mode == cgroup_mode::none) return;
  std::string error;
  // No limits: the group only holds the child's descendants for the kill.
  cgroup_ = episode_cgroup::create(name, cgroup_limits{0, 0, 0.0}, error);
  if (cgroup_)
    for (const auto& d : cgroup_->dirs()) reaper_watch_cgroup(d);
}

node_child_guard::~node_child_guard() {
  if (pgid_ > 0) reaper_forget_group(pgid_);
  if (cgroup_) {
    const auto dirs = cgroup_->dirs();
    cgroup_.reset();  // kills what is left in it, removes it
    for (const auto& d : dirs) reaper_forget_cgroup(d);
  }
}

void node_child_guard::in_child() const noexcept {
  if (::setpgid(0, 0) != 0) ::_exit(126);
  die_with_parent(parent_);
  if (cgroup_ && !join_cgroups(cgroup_->procs_fds())) ::_exit(126);
}

void node_child_guard::started(pid_t pid) {
  pgid_ = pid;
  reaper_watch_group(pid);
}

bool node_child_guard::has_cgroup() const {
  return cgroup_ != nullptr;
}

}  // namespace caf_agent::sandbox
