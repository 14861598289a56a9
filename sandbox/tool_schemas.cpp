// JSON schemas of the tools, in OpenAI function-calling form, for the policy prompt.
#include "sandbox/episode_sandbox.hpp"

namespace caf_agent::sandbox {
namespace {

using json = nlohmann::json;

json fn(const char* name, const char* description, json properties, json required) {
  return {{"type", "function"},
          {"function",
           {{"name", name},
            {"description", description},
            {"parameters",
             {{"type", "object"},
              {"properties", std::move(properties)},
              {"required", std::move(required)},
              {"additionalProperties", false}}}}}};
}

json str(const char* d) {
  return {{"type", "string"}, {"description", d}};
}
json integer(const char* d) {
  return {{"type", "integer"}, {"description", d}};
}
json boolean(const char* d) {
  return {{"type", "boolean"}, {"description", d}};
}

json edit_item() {
  return {{"type", "object"},
          {"properties",
           {{"old_string", str("Exact text to replace")},
            {"new_string", str("Replacement text")},
            {"replace_all", boolean("Replace every occurrence (default false)")}}},
          {"required", {"old_string", "new_string"}}};
}

}  // namespace

nlohmann::json episode_sandbox::tool_schemas() {
  json tools = json::array();
  tools.push_back(
      fn("Bash",
         "Run a bash command in the sandboxed workspace (no network). Returns stdout+stderr; "
         "non-zero exit codes are reported. Use run_in_background for servers and long jobs.",
         {{"command", str("The command to run")},
          {"timeout", {{"type", "number"}, {"description", "Timeout in milliseconds (default 120000, max 600000)"}}},
          {"description", str("Short description of what the command does")},
          {"run_in_background", boolean("Start in the background and return a shell id")}},
         {"command"}));
  tools.push_back(fn("BashOutput", "Read new output of a background shell since the last read, and its status.",
                     {{"bash_id", str("Id returned by Bash with run_in_background")},
                      {"filter", str("Optional regex; only matching lines are returned")}},
                     {"bash_id"}));
  tools.push_back(fn("KillBash", "Kill a background shell and all its processes.",
                     {{"bash_id", str("Id of the background shell")}}, {"bash_id"}));
  tools.push_back(fn("Read", "Read a file with line numbers (cat -n format). Long files: use offset and limit.",
                     {{"file_path", str("Absolute path, or relative to the workspace")},
                      {"offset", integer("1-based line to start at")},
                      {"limit", integer("Number of lines to read (default 2000)")}},
                     {"file_path"}));
  tools.push_back(
      fn("Write", "Create or overwrite a file. An existing file must be Read first.",
         {{"file_path", str("Absolute path, or relative to the workspace")}, {"content", str("Full new content")}},
         {"file_path", "content"}));
  tools.push_back(fn("Edit",
                     "Replace an exact, unique string in a file (or every occurrence with replace_all). "
                     "The file must be Read first.",
                     {{"file_path", str("Path of the file")},
                      {"old_string", str("Exact text to replace (must be unique unless replace_all)")},
                      {"new_string", str("Replacement text")},
                      {"replace_all", boolean("Replace all occurrences (default false)")}},
                     {"file_path", "old_string", "new_string"}));
  tools.push_back(
      fn("MultiEdit", "Apply several edits to one file in order; either all succeed or none is applied.",
         {{"file_path", str("Path of the file")},
          {"edits", {{"type", "array"}, {"items", edit_item()}, {"description", "Edits applied in order"}}}},
         {"file_path", "edits"}));
  tools.push_back(fn("Glob", "Find files by glob pattern (e.g. **/*.cu), newest first.",
                     {{"pattern", str("Glob pattern")}, {"path", str("Directory to search (default: workspace)")}},
                     {"pattern"}));
  tools.push_back(fn("Grep", "Search file contents with a regular expression (POSIX extended, plus \\d \\w \\s).",
                     {{"pattern", str("Regular expression")},
                      {"path", str("File or directory to search (default: workspace)")},
                      {"glob", str("Only files matching this glob, e.g. *.py or *.{cu,cpp}")},
                      {"type", str("File type: py, cpp, c, cuda, md, json, sh, txt, toml, yaml, js, ts, rust")},
                      {"output_mode",
                       {{"type", "string"},
                        {"enum", {"content", "files_with_matches", "count"}},
                        {"description", "Default files_with_matches"}}},
                      {"-i", boolean("Case insensitive")},
                      {"-n", boolean("Show line numbers (content mode)")},
                      {"-A", integer("Lines of context after each match")},
                      {"-B", integer("Lines of context before each match")},
                      {"-C", integer("Lines of context around each match")},
                      {"head_limit", integer("Only the first N lines or entries")}},
                     {"pattern"}));
  json todo_item = {{"type", "object"},
                    {"properties",
                     {{"content", str("What to do")},
                      {"status", {{"type", "string"}, {"enum", {"pending", "in_progress", "completed"}}}},
                      {"id", str("Unique id")},
                      {"priority", {{"type", "string"}, {"enum", {"high", "medium", "low"}}}}}},
                    {"required", {"content", "status", "id"}}};
  tools.push_back(fn("TodoWrite", "Replace the episode's todo list (use it to plan and track multi-step work).",
                     {{"todos", {{"type", "array"}, {"items", todo_item}}}}, {"todos"}));
  return tools;
}

}  // namespace caf_agent::sandbox
