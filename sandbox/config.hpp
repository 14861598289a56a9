#pragma once
/// @file config.hpp
/// Configuration of one episode's sandbox, with defaults and validation.

#include "sandbox/episode_cgroup.hpp"
#include "sandbox/settings.hpp"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace caf_agent::sandbox {

/// A read-only bind of a host path into the sandbox.
struct bind_mount {
  /// Host path (must exist when the sandbox is created).
  std::string source;
  /// Path inside the sandbox; empty means the same as `source`.
  std::string dest;
};

/// Per-process resource limits applied with setrlimit in the spawned child.
struct resource_limits {
  /// RLIMIT_CPU, seconds of CPU time per process.
  // Rationale: a long nvcc/g++ build takes minutes of CPU; a spinning loop is capped anyway by the wall-clock timeout.
  std::uint64_t cpu_seconds = 600;
  /// RLIMIT_AS, bytes of virtual address space per process.
  // Rationale: cicc/g++ and a CPU torch import fit in a few GiB; 8 GiB stops a memory hog long before the host swaps.
  std::uint64_t address_space_bytes = 8ULL << 30;
  /// RLIMIT_NPROC, processes and threads of the episode's uid.
  // Rationale: counted per uid (one uid per episode): enough for make -j and torch threads, small enough that a fork
  // bomb stalls quickly.
  std::uint64_t max_processes = 256;
  /// RLIMIT_FSIZE, largest file a process may write, bytes.
  // Rationale: object files and logs stay far below; stops `yes > f` from filling the disk.
  std::uint64_t file_size_bytes = 512ULL << 20;
  /// RLIMIT_NOFILE, open file descriptors per process.
  // Rationale: the usual soft default; compilers need dozens, a leak loop hits it fast.
  std::uint64_t open_files = 1024;
};

/// Whether an episode gets its own cgroup (sandbox_config::cgroup): `automatic` ("auto": one
/// where the host lets us make it, else none, reported by probe_cgroups and in the metrics),
/// `required` (no sandbox without one), or `off`.
enum class cgroup_policy : uint8_t { automatic, required, off };
CAF_AGENT_ENUM_NAMES(cgroup_policy, "auto", "required", "off")

