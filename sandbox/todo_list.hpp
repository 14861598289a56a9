#pragma once
/// @file todo_list.hpp
/// TodoWrite: the episode's task list, replaced as a whole on each call.

#include "sandbox/tool_args.hpp"

namespace caf_agent::sandbox {

/// Rationale: 100 items of 2 kB each is far beyond any real plan and bounds memory.
inline constexpr std::size_t kMaxTodos = 100;
/// See kMaxTodos.
inline constexpr std::size_t kMaxTodoChars = 2000;

/// The todo list of one episode.
class todo_list {
 public:
  /// TodoWrite: validates `todos` (content, status pending|in_progress|completed, unique id)
  /// and replaces the list; on error the old list stays.
  tool_outcome write(const nlohmann::json& args);
  /// The current list as a JSON array.
  const nlohmann::json& items() const { return items_; }

 private:
  nlohmann::json items_ = nlohmann::json::array();
};

}  // namespace caf_agent::sandbox
