#pragma once
// tool_args: the `--key value` / `--flag` command lines of the LibTorch-only tools
// (policy_model_tool, learner_tool). Header only; no torch.

#include <iostream>
#include <map>
#include <string>

namespace caf_agent::policy {

/// Parsed options: key -> value ("1" for a flag given without a value).
using tool_args = std::map<std::string, std::string>;

/// The value of `key`, or `fallback` when it was not given.
inline std::string tool_arg(const tool_args& a, const std::string& key, const std::string& fallback = "") {
  auto it = a.find(key);
  return it == a.end() ? fallback : it->second;
}

/// Parses argv[first..argc); false (after printing which argument) on anything not `--key`.
inline bool parse_tool_args(int argc, char** argv, int first, tool_args& out) {
  for (int i = first; i < argc; ++i) {
    std::string key = argv[i];
    if (!key.starts_with("--")) {
      std::cerr << "unexpected argument '" << key << "'\n";
      return false;
    }
    key = key.substr(2);
    const bool flag = i + 1 >= argc || std::string(argv[i + 1]).starts_with("--");
    out[key] = flag ? "1" : argv[++i];
  }
  return true;
}

}  // namespace caf_agent::policy
