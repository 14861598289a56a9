#pragma once
/// @file episode_cgroup.hpp
/// One control group per episode: memory, process and CPU limits for everything the
/// episode runs, together, however many processes it forks.
///
/// rlimits are per process (four processes hold four times RLIMIT_AS) or per uid; only a
/// cgroup bounds the episode as a whole, and it also charges the episode's tmpfs pages
/// (/tmp, /dev/shm, a RAM-backed workspace) to that budget. The group is created under the
/// node's own cgroup in each hierarchy: cgroup v2 where the node's group delegates the
/// memory, pids and cpu controllers, else the v1 memory, pids and cpu hierarchies. Where
/// neither can be made (no permission, no controller), `probe_cgroups` says why and the
/// sandbox runs without one (the node reports it at start and in its metrics).

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "base/named_enum.hpp"

namespace caf_agent::sandbox {

/// Limits of one episode's cgroup; zero means "no limit" for that controller.
struct cgroup_limits {
  /// Memory of all the episode's processes and tmpfs pages together, bytes.
  // Rationale: an nvcc build plus a CPU torch import peak near 3 GiB; 4 GiB leaves headroom
  // while 16 concurrent episodes still cannot take a 128 GiB rollout node.
  std::uint64_t memory_bytes = 4ULL << 30;
  /// Processes and threads of the episode together.
  // Rationale: make -j plus torch's thread pools fit in a few hundred; a fork bomb stops here.
  std::uint64_t max_pids = 512;
  /// CPU bandwidth in cores (CFS quota over a 100 ms period).
  // Rationale: one episode's build may use 2 cores; it can never starve a node's other episodes.
  double cpus = 2.0;
};

/// Which cgroup version episode groups are made in (reported by its name: none, v1, v2).
enum class cgroup_mode : uint8_t { none, v1, v2 };
CAF_AGENT_ENUM_NAMES(cgroup_mode, "none", "v1", "v2")

/// What this host offers.
struct cgroup_support {
  cgroup_mode mode = cgroup_mode::none;
  /// Why there is no cgroup (mode "none"), or where groups are made.
  std::string detail;
};

/// Finds where episode groups can be made (checked once per process by creating and removing
/// a probe group; the answer is cached).
const cgroup_support& probe_cgroups();

/// A created cgroup (one directory per hierarchy); removed on destruction after its processes
/// are killed.
class episode_cgroup {
 public:
  /// Creates `name` under the node's groups with `limits`; null and `error` on failure.
  static std::unique_ptr<episode_cgroup> create(const std::string& name, const cgroup_limits& limits,
                                                std::string& error);
  ~episode_cgroup();
  episode_cgroup(const episode_cgroup&) = delete;
  episode_cgroup& operator=(const episode_cgroup&) = delete;

  /// Descriptors of each hierarchy's cgroup.procs, open for writing (O_CLOEXEC): a child
  /// writes "0" to each between fork and exec to join (async-signal-safe).
  const std::vector<int>& procs_fds() const { return procs_fds_; }
  /// SIGKILLs every process in the group until it is empty (bounded retries).
  void kill_all();
  /// Peak memory of the group so far, bytes (0 when unknown).
  std::uint64_t memory_peak_bytes() const;
  /// Times the memory limit was hit (v1 failcnt, v2 "max" events; 0 when unknown).
  std::uint64_t memory_limit_hits() const;
  /// v1 or v2.
  cgroup_mode mode() const { return mode_; }
  /// The directories, one per hierarchy.
  const std::vector<std::string>& dirs() const { return dirs_; }

 private:
  friend const cgroup_support& probe_cgroups();
  episode_cgroup() = default;
  cgroup_mode mode_ = cgroup_mode::none;
  std::vector<std::string> dirs_;
  std::string memory_dir_;
  std::vector<int> procs_fds_;
};

/// Joins the cgroups behind `procs_fds` from a forked child; false on a failed write.
bool join_cgroups(const std::vector<int>& procs_fds) noexcept;

}  // namespace caf_agent::sandbox
