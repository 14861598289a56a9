// actors/workspace.cpp: see workspace.hpp.
#include "actors/workspace.hpp"

#include <fstream>
#include <map>
#include <sstream>

namespace caf_agent {

namespace fs = std::filesystem;

namespace {
// Rationale: a kernel submission is a few source files; 1 MiB per file and
// 4 MiB in all is far above any real one and keeps a runaway write from
// flooding the GPU pool's messages.
constexpr uintmax_t max_file_bytes = 1u << 20;
constexpr uintmax_t max_total_bytes = 4u << 20;

std::string read_file(const fs::path& p) {
  std::ifstream in{p, std::ios::binary};
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}
}  // namespace

fs::path make_workspace(const std::string& root, const std::string& template_dir,
                        const std::string& harness_dir, uint64_t episode,
                        const messages::task_spec& task, std::string& error) {
  std::error_code ec;
  auto dir = fs::absolute(fs::path{root} / ("ep-" + std::to_string(episode)), ec);
  fs::remove_all(dir, ec);
  fs::create_directories(dir, ec);
  if (ec) {
    error = "cannot create workspace '" + dir.string() + "': " + ec.message();
    return dir;
  }
  fs::copy(template_dir, dir, fs::copy_options::recursive | fs::copy_options::overwrite_existing, ec);
  if (!ec) fs::create_directories(dir / "kernels", ec);
  if (!ec) fs::create_directories(dir / ".harness" / "caf_agent_eval", ec);
  if (!ec) fs::copy(harness_dir, dir / ".harness" / "caf_agent_eval", fs::copy_options::recursive, ec);
  if (!ec) fs::create_directories(dir / "workspace" / "include", ec);
  if (!ec) fs::copy(fs::path{template_dir} / "include", dir / "workspace" / "include",
                    fs::copy_options::recursive, ec);
  if (ec) {
    error = "cannot lay out workspace from '" + template_dir + "': " + ec.message();
    return dir;
  }
  std::ofstream{dir / "model.py"} << task.model_py;
  std::ofstream{dir / ".flavour"} << "cpu\n";
  return dir;
}

std::vector<std::string> protected_workspace_paths() {
  return {"model.py", "SKILL.md", "compile", "verify", "profile", "include", ".harness",
          "workspace", ".flavour"};
}

std::map<std::string, std::string> collect_submission(const fs::path& dir, std::string& error) {
  std::map<std::string, std::string> files;
  uintmax_t total = 0;
  auto add = [&](const fs::path& p) {
    std::error_code ec;
    auto size = fs::file_size(p, ec);
    auto rel = fs::relative(p, dir, ec).string();
    if (ec || size > max_file_bytes) {
      error = rel + " is larger than " + std::to_string(max_file_bytes) + " bytes";
      return;
    }
    total += size;
    if (total > max_total_bytes) error = "the submission is larger than 4 MiB in all";
    else files[rel] = read_file(p);
  };
  if (fs::is_regular_file(dir / "model_new.py")) add(dir / "model_new.py");
  std::error_code ec;
  if (fs::is_directory(dir / "kernels"))
    for (auto& e : fs::recursive_directory_iterator(dir / "kernels", ec))
      if (e.is_regular_file() && !e.is_symlink() && error.empty()) add(e.path());
  return files;
}

}  // namespace caf_agent