/// Everything an `episode_sandbox` needs; `validate()` before use.
struct sandbox_config {
  /// bwrap (default, required in production) or none (development only: see isolation_kind).
  isolation_kind isolation = isolation_kind::bwrap;
  /// Host directory of the episode's workspace; must exist (the caller fills it).
  std::filesystem::path workspace;
  /// Where the workspace appears inside the sandbox (bwrap only); also HOME and cwd.
  std::string mount_point = "/workspace";
  /// Workspace-relative infrastructure paths (files or folders) that the agent may not
  /// modify: bound read-only in the shell, refused by Write/Edit/MultiEdit.
  std::vector<std::string> protected_paths;
  /// System paths bound read-only if they exist on the host.
  std::vector<std::string> system_ro_binds = {
      "/usr",           "/etc/alternatives", "/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d",
      "/etc/localtime", "/etc/ssl/certs"};
  /// Extra read-only binds, e.g. the repository's `.venv` and `skills/`.
  std::vector<bind_mount> extra_ro_binds;
  /// Resource limits of every process started in the sandbox.
  resource_limits limits;
  /// Bash timeout when the call gives none, seconds (default and rationale: sandbox/settings.hpp).
  double default_timeout_s = static_cast<double>(default_bash_timeout_s);
  /// Largest timeout a Bash call may ask for, seconds.
  // Rationale: 10 minutes, the longest any single build or test run should take.
  double max_timeout_s = 600.0;
  /// Largest observation returned to the agent, bytes (default and rationale: sandbox/settings.hpp).
  std::size_t output_cap_bytes = static_cast<std::size_t>(default_max_output_bytes);
  /// Largest file Read will open, bytes.
  // Rationale: source files are kB; larger ones are data the agent should grep, not read.
  std::size_t read_max_file_bytes = 2ULL << 20;
  /// Lines Read returns when no limit is given.
  // Rationale: the usual Read default; agents page with offset/limit beyond it.
  std::size_t read_default_lines = 2000;
  /// Characters per line after which Read truncates the line.
  // Rationale: minified or generated lines would otherwise flood the context.
  std::size_t read_max_line_chars = 2000;
  /// Largest file Grep scans, bytes (larger ones are skipped).
  // Rationale: skips build artefacts and data blobs so one Grep stays in milliseconds.
  std::size_t grep_max_file_bytes = 8ULL << 20;
  /// Memory budget of one compiled Grep pattern or BashOutput filter (RE2 program), bytes.
  // Rationale: real search patterns compile to a few kB; 2 MiB admits any sane pattern and
  // refuses counted-repetition blow-ups such as (a{1000}){1000} before they cost the host.
  std::size_t regex_max_program_bytes = 2ULL << 20;
  /// Background shells alive at once per episode.
  // Rationale: a server plus a watcher or two; each shell holds processes and a buffer.
  std::size_t max_background_shells = 4;
  /// Bytes buffered per background shell between BashOutput reads.
  // Rationale: bounds memory per shell; older output is dropped with a marker.
  std::size_t background_buffer_bytes = 1ULL << 20;
  /// Size of the private /tmp tmpfs inside the sandbox, bytes.
  // Rationale: /tmp lives in RAM; 1 GiB fits compiler temporaries, not a RAM-filling attack.
  std::uint64_t tmpfs_bytes = 1ULL << 30;
  /// Size of the /dev/shm tmpfs inside the sandbox, bytes.
  // Rationale: 64 MiB, Docker's default, is what torch's and Python's shared-memory users
  // expect; it is RAM, so it is bounded like /tmp.
  std::uint64_t shm_bytes = 64ULL << 20;
  /// The episode's cgroup: auto, required or off (see cgroup_policy).
  cgroup_policy cgroup = cgroup_policy::automatic;
  /// Limits of the episode's cgroup (memory, processes, CPU of the whole episode).
  cgroup_limits episode_limits;
  /// Size cap of the workspace, bytes (0: none). When the node may mount (root), the
  /// workspace becomes a tmpfs of this size, so files count toward the episode's memory
  /// budget and a full workspace is ENOSPC for the agent, not a full host disk.
  // Rationale: a workspace holds sources, a build tree and a few profiles: tens of MB; 2 GiB
  // is generous yet six `yes > f` files can no longer fill the node's disk.
  std::uint64_t workspace_bytes = 2ULL << 30;
  /// Write/Edit/MultiEdit of an existing file need a prior Read (or Write) of it in this
  /// episode, and fail if it changed since. Rationale: the contract coding agents are
  /// trained on; it stops blind overwrites of files the agent never saw.
  bool require_read_before_edit = true;
  /// Keep the workspace on close (for debugging and final evaluation copies).
  bool keep_workspace = false;
  /// First host uid of the per-episode uid pool (used only when running as root).
  std::uint32_t host_uid_base = 200000;
  /// Number of uids in the pool; bounds concurrent sandboxes per machine.
  // Rationale: more than the concurrent episodes of one machine; uids above 200000 are unused by distros.
  std::uint32_t host_uid_count = 60000;
  /// Directory of the uid lock files (root only, created 0700).
  std::string uid_lock_dir = "/tmp/caf_agent_sandbox_uids";
  /// uid and gid the agent sees inside the sandbox.
  std::uint32_t sandbox_uid = 1000;
  /// See `sandbox_uid`.
  std::uint32_t sandbox_gid = 1000;
  /// bubblewrap executable (PATH lookup if not absolute).
  std::string bwrap_path = "bwrap";
  /// Shell used for Bash, as seen inside the sandbox.
  std::string bash_path = "/bin/bash";
  /// PATH inside the sandbox.
  std::string path_env = "/usr/local/bin:/usr/bin:/bin";

  /// Returns an empty string when valid, else a message naming the first bad field.
  std::string validate() const;
};

/// Reads a config from JSON; unknown keys and wrong types are errors naming the key.
/// Returns the error message, or an empty string and fills `out`.
std::string config_from_json(const nlohmann::json& j, sandbox_config& out);

}  // namespace caf_agent::sandbox
