#pragma once
/// rollout/tasks.hpp: loading a directory of KernelBench-format problems.

#include <string>
#include <utility>
#include <vector>

#include "messages/episode.hpp"

namespace caf_agent::rollout {

/// Reads every `*.py` in `dir` (sorted by name) as a task. The level is taken
/// from a leading docstring "Level N: ..." (default 1). Returns an error message
/// in `error` when the directory is missing or holds no task.
std::vector<messages::task_spec> load_tasks(const std::string& dir, std::string& error);

/// A task set as `--tasks PATH` names it, and what of it could not be used.
struct task_set {
  std::vector<messages::task_spec> tasks;
  std::vector<std::pair<std::string, std::string>> skipped;  ///< (file, why)
  bool kernelbench = false;                                  ///< read as a KernelBench checkout
};

/// A KernelBench checkout (its `level<N>` folders, in PATH or in PATH/KernelBench): every
/// `*.py` of each level folder, task id "level<N>/<stem>", the level the folder's; a file
/// without `class Model` or that cannot be read is skipped with the reason (the rest is
/// read). Anything else is a directory as load_tasks reads it. A non-empty `levels` keeps
/// only the tasks of those levels (an error when none is left, naming the levels found).
task_set load_task_set(const std::string& path, const std::vector<int>& levels, std::string& error);

/// The user message for a task: what to do and the task's model.py.
std::string task_prompt(const messages::task_spec& task);

}  // namespace caf_agent::rollout
