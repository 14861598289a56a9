#pragma once
/// @file background_shells.hpp
/// Bash commands started with run_in_background: a reader thread per shell fills a capped
/// buffer; BashOutput drains it, KillBash ends the shell's whole process tree.

#include "sandbox/process_runner.hpp"
#include "sandbox/tool_args.hpp"

#include <map>
#include <memory>
#include <string>

namespace caf_agent::sandbox {

class background_shell;

/// The background shells of one episode (bounded by `max_background_shells`).
class background_shells {
 public:
  /// Shells keep at most `buffer_bytes` of unread output each and at most `max_live` run at once;
  /// BashOutput filters compile within `regex_max_program_bytes` (see line_regex).
  background_shells(std::size_t max_live, std::size_t buffer_bytes, std::size_t output_cap,
                    std::size_t regex_max_program_bytes);
  ~background_shells();
  /// Starts `spec`; returns the agent-visible outcome with the new shell id.
  tool_outcome start(const spawn_spec& spec, const std::string& command);
  /// BashOutput: new output since the last read (optionally only lines matching `filter`).
  tool_outcome output(const nlohmann::json& args);
  /// KillBash: kills the shell's process tree.
  tool_outcome kill(const nlohmann::json& args);
  /// Kills every shell and joins the reader threads.
  void kill_all();
  /// Number of shells still running.
  std::size_t live() const;

 private:
  std::size_t max_live_;
  std::size_t buffer_bytes_;
  std::size_t output_cap_;
  std::size_t regex_max_program_bytes_;
  std::size_t next_id_ = 1;
  std::map<std::string, std::unique_ptr<background_shell>> shells_;
};

}  // namespace caf_agent::sandbox
