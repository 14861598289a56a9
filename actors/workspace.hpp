#pragma once
/// actors/workspace.hpp: laying out an episode's workspace (no actor code).

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "messages/episode.hpp"

namespace caf_agent {

/// Creates `<root>/ep-<episode>`: the template (SKILL.md, model_new.py, commands,
/// include/), the task as model.py, a copy of the harness in .harness/ for the
/// local commands. Returns the directory; sets `error` on failure.
std::filesystem::path make_workspace(const std::string& root, const std::string& template_dir,
                                     const std::string& harness_dir, uint64_t episode,
                                     const messages::task_spec& task, std::string& error);

/// Infrastructure paths the agent may read but not change.
std::vector<std::string> protected_workspace_paths();

}  // namespace caf_agent
