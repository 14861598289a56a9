// rollout/run_plan.cpp: see run_plan.hpp.
#include "rollout/run_plan.hpp"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include <fcntl.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

namespace caf_agent::rollout {

namespace fs = std::filesystem;

std::optional<std::string> write_file_atomically(const fs::path& path, const std::string& text) {
  auto tmp = path;
  tmp += ".tmp-" + std::to_string(::getpid());
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return "cannot create '" + tmp.string() + "': " + std::strerror(errno);
  size_t done = 0;
  int err = 0;
  while (done < text.size()) {
    auto n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      err = n < 0 ? errno : ENOSPC;
      break;
    }
    done += static_cast<size_t>(n);
  }
  if (err == 0 && ::fsync(fd) != 0) err = errno;
  ::close(fd);
  if (err == 0 && ::rename(tmp.c_str(), path.c_str()) != 0) err = errno;
  if (err != 0) {
    ::unlink(tmp.c_str());
    return "cannot write '" + path.string() + "': " + std::strerror(err);
  }
  auto parent = path.parent_path().empty() ? fs::path{"."} : path.parent_path();
  if (int dfd = ::open(parent.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC); dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
  return std::nullopt;
}

std::optional<std::string> write_run_plan(const fs::path& dir, const run_plan& plan) {
  nlohmann::json episodes = nlohmann::json::array();
  for (auto& e : plan.episodes)
    episodes.push_back({{"episode_id", e.episode_id}, {"task_id", e.task_id}, {"seed", e.seed}});
  nlohmann::json j = {{"format_version", plan.format_version}, {"mode", plan.mode},
                      {"max_turns", plan.max_turns},           {"wall_limit_ms", plan.wall_limit_ms},
                      {"tasks_dir", plan.tasks_dir},           {"episodes", episodes}};
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return "cannot create run directory '" + dir.string() + "': " + ec.message();
  return write_file_atomically(dir / run_plan_file, j.dump(1) + "\n");
}

std::optional<std::string> read_run_plan(const fs::path& dir, run_plan& out) {
  auto path = dir / run_plan_file;
  std::ifstream in{path};
  if (!in) return "'" + path.string() + "' cannot be read (is '" + dir.string() + "' a run directory?)";
  std::stringstream text;
  text << in.rdbuf();
  try {
    auto j = nlohmann::json::parse(text.str());
    run_plan p;
    p.format_version = j.at("format_version").get<uint32_t>();
    if (p.format_version != run_plan_format_version)
      return "'" + path.string() + "' has format version " + std::to_string(p.format_version) + ", this build reads " +
             std::to_string(run_plan_format_version);
    p.mode = j.at("mode").get<messages::episode_mode>();  // an unknown name throws, naming the names
    p.max_turns = j.at("max_turns").get<int32_t>();
    p.wall_limit_ms = j.at("wall_limit_ms").get<int64_t>();
    p.tasks_dir = j.at("tasks_dir").get<std::string>();
    for (auto& e : j.at("episodes"))
      p.episodes.push_back(
          {e.at("episode_id").get<uint64_t>(), e.at("task_id").get<std::string>(), e.at("seed").get<uint64_t>()});
    out = std::move(p);
  } catch (const std::exception& e) {
    return "'" + path.string() + "' is not a valid plan: " + e.what();
  }
  return std::nullopt;
}

}  // namespace caf_agent::rollout
