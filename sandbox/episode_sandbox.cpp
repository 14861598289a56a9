#include "sandbox/episode_sandbox.hpp"

#include "base/remove_tree.hpp"
#include "sandbox/background_shells.hpp"
#include "sandbox/bash_tool.hpp"
#include "sandbox/bwrap.hpp"
#include "sandbox/episode_cgroup.hpp"
#include "sandbox/file_tools.hpp"
#include "sandbox/grep_glob.hpp"
#include "sandbox/todo_list.hpp"
#include "sandbox/uid_pool.hpp"
#include "sandbox/workspace_paths.hpp"

#include <fmt/format.h>

#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <functional>
#include <map>

namespace caf_agent::sandbox {

struct episode_sandbox::state {
  sandbox_config cfg;
  std::unique_ptr<uid_lease> lease;
  std::unique_ptr<workspace_paths> ws;
  std::unique_ptr<file_tools> files;
  std::unique_ptr<background_shells> shells;
  std::unique_ptr<episode_cgroup> cgroup;
  std::string cgroup_note;  ///< Why there is no cgroup, when there is none.
  bool workspace_mounted = false;
  std::string workspace_note;  ///< Why the workspace has no size cap, when it has none.
  todo_list todos;
  tool_metrics metrics;
  bool closed = false;
  int uid() const { return lease ? static_cast<int>(lease->uid()) : -1; }
  spawn_identity identity() const { return {uid(), cgroup ? cgroup->procs_fds() : std::vector<int>{}}; }
  /// Unmounts the workspace's tmpfs (also when create() fails after mounting it).
  void unmount_workspace() {
    if (workspace_mounted && ws)
      (void)::umount2(ws->host_root().c_str(), MNT_DETACH);
    else if (workspace_mounted)
      (void)::umount2(cfg.workspace.c_str(), MNT_DETACH);
    workspace_mounted = false;
  }
  ~state() { unmount_workspace(); }
};

namespace {

/// Every ancestor of the workspace must be searchable by others, or the sandbox uid cannot reach it.
std::string check_traversable(const std::filesystem::path& ws) {
  for (auto p = ws.parent_path(); !p.empty() && p != p.root_path(); p = p.parent_path()) {
    struct stat st {};
    if (::stat(p.c_str(), &st) == 0 && (st.st_mode & S_IXOTH) == 0)
      return fmt::format(
          "workspace parent '{}' (mode {:o}) is not searchable by the sandbox uid; create "
          "workspaces under a directory with mode 0711 or 0755",
          p.string(), st.st_mode & 07777);
  }
  return {};
}

/// Gives the workspace to the episode uid; protected paths stay owned by root.
void chown_workspace(const workspace_paths& ws, const sandbox_config& cfg, unsigned uid) {
  namespace fs = std::filesystem;
  const fs::path root(ws.host_root());
  (void)::lchown(root.c_str(), uid, uid);
  ::chmod(root.c_str(), 0700);
  std::error_code ec;
  for (fs::recursive_directory_iterator it(root, ec), end; !ec && it != end; it.increment(ec)) {
    const auto rel = it->path().lexically_relative(root).string();
    if (ws.is_protected(rel)) {
      if (it->is_directory(ec)) it.disable_recursion_pending();
      continue;
    }
    (void)::lchown(it->path().c_str(), uid, uid);
  }
  (void)cfg;
}

/// Puts the workspace on a tmpfs of `bytes` (its current files are copied in), so the agent's
/// files are bounded and charged to the episode's memory. "" on success, else why not.
std::string cap_workspace(const std::string& host, std::uint64_t bytes) {
  namespace fs = std::filesystem;
  static std::atomic<unsigned> counter{0};
  const std::string staging = fmt::format("{}.fill-{}-{}", host, ::getpid(), counter++);
  if (::rename(host.c_str(), staging.c_str()) != 0)
    return fmt::format("cannot stage the workspace: {}", std::strerror(errno));
  auto restore = [&](std::string why) {
    std::error_code ec;
    fs::remove(host, ec);
    (void)::rename(staging.c_str(), host.c_str());
    return why;
  };
  if (::mkdir(host.c_str(), 0700) != 0) return restore(fmt::format("mkdir: {}", std::strerror(errno)));
  const std::string opts = fmt::format("size={},mode=0700", bytes);
  if (::mount("tmpfs", host.c_str(), "tmpfs", MS_NOSUID | MS_NODEV, opts.c_str()) != 0)
    return restore(fmt::format("mounting a tmpfs on the workspace failed: {}", std::strerror(errno)));
  std::error_code ec;
  fs::copy(staging, host, fs::copy_options::recursive | fs::copy_options::copy_symlinks, ec);
  if (ec) {
    (void)::umount2(host.c_str(), MNT_DETACH);
    return restore(fmt::format("copying the workspace onto its tmpfs failed: {}", ec.message()));
  }
  base::remove_tree(staging);
  return {};
}

}  // namespace

create_result episode_sandbox::create(sandbox_config cfg) {
  if (auto err = cfg.validate(); !err.empty()) return {nullptr, "invalid sandbox config: " + err};
  auto s = std::make_unique<state>();
  s->cfg = std::move(cfg);
  const auto& c = s->cfg;
  const bool bwrap = c.isolation == isolation_kind::bwrap;
  const std::string host = std::filesystem::canonical(c.workspace).string();
  if (c.cgroup != cgroup_policy::off) {
    static std::atomic<unsigned long> serial{0};
    std::string err;
    s->cgroup = episode_cgroup::create(fmt::format("caf-agent-{}-{}", ::getpid(), serial++), c.episode_limits, err);
    if (!s->cgroup) {
      if (c.cgroup == cgroup_policy::required)
        return {nullptr, "sandbox: no cgroup for the episode (cgroup = \"required\"): " + err};
      s->cgroup_note = err;
    }
  } else {
    s->cgroup_note = "disabled by config (cgroup = \"off\")";
  }
  if (c.workspace_bytes == 0) {
    s->workspace_note = "disabled by config (workspace_bytes = 0)";
  } else if (c.keep_workspace) {
    s->workspace_note = "not with keep_workspace (the tmpfs would vanish on close)";
  } else if (::geteuid() != 0) {
    s->workspace_note = "mounting a tmpfs needs root";
  } else if (auto why = cap_workspace(host, c.workspace_bytes); !why.empty()) {
    s->workspace_note = why;
  } else {
    s->workspace_mounted = true;
  }
  if (::geteuid() == 0) {
    if (auto err = check_traversable(host); !err.empty()) return {nullptr, err};
    std::string err;
    s->lease = uid_lease::acquire(c, err);
    if (!s->lease) return {nullptr, err};
  }
  s->ws = std::make_unique<workspace_paths>(host, bwrap ? c.mount_point : host, c.protected_paths);
  if (!s->ws->error().empty()) return {nullptr, s->ws->error()};
  if (s->lease) chown_workspace(*s->ws, c, s->lease->uid());
  if (bwrap)
    if (auto err = probe_bwrap(c, host, s->uid()); !err.empty()) return {nullptr, err};
  const file_owner owner{s->uid(), s->uid()};
  s->files = std::make_unique<file_tools>(*s->ws, s->cfg, owner);
  s->shells = std::make_unique<background_shells>(c.max_background_shells, c.background_buffer_bytes,
                                                  c.output_cap_bytes, c.regex_max_program_bytes);
  return {std::unique_ptr<episode_sandbox>(new episode_sandbox(std::move(s))), ""};
}

episode_sandbox::episode_sandbox(std::unique_ptr<state> s) : s_(std::move(s)) {}

episode_sandbox::~episode_sandbox() {
  close();
}

void episode_sandbox::close() {
  if (s_->closed) return;
  s_->closed = true;
  s_->shells->kill_all();
  if (s_->cgroup) s_->cgroup->kill_all();  // every process of the episode, whatever its uid
  s_->lease.reset();                       // kills every remaining process of the episode uid
  s_->cgroup.reset();                      // removes the (now empty) group
  s_->unmount_workspace();
  if (!s_->cfg.keep_workspace) {
    base::remove_tree(s_->ws->host_root());
  }
}

tool_result episode_sandbox::execute(const tool_call& call) {
  const auto t0 = std::chrono::steady_clock::now();
  tool_outcome out;
  std::string metric_name = "<unknown>";  // Rationale: agent-chosen names must not grow the metrics map
  try {
    if (s_->closed) {
      out = {tool_status::internal, "Error: the sandbox of this episode is closed", -1};
    } else {
      auto& st = *s_;
      static const std::map<std::string, std::function<tool_outcome(state&, const nlohmann::json&)>> table = {
          {"Bash",
           [](state& x, const nlohmann::json& a) {
             return bash_tool(x.cfg, x.ws->host_root(), x.identity(), *x.shells, a);
           }},
          {"BashOutput", [](state& x, const nlohmann::json& a) { return x.shells->output(a); }},
          {"KillBash", [](state& x, const nlohmann::json& a) { return x.shells->kill(a); }},
          {"Read", [](state& x, const nlohmann::json& a) { return x.files->read(a); }},
          {"Write", [](state& x, const nlohmann::json& a) { return x.files->write(a); }},
          {"Edit", [](state& x, const nlohmann::json& a) { return x.files->edit(a); }},
          {"MultiEdit", [](state& x, const nlohmann::json& a) { return x.files->multi_edit(a); }},
          {"Glob", [](state& x, const nlohmann::json& a) { return glob_tool(*x.ws, x.cfg, a); }},
          {"Grep", [](state& x, const nlohmann::json& a) { return grep_tool(*x.ws, x.cfg, a); }},
          {"TodoWrite", [](state& x, const nlohmann::json& a) { return x.todos.write(a); }},
      };
      auto it = table.find(call.name);
      if (it != table.end()) metric_name = call.name;
      out = it == table.end()
                ? error_outcome(fmt::format("unknown tool '{}'; available tools: Bash, BashOutput, KillBash, Read, "
                                            "Write, Edit, MultiEdit, Glob, Grep, TodoWrite",
                                            call.name))
                : it->second(st, call.arguments);
    }
  } catch (const std::exception& e) {
    out = {tool_status::internal, fmt::format("Error: internal failure in {}: {}", call.name, e.what()), -1};
  }
  tool_result r{call.id, std::move(out.output), out.status,
                std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count(),
                out.exit_code};
  s_->metrics.record(metric_name, r.status, r.elapsed_ms);
  return r;
}

const tool_metrics& episode_sandbox::metrics() const {
  return s_->metrics;
}
const nlohmann::json& episode_sandbox::todos() const {
  return s_->todos.items();
}
int episode_sandbox::host_uid() const {
  return s_->uid();
}
const sandbox_config& episode_sandbox::config() const {
  return s_->cfg;
}

nlohmann::json episode_sandbox::containment() const {
  nlohmann::json j;
  j["cgroup"] = s_->cgroup ? to_string(s_->cgroup->mode()) : "none: " + s_->cgroup_note;
  j["memory_peak_bytes"] = s_->cgroup ? s_->cgroup->memory_peak_bytes() : 0;
  j["memory_limit_hits"] = s_->cgroup ? s_->cgroup->memory_limit_hits() : 0;
  if (s_->workspace_mounted)
    j["workspace_cap"] = s_->cfg.workspace_bytes;
  else
    j["workspace_cap"] = "none: " + s_->workspace_note;
  return j;
}

}  // namespace caf_agent::sandbox
