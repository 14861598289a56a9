#pragma once
/// sandbox/workspace_layout.hpp: laying out an episode's workspace.

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace caf_agent::sandbox {

/// Creates `<root>/ep-<episode>`: the template (SKILL.md, model_new.py, commands,
/// include/), the task's reference `model_py` as model.py, a copy of the harness in .harness/ for the
/// local commands. Returns the directory; sets `error` on failure.
std::filesystem::path make_workspace(const std::string& root, const std::string& template_dir,
                                     const std::string& harness_dir, uint64_t episode, const std::string& model_py,
                                     std::string& error);

/// Infrastructure paths the agent may read but not change.
std::vector<std::string> protected_workspace_paths();

}  // namespace caf_agent::sandbox
