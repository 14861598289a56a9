#pragma once
/// rollout/tasks.hpp: loading a directory of KernelBench-format problems.

#include <string>
#include <vector>

#include "messages/episode.hpp"

namespace caf_agent::rollout {

/// Reads every `*.py` in `dir` (sorted by name) as a task. The level is taken
/// from a leading docstring "Level N: ..." (default 1). Returns an error message
/// in `error` when the directory is missing or holds no task.
std::vector<messages::task_spec> load_tasks(const std::string& dir, std::string& error);

/// The user message for a task: what to do and the task's model.py.
std::string task_prompt(const messages::task_spec& task);

}  // namespace caf_agent::rollout
