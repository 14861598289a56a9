#include "sandbox/todo_list.hpp"

#include <fmt/format.h>

#include <set>

namespace caf_agent::sandbox {
namespace {

std::string check_item(const nlohmann::json& t, std::size_t i, std::set<std::string>& ids) {
  if (!t.is_object()) return fmt::format("todos[{}] must be an object", i);
  for (const char* key : {"content", "status", "id"}) {
    auto it = t.find(key);
    if (it == t.end() || !it->is_string() || it->get<std::string>().empty())
      return fmt::format("todos[{}].{} must be a non-empty string", i, key);
  }
  for (const auto& [key, v] : t.items())
    if (key != "content" && key != "status" && key != "id" && key != "priority" && key != "activeForm")
      return fmt::format("todos[{}] has unknown key '{}'", i, key);
  const auto status = t["status"].get<std::string>();
  if (status != "pending" && status != "in_progress" && status != "completed")
    return fmt::format("todos[{}].status must be pending, in_progress or completed, got '{}'", i, status);
  if (t.contains("priority")) {
    const auto& p = t["priority"];
    if (!p.is_string() || (p != "high" && p != "medium" && p != "low"))
      return fmt::format("todos[{}].priority must be high, medium or low", i);
  }
  if (t["content"].get<std::string>().size() > kMaxTodoChars)
    return fmt::format("todos[{}].content is longer than {} characters", i, kMaxTodoChars);
  if (!ids.insert(t["id"].get<std::string>()).second)
    return fmt::format("todos[{}].id '{}' is not unique", i, t["id"].get<std::string>());
  return {};
}

}  // namespace

tool_outcome todo_list::write(const nlohmann::json& args) {
  tool_args a(args, "TodoWrite");
  a.reject_unknown({"todos"});
  const auto& todos = a.array("todos");
  if (!a.error().empty()) return a.error_outcome();
  if (todos.size() > kMaxTodos) return error_outcome(fmt::format("at most {} todos are allowed", kMaxTodos));
  std::set<std::string> ids;
  for (std::size_t i = 0; i < todos.size(); ++i)
    if (auto err = check_item(todos[i], i, ids); !err.empty())
      return error_outcome("invalid arguments for TodoWrite: " + err);
  items_ = todos;
  std::string out = "Todos have been modified successfully. Current list:\n";
  for (const auto& t : items_) {
    const auto s = t["status"].get<std::string>();
    out += fmt::format("[{}] {}\n",
                       s == "completed"     ? "x"
                       : s == "in_progress" ? "~"
                                            : " ",
                       t["content"].get<std::string>());
  }
  return ok_outcome(out);
}

}  // namespace caf_agent::sandbox
