// rollout/tasks.cpp: see tasks.hpp.
#include "rollout/tasks.hpp"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <regex>
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
    if (e.path().extension() == ".py" && e.path().filename().string()[0] != '_')
      files.push_back(e.path());
  std::sort(files.begin(), files.end());
  static const std::regex level_re{R"(^\s*(?:"""|''')?\s*Level\s+(\d+))",
                                   std::regex::icase};
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

std::string task_prompt(const messages::task_spec& task) {
  return "Task " + task.task_id + " (level " + std::to_string(task.level) +
         "). The workspace holds model.py (below). Write ModelNew in model_new.py with kernels "
         "in kernels/, then compile, verify and profile until it is correct and faster than "
         "torch.compile. Follow SKILL.md.\n\nmodel.py:\n```python\n" +
         task.model_py + "```\n";
}

}  // namespace caf_agent::rollout
