// runtime/report_cmd.cpp: see report_cmd.hpp.
#include "runtime/report_cmd.hpp"

#include <cstdio>
#include <string_view>

#include <CLI/CLI.hpp>

#include "observe/report.hpp"
#include "rollout/trajectory_store.hpp"

namespace caf_agent::runtime {

bool is_offline_command(int argc, char** argv) {
  if (argc < 2) return false;
  std::string_view cmd{argv[1]};
  return cmd == "report" || cmd == "export";
}

int run_offline_command(int argc, char** argv) {
  std::string cmd{argv[1]};
  CLI::App app{cmd == "report" ? "caf-agent report: the run as one offline HTML file with plots"
                               : "caf-agent export: the run's trajectory records as JSON Lines"};
  std::string dir, out;
  app.add_option("RUN_DIR", dir, "the run directory (runs/.../trajectories-*)")->required();
  auto* out_opt = app.add_option(
      "--out", out, cmd == "report" ? "where to write (default RUN_DIR/report.html)" : "the JSONL file to write");
  if (cmd == "export") out_opt->required();
  try {
    app.parse(argc - 1, argv + 1);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "caf-agent %s: error: %s\n", cmd.c_str(), e.what());
    return 2;
  }
  if (cmd == "report") {
    if (out.empty()) out = dir + "/report.html";
    if (auto err = observe::write_run_report(dir, out); !err.empty()) {
      std::fprintf(stderr, "caf-agent report: error: %s\n", err.c_str());
      return 2;
    }
    std::printf("report: %s\n", out.c_str());
    return 0;
  }
  if (auto err = rollout::trajectory_store::export_jsonl(dir, out)) {
    std::fprintf(stderr, "caf-agent export: error: %s\n", err->c_str());
    return 2;
  }
  std::printf("exported %s to %s\n", dir.c_str(), out.c_str());
  return 0;
}

}  // namespace caf_agent::runtime
