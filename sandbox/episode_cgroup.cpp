#include "sandbox/episode_cgroup.hpp"

#include <fmt/format.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstring>
#include <fstream>
#include <map>
#include <mutex>
#include <set>
#include <sstream>
#include <thread>

namespace caf_agent::sandbox {
namespace {

/// One mounted hierarchy and the node's own group in it.
struct hierarchy {
  cgroup_mode version = cgroup_mode::none;  ///< v1 or v2.
  std::set<std::string> controllers;
  std::string own_dir;  ///< Absolute directory of the node's group.
};

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::string cur;
  std::istringstream in(s);
  while (std::getline(in, cur, sep)) out.push_back(cur);
  return out;
}

/// Writes `value` to an existing control file; "" or the error.
std::string write_control(const std::string& path, const std::string& value) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) return fmt::format("cannot open {}: {}", path, std::strerror(errno));
  const ssize_t n = ::write(fd, value.data(), value.size());
  const int err = errno;
  ::close(fd);
  if (n != static_cast<ssize_t>(value.size()))
    return fmt::format("cannot write '{}' to {}: {}", value, path, std::strerror(err));
  return {};
}

/// The hierarchies this process belongs to, from /proc/self/mountinfo and /proc/self/cgroup.
std::vector<hierarchy> find_hierarchies() {
  // /proc/self/cgroup: "id:controllers:path" (v2: "0::path").
  std::map<std::string, std::string> v1_paths;  // controller -> path
  std::string v2_path;
  bool has_v2 = false;
  for (const auto& line : split(read_text("/proc/self/cgroup"), '\n')) {
    const auto a = line.find(':'), b = line.find(':', a + 1);
    if (a == std::string::npos || b == std::string::npos) continue;
    const std::string ctrls = line.substr(a + 1, b - a - 1), path = line.substr(b + 1);
    if (ctrls.empty()) {
      v2_path = path;
      has_v2 = true;
    }
    for (const auto& c : split(ctrls, ',')) v1_paths[c] = path;
  }
  std::vector<hierarchy> out;
  // mountinfo: "id parent maj:min root mountpoint opts ... - fstype source superopts".
  for (const auto& line : split(read_text("/proc/self/mountinfo"), '\n')) {
    const auto dash = line.find(" - ");
    if (dash == std::string::npos) continue;
    const auto pre = split(line.substr(0, dash), ' ');
    const auto post = split(line.substr(dash + 3), ' ');
    if (pre.size() < 5 || post.size() < 3) continue;
    const std::string& root = pre[3];
    const std::string& mount_point = pre[4];
    auto inside = [&](const std::string& path) {
      // The group's path relative to what this mount shows of the hierarchy.
      std::string rel = path;
      if (root != "/" && rel.rfind(root, 0) == 0) rel = rel.substr(root.size());
      return mount_point + (rel == "/" ? "" : rel);
    };
    if (post[0] == "cgroup2" && has_v2) {
      hierarchy h{cgroup_mode::v2, {}, inside(v2_path)};
      for (const auto& c : split(read_text(h.own_dir + "/cgroup.controllers"), ' ')) {
        std::string name = c;
        while (!name.empty() && (name.back() == '\n' || name.back() == ' ')) name.pop_back();
        if (!name.empty()) h.controllers.insert(name);
      }
      out.push_back(std::move(h));
    } else if (post[0] == "cgroup") {
      hierarchy h{cgroup_mode::v1, {}, {}};
      std::string path;
      for (const auto& opt : split(post[2], ','))
        if (opt == "memory" || opt == "pids" || opt == "cpu") {
          h.controllers.insert(opt);
          path = v1_paths.count(opt) ? v1_paths[opt] : "";
        }
      if (h.controllers.empty() || path.empty()) continue;
      h.own_dir = inside(path);
      out.push_back(std::move(h));
    }
  }
  return out;
}

/// The directories (one per hierarchy) in which a group `name` goes, and the version.
struct placement {
  cgroup_mode mode = cgroup_mode::none;
  std::vector<hierarchy> parents;
  std::string error;
};

placement choose_placement() {
  const auto all = find_hierarchies();
  for (const auto& h : all) {
    if (h.version != cgroup_mode::v2) continue;
    if (!(h.controllers.count("memory") && h.controllers.count("pids"))) continue;
    // Delegation: the controllers must be on in our group's subtree_control. Enabling them
    // fails (EBUSY) in a non-root group that holds processes: then v2 is not ours to use.
    const std::string want = h.controllers.count("cpu") ? "+memory +pids +cpu" : "+memory +pids";
    if (write_control(h.own_dir + "/cgroup.subtree_control", want).empty()) return {cgroup_mode::v2, {h}, {}};
  }
  placement p{cgroup_mode::v1, {}, {}};
  std::set<std::string> covered;
  for (const auto& h : all) {
    if (h.version != cgroup_mode::v1) continue;
    p.parents.push_back(h);
    covered.insert(h.controllers.begin(), h.controllers.end());
  }
  if (covered.count("memory") && covered.count("pids")) return p;
  return {cgroup_mode::none,
          {},
          "no cgroup v2 group with memory and pids delegated, and no cgroup v1 memory and pids hierarchies"};
}

std::string trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

}  // namespace

bool join_cgroups(const std::vector<int>& procs_fds) noexcept {
  for (int fd : procs_fds)
    if (::write(fd, "0", 1) != 1) return false;
  return true;
}

