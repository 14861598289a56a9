#pragma once
/// runtime/report_cmd.hpp: `caf-agent report RUN_DIR` and `caf-agent export RUN_DIR`.
///
///   caf-agent report RUN_DIR [--out FILE]   the run report (default RUN_DIR/report.html)
///   caf-agent export RUN_DIR --out FILE     every trajectory record as one JSON line
///                                            (the same as `trajectory_tool export`)

namespace caf_agent::runtime {

/// True when argv[1] names one of these commands.
bool is_offline_command(int argc, char** argv);

/// Runs the command of argv[1]; returns the exit code.
int run_offline_command(int argc, char** argv);

}  // namespace caf_agent::runtime
