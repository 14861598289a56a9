#pragma once
/// @file process_runner.hpp
/// Starts one process tree with resource limits, in its own process group, optionally as
/// another host uid, and reads its combined stdout+stderr with a wall-clock deadline.

#include "sandbox/config.hpp"
#include "sandbox/output_format.hpp"

#include <chrono>
#include <memory>
#include <string>
#include <vector>

namespace caf_agent::sandbox {

/// What to start.
struct spawn_spec {
  /// argv; argv[0] is an absolute path or a name looked up in PATH.
  std::vector<std::string> argv;
  /// Complete environment, "KEY=VALUE" entries (nothing is inherited).
  std::vector<std::string> env;
  /// Working directory on the host.
  std::string cwd = "/";
  /// setrlimit values applied in the child before exec.
  resource_limits limits;
  /// Host uid/gid to switch to before exec (-1: keep).
  int uid = -1;
  /// See `uid`.
  int gid = -1;
  /// Descriptors (O_CLOEXEC in the parent) that the child must inherit.
  std::vector<int> inherit_fds;
  /// cgroup.procs descriptors (episode_cgroup::procs_fds) the child joins before exec; a
  /// failed join stops the child, so nothing of an episode runs outside its group.
  std::vector<int> cgroup_procs_fds;
};

/// Who an episode's processes run as: the host uid (-1: ours) and the cgroups they join.
struct spawn_identity {
  /// Host uid (and gid) of the episode; -1 keeps the caller's.
  int uid = -1;
  /// See spawn_spec::cgroup_procs_fds.
  std::vector<int> cgroup_procs_fds;
};

/// A started process group; killed on destruction.
class process_tree {
 public:
  /// Starts `spec`; on failure returns null and sets `error`.
  static std::unique_ptr<process_tree> start(const spawn_spec& spec, std::string& error);
  ~process_tree();
  process_tree(const process_tree&) = delete;
  process_tree& operator=(const process_tree&) = delete;
  /// Host pid of the direct child (also its process group id).
  int pid() const;
  /// Moves available output into `out` until EOF or `until`; returns true at EOF.
  bool pump(capped_buffer& out, std::chrono::steady_clock::time_point until);
  /// True while the direct child has not exited (reaps it when it has).
  bool running();
  /// SIGKILL to the whole process group, then reaps the direct child.
  void kill_tree();
  /// SIGKILL to the process group without reaping (safe while another thread waits).
  void signal_group();
  /// Blocks until the direct child has exited, without reaping it.
  void wait_zombie();
  /// Waits for the direct child; returns the shell-style exit code (128+signal if signalled).
  int wait_exit();
  /// Signal that ended the child, 0 if it exited normally or still runs.
  int term_signal() const { return term_signal_; }

 private:
  struct impl;
  explicit process_tree(std::unique_ptr<impl> p);
  std::unique_ptr<impl> impl_;
  int term_signal_ = 0;
};

/// Result of a run to completion.
struct run_result {
  /// Combined stdout+stderr, head and tail kept within the cap.
  std::string output;
  /// Bytes the process wrote in total.
  std::uint64_t total_bytes = 0;
  /// Shell-style exit code (128+signal when signalled), -1 when it never ran.
  int exit_code = -1;
  /// Terminating signal or 0.
  int term_signal = 0;
  /// True when the deadline killed it.
  bool timed_out = false;
  /// Non-empty when the process could not be started.
  std::string spawn_error;
  /// Wall-clock milliseconds.
  double elapsed_ms = 0.0;
};

/// Runs `spec` to completion, killing the group after `timeout_s`; keeps `cap` bytes.
run_result run_process(const spawn_spec& spec, double timeout_s, std::size_t cap);

}  // namespace caf_agent::sandbox
