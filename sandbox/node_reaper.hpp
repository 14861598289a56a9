#pragma once
/// @file node_reaper.hpp
/// Children die with their node, grandchildren too, even when the node is SIGKILLed.
///
/// A SIGKILLed process runs no cleanup, and PR_SET_PDEATHSIG reaches only direct children
/// (the eval worker's compilers and fork server start new sessions, so a process-group kill
/// misses them as well). So every node starts, while still single-threaded, a small reaper
/// process that holds one end of a socket pair whose other end only the node has. The node
/// tells it which process groups and cgroups hold its children; when the socket reaches EOF
/// (the node exited, however it died) the reaper SIGKILLs every one of them and exits. A cgroup holds every
/// descendant whatever it does to its session or process group; process groups are the
/// fallback where the host gives us no cgroup.

#include <sys/types.h>
#include <memory>
#include <string>

#include "sandbox/episode_cgroup.hpp"

namespace caf_agent::sandbox {

/// Starts the reaper of this process. Call once, early in main, before any thread exists
/// (it forks). Returns "" or why it could not start (the node then runs without one).
std::string start_node_reaper();

/// At a clean exit: closes the socket (the reaper kills whatever is still registered) and
/// waits for the reaper, so it is not left as a zombie for init to collect.
void stop_node_reaper();

/// True once start_node_reaper succeeded in this process.
bool node_reaper_running();

/// The reaper kills process group `pgid` when this process dies (until forgotten).
void reaper_watch_group(pid_t pgid);
/// Undoes reaper_watch_group (call before the group's leader is reaped, so a reused id is
/// never killed).
void reaper_forget_group(pid_t pgid);
/// The reaper kills every process of the cgroup directory `dir` when this process dies, then
/// removes the directory.
void reaper_watch_cgroup(const std::string& dir);
/// Undoes reaper_watch_cgroup.
void reaper_forget_cgroup(const std::string& dir);

/// Between fork and exec: SIGKILL this child when the thread that forked it (the node's)
/// exits, and exit at once if the node died before the request took effect (the parent is
/// no longer `parent`). Async-signal-safe.
void die_with_parent(pid_t parent) noexcept;

/// What ties one long-lived child (an eval worker, a builder) to the node: its own process
/// group, SIGKILL when the node dies, and where the host allows, a cgroup that holds all its
/// descendants; each is registered with the reaper. Destroying it kills what is left of the
/// child's descendants (a compiler that outlived a killed worker).
class node_child_guard {
 public:
  /// Before fork: makes the cgroup `name` where cgroups are available.
  explicit node_child_guard(const std::string& name);
  ~node_child_guard();
  node_child_guard(const node_child_guard&) = delete;
  node_child_guard& operator=(const node_child_guard&) = delete;
  /// In the child between fork and exec (async-signal-safe): own group, parent-death
  /// signal, joins the cgroup. Exits with 126 when a step fails.
  void in_child() const noexcept;
  /// In the parent after the fork: registers the child's group with the reaper.
  void started(pid_t pid);
  /// Whether the child's descendants are held by a cgroup (else only its process group).
  bool has_cgroup() const;

 private:
  pid_t parent_ = 0;
  pid_t pgid_ = 0;
  std::unique_ptr<episode_cgroup> cgroup_;
};

}  // namespace caf_agent::sandbox
