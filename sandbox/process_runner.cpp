#include "sandbox/process_runner.hpp"

#include "sandbox/episode_cgroup.hpp"
#include "sandbox/fd_hygiene.hpp"
#include "sandbox/node_reaper.hpp"

#include <boost/process/args.hpp>
#include <boost/process/child.hpp>
#include <boost/process/env.hpp>
#include <boost/process/environment.hpp>
#include <boost/process/exe.hpp>
#include <boost/process/extend.hpp>
#include <boost/process/io.hpp>
#include <boost/process/pipe.hpp>
#include <boost/process/start_dir.hpp>

#include <fmt/format.h>

#include <fcntl.h>
#include <poll.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <mutex>

namespace bp = boost::process;

namespace caf_agent::sandbox {
namespace {

/// Rationale: Boost.Process creates its exec-error pipe without O_CLOEXEC; a fork in another
/// thread between pipe() and fcntl() would leak it into a long-lived sandbox and stall this
/// spawn. Serialising our own spawns closes that window (fork+exec is ~1 ms).
std::mutex& spawn_mutex() {
  static std::mutex m;
  return m;
}

/// Writes `msg` to stderr of the child and exits; async-signal-safe.
[[noreturn]] void child_fail(const char* msg) {
  const int err = errno;
  (void)!::write(2, "sandbox: ", 9);
  (void)!::write(2, msg, std::strlen(msg));
  const char* e = ::strerror(err);  // not strictly AS-safe, but only reads a static table
  (void)!::write(2, ": ", 2);
  (void)!::write(2, e, std::strlen(e));
  (void)!::write(2, "\n", 1);
  ::_exit(126);
}

/// Runs in the forked child before exec: group, limits, fds, identity.
void child_setup(const spawn_spec& s, pid_t parent) {
  if (::setpgid(0, 0) != 0) child_fail("setpgid");
  die_with_parent(parent);  // and bwrap's --die-with-parent takes its pid namespace along
  const std::pair<int, std::uint64_t> limits[] = {
      {RLIMIT_CPU, s.limits.cpu_seconds},     {RLIMIT_AS, s.limits.address_space_bytes},
      {RLIMIT_NPROC, s.limits.max_processes}, {RLIMIT_FSIZE, s.limits.file_size_bytes},
      {RLIMIT_NOFILE, s.limits.open_files},   {RLIMIT_CORE, 0}};
  for (const auto& [res, value] : limits) {
    const rlimit rl{static_cast<rlim_t>(value), static_cast<rlim_t>(value)};
    if (::setrlimit(res, &rl) != 0) child_fail("setrlimit");
  }
  // Nothing of the host's but stdin/stdout/stderr and the named descriptors crosses exec.
  if (!mark_fds_cloexec_from(3)) child_fail("close_range(CLOEXEC)");
  for (int fd : s.inherit_fds)
    if (::fcntl(fd, F_SETFD, 0) != 0) child_fail("fcntl(inherit fd)");
  // Join the episode's cgroups while still root (the fds were opened by the parent).
  if (!join_cgroups(s.cgroup_procs_fds)) child_fail("join the episode's cgroup");
  if (s.gid >= 0) {
    // Raw syscalls: glibc's wrappers synchronise threads, which is unsafe after fork.
    if (::syscall(SYS_setgroups, 0, nullptr) != 0) child_fail("setgroups");
    if (::syscall(SYS_setresgid, s.gid, s.gid, s.gid) != 0) child_fail("setresgid");
  }
  if (s.uid >= 0 && ::syscall(SYS_setresuid, s.uid, s.uid, s.uid) != 0) child_fail("setresuid");
}

}  // namespace

struct process_tree::impl {
  bp::child child;
  int out_fd = -1;
  bool reaped = false;
  /// Kills the group while the leader is still an unreaped zombie (so its pgid cannot have
  /// been reused), then reaps it.
  void kill_and_reap() {
    if (reaped || !child.valid()) return;
    ::kill(-child.id(), SIGKILL);
    reaper_forget_group(child.id());
    std::error_code ec;
    child.wait(ec);
    reaped = true;
  }
  ~impl() {
    if (out_fd >= 0) ::close(out_fd);
  }
};

process_tree::process_tree(std::unique_ptr<impl> p) : impl_(std::move(p)) {}

process_tree::~process_tree() {
  if (impl_) impl_->kill_and_reap();
}

std::unique_ptr<process_tree> process_tree::start(const spawn_spec& spec, std::string& error) {
  if (spec.argv.empty()) return error = "empty argv", nullptr;
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return error = fmt::format("pipe2: {}", std::strerror(errno)), nullptr;
  bp::pipe out(fds[0], fds[1]);
  bp::environment env;
  for (const auto& kv : spec.env) {
    const auto eq = kv.find('=');
    if (eq != std::string::npos) env[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  const std::vector<std::string> args(spec.argv.begin() + 1, spec.argv.end());
  std::error_code ec;
  auto p = std::make_unique<impl>();
  const pid_t parent = ::getpid();
  {
    std::lock_guard<std::mutex> lock(spawn_mutex());
    p->child = bp::child(
        bp::exe = spec.argv[0], bp::args = args, env, bp::start_dir = spec.cwd,
        bp::std_in<bp::null, (bp::std_out & bp::std_err)> out,
        bp::extend::on_exec_setup = [&spec, parent](auto&) { child_setup(spec, parent); }, ec);
  }
  if (ec) return error = fmt::format("cannot start '{}': {}", spec.argv[0], ec.message()), nullptr;
  // A SIGKILLed node runs no destructor: its reaper kills the group instead.
  reaper_watch_group(p->child.id());
  p->out_fd = out.native_source();
  out.assign_source(-1);  // ownership moves to impl; the sink closes with `out`
  return std::unique_ptr<process_tree>(new process_tree(std::move(p)));
}

int process_tree::pid() const {
  return impl_->child.id();
}

bool process_tree::pump(capped_buffer& out, std::chrono::steady_clock::time_point until) {
  char buf[65536];
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(until - std::chrono::steady_clock::now());
    pollfd pfd{impl_->out_fd, POLLIN, 0};
    const int r = ::poll(&pfd, 1, static_cast<int>(std::max<std::int64_t>(0, left.count())));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    const ssize_t n = ::read(impl_->out_fd, buf, sizeof(buf));
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (n <= 0) return true;
    out.append(std::string_view(buf, static_cast<std::size_t>(n)));
  }
}

bool process_tree::running() {
  if (impl_->reaped) return false;
  siginfo_t info{};
  // WNOWAIT: look without reaping, so the pgid stays reserved until kill_and_reap.
  if (::waitid(P_PID, static_cast<id_t>(impl_->child.id()), &info, WEXITED | WNOHANG | WNOWAIT) != 0) return false;
  return info.si_pid == 0;
}

void process_tree::kill_tree() {
  impl_->kill_and_reap();
}

void process_tree::signal_group() {
  if (!impl_->reaped && impl_->child.valid()) ::kill(-impl_->child.id(), SIGKILL);
}

void process_tree::wait_zombie() {
  if (impl_->reaped) return;
  siginfo_t info{};
  while (::waitid(P_PID, static_cast<id_t>(impl_->child.id()), &info, WEXITED | WNOWAIT) != 0 && errno == EINTR) {
  }
}

int process_tree::wait_exit() {
  wait_zombie();
  impl_->kill_and_reap();  // ends leftovers of the group, then reaps
  const int status = impl_->child.native_exit_code();
  if (WIFSIGNALED(status)) {
    term_signal_ = WTERMSIG(status);
    return 128 + term_signal_;
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

run_result run_process(const spawn_spec& spec, double timeout_s, std::size_t cap) {
  using clock = std::chrono::steady_clock;
  run_result r;
  const auto t0 = clock::now();
  auto tree = process_tree::start(spec, r.spawn_error);
  if (!tree) return r;
  capped_buffer buf(cap);
  const auto deadline = t0 + std::chrono::duration_cast<clock::duration>(std::chrono::duration<double>(timeout_s));
  std::optional<clock::time_point> exited_at;
  for (;;) {
    // Rationale: 100 ms slices notice a direct child that exited while a leftover
    // grandchild still holds the pipe; 200 ms grace lets the last output arrive.
    const auto slice = std::min(deadline, clock::now() + std::chrono::milliseconds(100));
    if (tree->pump(buf, slice)) break;
    if (clock::now() >= deadline) {
      r.timed_out = true;
      break;
    }
    if (!exited_at && !tree->running()) exited_at = clock::now();
    if (exited_at && clock::now() - *exited_at > std::chrono::milliseconds(200)) break;
  }
  if (r.timed_out) {
    tree->kill_tree();
    r.exit_code = 128 + SIGKILL;
    r.term_signal = SIGKILL;
  } else {
    r.exit_code = tree->wait_exit();
    r.term_signal = tree->term_signal();
  }
  r.total_bytes = buf.total_bytes();
  r.output = buf.take();
  r.elapsed_ms = std::chrono::duration<double, std::milli>(clock::now() - t0).count();
  return r;
}

}  // namespace caf_agent::sandbox
