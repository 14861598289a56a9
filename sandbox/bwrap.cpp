#include "sandbox/bwrap.hpp"

#include <fmt/format.h>

#include <sys/stat.h>
#include <unistd.h>
#include <cstdlib>
#include <filesystem>
#include <mutex>
#include <set>
#include <string>

namespace caf_agent::sandbox {
namespace {

/// The merged-/usr symlinks (/bin -> usr/bin, ...) as the host has them.
void add_root_links(std::vector<std::string>& a) {
  for (const char* dir : {"/bin", "/sbin", "/lib", "/lib64", "/lib32", "/libx32"}) {
    std::error_code ec;
    const auto st = std::filesystem::symlink_status(dir, ec);
    if (ec || !std::filesystem::exists(st)) continue;
    if (std::filesystem::is_symlink(st)) {
      const auto target = std::filesystem::read_symlink(dir, ec);
      if (!ec) a.insert(a.end(), {"--symlink", target.string(), dir});
    } else {
      a.insert(a.end(), {"--ro-bind", dir, dir});
    }
  }
}

std::vector<std::string> sandbox_env(const sandbox_config& cfg, const std::string& home) {
  // Rationale: an allowlist; nothing from the host (tokens, proxies) leaks in. USER/LOGNAME
  // let getpass.getuser() work without a passwd entry; TMPDIR is the private tmpfs.
  return {"PATH=" + cfg.path_env, "HOME=" + home,  "LANG=C.UTF-8", "LC_ALL=C.UTF-8",
          "USER=agent",           "LOGNAME=agent", "TMPDIR=/tmp",  "TERM=dumb"};
}

/// Absolute path of `name` looked up in the host PATH (as the shell would); `name` if absent.
std::string resolve_executable(const std::string& name) {
  if (name.find('/') != std::string::npos) return name;
  const char* path = std::getenv("PATH");
  std::string dirs = path != nullptr ? path : "/usr/local/bin:/usr/bin:/bin";
  for (std::size_t pos = 0; pos <= dirs.size();) {
    std::size_t end = dirs.find(':', pos);
    if (end == std::string::npos) end = dirs.size();
    const std::string candidate = dirs.substr(pos, end - pos) + "/" + name;
    if (end > pos && ::access(candidate.c_str(), X_OK) == 0) return candidate;
    pos = end + 1;
  }
  return name;
}

}  // namespace

std::vector<std::string> bwrap_args(const sandbox_config& cfg, const std::string& host_workspace) {
  std::vector<std::string> a = {resolve_executable(cfg.bwrap_path),
                                "--unshare-all",
                                "--unshare-user",
                                "--disable-userns",
                                "--uid",
                                std::to_string(cfg.sandbox_uid),
                                "--gid",
                                std::to_string(cfg.sandbox_gid),
                                "--hostname",
                                "sandbox",
                                "--die-with-parent",
                                "--new-session"};
  for (const auto& p : cfg.system_ro_binds) a.insert(a.end(), {"--ro-bind-try", p, p});
  add_root_links(a);
  // Every RAM-backed mount is capped: /tmp and /dev/shm get sized tmpfs; bwrap's own root and
  // /dev tmpfs (which hold only mount points and device nodes) are remounted read-only below,
  // so the agent cannot fill them with files (they are otherwise writable and unbounded).
  a.insert(a.end(), {"--dev", "/dev", "--size", std::to_string(cfg.shm_bytes), "--tmpfs", "/dev/shm", "--proc", "/proc",
                     "--size", std::to_string(cfg.tmpfs_bytes), "--tmpfs", "/tmp"});
  a.insert(a.end(), {"--bind", host_workspace, cfg.mount_point});
  for (const auto& rel : cfg.protected_paths)
    a.insert(a.end(), {"--ro-bind-try", host_workspace + "/" + rel, cfg.mount_point + "/" + rel});
  for (const auto& b : cfg.extra_ro_binds)
    a.insert(a.end(), {"--ro-bind", b.source, b.dest.empty() ? b.source : b.dest});
  a.insert(a.end(), {"--remount-ro", "/dev", "--remount-ro", "/", "--chdir", cfg.mount_point});
  return a;
}

spawn_spec sandboxed_bash(const sandbox_config& cfg, const std::string& host_workspace, const std::string& command,
                          int uid) {
  spawn_spec s;
  s.limits = cfg.limits;
  s.uid = uid;
  s.gid = uid;
  if (cfg.isolation == isolation_kind::none) {
    s.argv = {cfg.bash_path, "-c", command};
    s.cwd = host_workspace;
    s.env = sandbox_env(cfg, host_workspace);
    return s;
  }
  s.argv = bwrap_args(cfg, host_workspace);
  s.argv.insert(s.argv.end(), {"--", cfg.bash_path, "-c", command});
  s.cwd = "/";
  s.env = sandbox_env(cfg, cfg.mount_point);
  return s;
}

std::string probe_bwrap(const sandbox_config& cfg, const std::string& host_workspace, int uid) {
  static std::mutex m;
  static std::set<std::string> ok;
  // Rationale: bwrap and the extra binds decide success; the uid and workspace do not.
  std::string key = cfg.bwrap_path;
  for (const auto& b : cfg.extra_ro_binds) key += "\n" + b.source;
  {
    std::lock_guard<std::mutex> lock(m);
    if (ok.count(key)) return {};
  }
  auto spec = sandboxed_bash(cfg, host_workspace, "true", uid);
  // Rationale: bwrap setup takes ~10 ms; 10 s only trips on a hung kernel or broken binary.
  const auto r = run_process(spec, 10.0, 4096);
  if (!r.spawn_error.empty())
    return fmt::format("bubblewrap is not usable: {} (is bwrap installed? bwrap_path='{}')", r.spawn_error,
                       cfg.bwrap_path);
  if (r.exit_code != 0) {
    std::string hint;
    if (r.output.find("namespace") != std::string::npos ||
        r.output.find("Operation not permitted") != std::string::npos)
      hint =
          "; user namespaces look disabled (check /proc/sys/user/max_user_namespaces and "
          "kernel.unprivileged_userns_clone, or the container's seccomp profile)";
    return fmt::format("bubblewrap is not usable (exit {}): {}{}; refusing to run commands unsandboxed", r.exit_code,
                       r.output, hint);
  }
  std::lock_guard<std::mutex> lock(m);
  ok.insert(key);
  return {};
}

}  // namespace caf_agent::sandbox
