#include "sandbox/bash_tool.hpp"

#include "sandbox/bwrap.hpp"
#include "sandbox/output_format.hpp"
#include "sandbox/process_runner.hpp"

#include <fmt/format.h>

#include <csignal>

namespace caf_agent::sandbox {
namespace {

/// Why a process died of `sig`, in words the agent can act on.
std::string signal_reason(int sig) {
  switch (sig) {
    case SIGKILL:
      return "killed (SIGKILL: memory, process or time limit, or killed by a command)";
    case SIGXCPU:
      return "killed: CPU time limit exceeded (SIGXCPU)";
    case SIGXFSZ:
      return "killed: file size limit exceeded (SIGXFSZ)";
    case SIGSEGV:
      return "crashed: segmentation fault (SIGSEGV)";
    case SIGABRT:
      return "aborted (SIGABRT)";
    default:
      return fmt::format("terminated by signal {}", sig);
  }
}

}  // namespace

tool_outcome format_bash_result(const run_result& r, double timeout_s, std::size_t cap) {
  if (!r.spawn_error.empty()) return {tool_status::internal, "Error: cannot start the command: " + r.spawn_error, -1};
  std::string text = to_observation(r.output, cap, r.total_bytes);
  if (r.timed_out) {
    text += fmt::format("{}Command timed out after {:g} s; it and all its processes were killed.",
                        text.empty() || text.back() == '\n' ? "" : "\n", timeout_s);
    return {tool_status::timeout, std::move(text), r.exit_code};
  }
  // bwrap reports a command killed by signal N as exit code 128+N.
  const int sig = r.term_signal != 0 ? r.term_signal : (r.exit_code > 128 && r.exit_code < 160 ? r.exit_code - 128 : 0);
  const bool limit_kill = sig == SIGKILL || sig == SIGXCPU || sig == SIGXFSZ;
  if (r.exit_code != 0) {
    if (!text.empty() && text.back() != '\n') text += '\n';
    text += fmt::format("exit code {}", r.exit_code);
    if (sig != 0) text += " (" + signal_reason(sig) + ")";
  } else if (text.empty()) {
    text = "(no output)";
  }
  return {limit_kill ? tool_status::killed : tool_status::ok, std::move(text), r.exit_code};
}

tool_outcome bash_tool(const sandbox_config& cfg, const std::string& host_workspace, const spawn_identity& who,
                       background_shells& shells, const nlohmann::json& args) {
  tool_args a(args, "Bash");
  a.reject_unknown({"command", "timeout", "description", "run_in_background"});
  const auto command = a.str("command");
  const auto timeout_ms = a.opt_number("timeout", 1, cfg.max_timeout_s * 1000.0);
  (void)a.opt_str("description");
  const bool background = a.opt_bool("run_in_background").value_or(false);
  if (!a.error().empty()) return a.error_outcome();
  if (command.find('\0') != std::string::npos)
    return error_outcome("invalid arguments for Bash: 'command' contains a NUL byte");
  // Rationale: 100 kB is far more than any hand-written command; a longer one is data.
  if (command.size() > 100000)
    return error_outcome("invalid arguments for Bash: 'command' is longer than 100000 bytes");
  auto spec = sandboxed_bash(cfg, host_workspace, command, who.uid);
  spec.cgroup_procs_fds = who.cgroup_procs_fds;
  if (background) return shells.start(spec, command);
  const double timeout_s = timeout_ms ? *timeout_ms / 1000.0 : cfg.default_timeout_s;
  return format_bash_result(run_process(spec, timeout_s, cfg.output_cap_bytes), timeout_s, cfg.output_cap_bytes);
}

}  // namespace caf_agent::sandbox