const cgroup_support& probe_cgroups() {
  static std::once_flag once;
  static cgroup_support support;
  std::call_once(once, [] {
    std::string error;
    const auto probe = episode_cgroup::create(fmt::format("caf-agent-probe-{}", ::getpid()), {}, error);
    if (!probe) {
      support = {cgroup_mode::none, error};
      return;
    }
    support.mode = probe->mode_;
    std::string parents;
    for (const auto& d : probe->dirs()) parents += (parents.empty() ? "" : ", ") + d.substr(0, d.rfind('/'));
    support.detail = "episode groups under " + parents;
  });
  return support;
}

std::unique_ptr<episode_cgroup> episode_cgroup::create(const std::string& name, const cgroup_limits& limits,
                                                       std::string& error) {
  const auto place = choose_placement();
  if (place.mode == cgroup_mode::none) {
    error = place.error;
    return nullptr;
  }
  std::unique_ptr<episode_cgroup> g(new episode_cgroup());
  g->mode_ = place.mode;
  for (const auto& h : place.parents) {
    const std::string dir = h.own_dir + "/" + name;
    if (::mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) {
      error = fmt::format("cannot create cgroup {}: {}", dir, std::strerror(errno));
      return nullptr;  // the destructor removes the groups made so far
    }
    g->dirs_.push_back(dir);
    std::vector<std::pair<std::string, std::string>> settings;
    const bool v2 = place.mode == cgroup_mode::v2;
    if (h.controllers.count("memory")) {
      g->memory_dir_ = dir;
      if (limits.memory_bytes)
        settings.push_back({v2 ? "memory.max" : "memory.limit_in_bytes", std::to_string(limits.memory_bytes)});
      // Rationale: without swap limits a v2 group could page out past its budget.
      if (v2 && limits.memory_bytes) settings.push_back({"memory.swap.max", "0"});
    }
    if (h.controllers.count("pids") && limits.max_pids)
      settings.push_back({"pids.max", std::to_string(limits.max_pids)});
    if (h.controllers.count("cpu") && limits.cpus > 0) {
      // Rationale: a 100 ms CFS period, the kernel's default.
      const auto quota = static_cast<long long>(limits.cpus * 100000.0);
      if (v2)
        settings.push_back({"cpu.max", fmt::format("{} 100000", quota)});
      else
        settings.push_back({"cpu.cfs_period_us", "100000"}),
            settings.push_back({"cpu.cfs_quota_us", std::to_string(quota)});
    }
    for (const auto& [file, value] : settings) {
      if (auto err = write_control(dir + "/" + file, value); !err.empty()) {
        // memory.swap.max is absent without swap accounting; every other limit must hold.
        if (file == "memory.swap.max") continue;
        error = err;
        return nullptr;
      }
    }
    const int fd = ::open((dir + "/cgroup.procs").c_str(), O_WRONLY | O_CLOEXEC);
    if (fd < 0) {
      error = fmt::format("cannot open {}/cgroup.procs: {}", dir, std::strerror(errno));
      return nullptr;
    }
    g->procs_fds_.push_back(fd);
  }
  return g;
}

void episode_cgroup::kill_all() {
  using namespace std::chrono_literals;
  for (const auto& dir : dirs_) {
    // v2 (5.14+): one write kills the whole group, including processes forking right now.
    if (mode_ == cgroup_mode::v2) (void)write_control(dir + "/cgroup.kill", "1");
  }
  // Rationale: 200 rounds of 5 ms; a fork racing the kill is caught in the next round, and the
  // pids limit bounds how many there can be.
  for (int round = 0; round < 200; ++round) {
    bool any = false;
    for (const auto& dir : dirs_) {
      for (const auto& line : split(read_text(dir + "/cgroup.procs"), '\n')) {
        if (line.empty()) continue;
        any = true;
        ::kill(static_cast<pid_t>(std::stol(line)), SIGKILL);
      }
    }
    if (!any) return;
    std::this_thread::sleep_for(5ms);
  }
}

std::uint64_t episode_cgroup::memory_peak_bytes() const {
  if (memory_dir_.empty()) return 0;
  const auto text =
      trim(read_text(memory_dir_ + (mode_ == cgroup_mode::v2 ? "/memory.peak" : "/memory.max_usage_in_bytes")));
  return text.empty() ? 0 : std::stoull(text);
}

std::uint64_t episode_cgroup::memory_limit_hits() const {
  if (memory_dir_.empty()) return 0;
  if (mode_ == cgroup_mode::v1) {
    const auto text = trim(read_text(memory_dir_ + "/memory.failcnt"));
    return text.empty() ? 0 : std::stoull(text);
  }
  for (const auto& line : split(read_text(memory_dir_ + "/memory.events"), '\n'))
    if (line.rfind("max ", 0) == 0) return std::stoull(line.substr(4));
  return 0;
}

episode_cgroup::~episode_cgroup() {
  using namespace std::chrono_literals;
  kill_all();
  for (int fd : procs_fds_) ::close(fd);
  for (auto it = dirs_.rbegin(); it != dirs_.rend(); ++it) {
    // Rationale: a killed process leaves the group a moment after SIGKILL; 100 x 5 ms.
    for (int i = 0; i < 100 && ::rmdir(it->c_str()) != 0 && errno == EBUSY; ++i) std::this_thread::sleep_for(5ms);
  }
}

}  // namespace caf_agent::sandbox
