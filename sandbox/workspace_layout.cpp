// sandbox/workspace_layout.cpp: see workspace_layout.hpp.
#include "sandbox/workspace_layout.hpp"

#include "base/remove_tree.hpp"

#include <fstream>

namespace caf_agent::sandbox {

namespace fs = std::filesystem;

fs::path make_workspace(const std::string& root, const std::string& template_dir, const std::string& harness_dir,
                        uint64_t episode, const std::string& model_py, std::string& error) {
  std::error_code ec;
  auto dir = fs::absolute(fs::path{root} / ("ep-" + std::to_string(episode)), ec);
  ec = base::remove_tree(dir.string());
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
  if (!ec) fs::copy(fs::path{template_dir} / "include", dir / "workspace" / "include", fs::copy_options::recursive, ec);
  if (ec) {
    error = "cannot lay out workspace from '" + template_dir + "': " + ec.message();
    return dir;
  }
  std::ofstream{dir / "model.py"} << model_py;
  std::ofstream{dir / ".flavour"} << "cpu\n";
  return dir;
}

std::vector<std::string> protected_workspace_paths() {
  return {"model.py", "SKILL.md", "compile", "verify", "profile", "include", ".harness", "workspace", ".flavour"};
}

}  // namespace caf_agent::sandbox
