#pragma once
/// @file tool_args.hpp
/// Typed access to a tool call's JSON arguments with agent-readable errors.

#include "sandbox/tool_types.hpp"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>

namespace caf_agent::sandbox {

/// What a tool implementation returns before timing and ids are added.
struct tool_outcome {
  /// Outcome class.
  tool_status status = tool_status::ok;
  /// Observation text.
  std::string output;
  /// Exit code (shell tools), 0 otherwise.
  int exit_code = 0;
};

/// A successful outcome with `text`.
inline tool_outcome ok_outcome(std::string text) {
  return {tool_status::ok, std::move(text), 0};
}
/// An agent-visible error with `text`.
inline tool_outcome error_outcome(std::string text) {
  return {tool_status::error, "Error: " + std::move(text), 1};
}

/// Reads arguments of one call; the first problem is kept in `error()`.
class tool_args {
 public:
  /// Wraps `args` of tool `tool`.
  tool_args(const nlohmann::json& args, std::string tool);
  /// A required string argument.
  std::string str(const char* name);
  /// An optional string argument.
  std::optional<std::string> opt_str(const char* name);
  /// An optional integer argument within [lo, hi].
  std::optional<std::int64_t> opt_int(const char* name, std::int64_t lo, std::int64_t hi);
  /// An optional number (integer or float) within [lo, hi].
  std::optional<double> opt_number(const char* name, double lo, double hi);
  /// An optional boolean argument.
  std::optional<bool> opt_bool(const char* name);
  /// A required array argument.
  const nlohmann::json& array(const char* name);
  /// Fails on keys outside `known` (null-terminated list).
  void reject_unknown(std::initializer_list<const char*> known);
  /// First error message, empty when all reads succeeded.
  const std::string& error() const { return error_; }
  /// The error as an outcome.
  tool_outcome error_outcome() const;

 private:
  const nlohmann::json* find(const char* name);
  void fail(std::string msg);

  const nlohmann::json& args_;
  std::string tool_;
  std::string error_;
};

}  // namespace caf_agent::sandbox
