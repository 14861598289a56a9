// rollout/tasks.cpp: see tasks.hpp.
#include "rollout/tasks.hpp"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>

namespace caf_agent::rollout {

std::vector<messages::task_spec> load_tasks(const std::string& dir, std::string& error) {
  std::vector<messages::task_spec> out;
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec)) {
    error = "task directory '" + dir + "' does not exist";
    return out;
  }
  std::vector<std::filesystem::path> files;
  for (auto& e : std::filesystem::directory_iterator(dir, ec))
    if (e.path().extension() == ".py" && e.path().filename().string()[0] != '_') files.push_back(e.path());
  std::sort(files.begin(), files.end());
  static const std::regex level_re{R"(^\s*(?:"""|''')?\s*Level\s+(\d+))", std::regex::icase};
  for (auto& f : files) {
    std::ifstream in{f};
    std::stringstream text;
    text << in.rdbuf();
    messages::task_spec t;
    t.task_id = f.stem().string();
    t.name = t.task_id;
    t.model_py = text.str();
    std::smatch m;
    if (std::regex_search(t.model_py, m, level_re)) t.level = std::stoi(m[1]);
    if (t.model_py.find("class Model") == std::string::npos) {
      error = "task '" + f.string() + "' has no `class Model`";
      return {};
    }
    out.push_back(std::move(t));
  }
  if (out.empty()) error = "task directory '" + dir + "' holds no *.py task";
  return out;
}

namespace {

namespace fs = std::filesystem;

/// The folder holding level1.. of a KernelBench checkout at `path`, or empty.
fs::path kernelbench_levels_root(const fs::path& path) {
  static const std::regex level_dir{R"(level(\d+))"};
  for (const auto& root : {path, path / "KernelBench"}) {
    std::error_code ec;
    if (!fs::is_directory(root, ec)) continue;
    for (auto& e : fs::directory_iterator(root, ec))
      if (e.is_directory() && std::regex_match(e.path().filename().string(), level_dir)) return root;
  }
  return {};
}

std::string join_levels(const std::set<int>& levels) {
  std::string out;
  for (int l : levels) out += (out.empty() ? "" : ",") + std::to_string(l);
  return out.empty() ? "none" : out;
}

}  // namespace

task_set load_task_set(const std::string& path, const std::vector<int>& levels, std::string& error) {
  task_set out;
  std::set<int> found;
  auto root = kernelbench_levels_root(path);
  if (root.empty()) {
    out.tasks = load_tasks(path, error);
    if (!error.empty()) return {};
  } else {
    out.kernelbench = true;
    static const std::regex level_dir{R"(level(\d+))"};
    std::vector<std::pair<int, fs::path>> files;
    std::error_code ec;
    for (auto& d : fs::directory_iterator(root, ec)) {
      std::smatch m;
      auto name = d.path().filename().string();
      if (!d.is_directory() || !std::regex_match(name, m, level_dir)) continue;
      for (auto& f : fs::directory_iterator(d.path(), ec))
        if (f.path().extension() == ".py" && f.path().filename().string()[0] != '_')
          files.emplace_back(std::stoi(m[1]), f.path());
    }
    std::sort(files.begin(), files.end());
    for (auto& [level, f] : files) {
      std::ifstream in{f};
      std::stringstream text;
      text << in.rdbuf();
      auto id = "level" + std::to_string(level) + "/" + f.stem().string();
      if (!in.good() && !in.eof()) {
        out.skipped.emplace_back(f.string(), "cannot be read");
        continue;
      }
      if (text.str().find("class Model") == std::string::npos) {
        out.skipped.emplace_back(f.string(), "has no `class Model`");
        continue;
      }
      messages::task_spec t;
      t.task_id = t.name = id;
      t.level = level;
      t.model_py = text.str();
      out.tasks.push_back(std::move(t));
    }
    if (out.tasks.empty()) {
      error = "KernelBench checkout '" + path + "' holds no usable *.py task";
      return {};
    }
  }
  for (auto& t : out.tasks) found.insert(t.level);
  if (!levels.empty()) {
    std::set<int> keep(levels.begin(), levels.end());
    std::erase_if(out.tasks, [&](const messages::task_spec& t) { return !keep.contains(t.level); });
    if (out.tasks.empty()) {
      error = "no task of level " + join_levels(keep) + " in '" + path + "' (levels found: " + join_levels(found) + ")";
      return {};
    }
  }
  return out;
}

std::string task_prompt(const messages::task_spec& task) {
  return "Task " + task.task_id + " (level " + std::to_string(task.level) +
         "). The workspace holds model.py (below). Write ModelNew in model_new.py with kernels "
         "in kernels/, then compile, verify and profile until it is correct and faster than "
         "torch.compile. Follow SKILL.md.\n\nmodel.py:\n```python\n" +
         task.model_py + "```\n";
}

}  // namespace caf_agent::rollout
