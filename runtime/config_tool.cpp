// runtime/config_tool.cpp: `caf-agent-config [FILE]` prints the commented config of every key:
// the defaults (what config/defaults.toml holds: `caf-agent-config > config/defaults.toml`
// regenerates it), or FILE's values, read strictly like caf-agent reads it. Exit 2 on bad input.
#include <cstdio>
#include <string>

#include "runtime/config.hpp"

int main(int argc, char** argv) {
  using namespace caf_agent::runtime;
  if (argc > 2 || (argc == 2 && (std::string{argv[1]} == "-h" || std::string{argv[1]} == "--help"))) {
    std::fprintf(stderr, "usage: caf-agent-config [FILE]   (no FILE: the defaults)\n");
    return argc > 2 ? 2 : 0;
  }
  config_result r;
  if (argc == 2) r = load_config_file(argv[1]);
  if (!r.ok()) {
    for (auto& e : r.errors) std::fprintf(stderr, "%s\n", e.c_str());
    return 2;
  }
  std::fputs(print_config(r.config).c_str(), stdout);
  return 0;
}
