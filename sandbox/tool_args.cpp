#include "sandbox/tool_args.hpp"

#include <fmt/format.h>

namespace caf_agent::sandbox {
namespace {
const nlohmann::json kEmptyArray = nlohmann::json::array();

std::string type_name(const nlohmann::json& v) {
  if (v.is_number_integer()) return "integer";
  if (v.is_number_float()) return "number";
  return v.type_name();
}
}  // namespace

tool_args::tool_args(const nlohmann::json& args, std::string tool) : args_(args), tool_(std::move(tool)) {
  if (!args_.is_object()) fail(fmt::format("arguments must be a JSON object, got {}", args_.type_name()));
}

void tool_args::fail(std::string msg) {
  if (error_.empty()) error_ = std::move(msg);
}

tool_outcome tool_args::error_outcome() const {
  return sandbox::error_outcome(fmt::format("invalid arguments for {}: {}", tool_, error_));
}

const nlohmann::json* tool_args::find(const char* name) {
  if (!args_.is_object()) return nullptr;
  auto it = args_.find(name);
  if (it == args_.end() || it->is_null()) return nullptr;
  return &*it;
}

std::string tool_args::str(const char* name) {
  const auto* v = find(name);
  if (v == nullptr) {
    fail(fmt::format("missing required argument '{}' (string)", name));
    return {};
  }
  if (!v->is_string()) {
    fail(fmt::format("argument '{}' must be a string, got {}", name, type_name(*v)));
    return {};
  }
  return v->get<std::string>();
}

std::optional<std::string> tool_args::opt_str(const char* name) {
  if (find(name) == nullptr) return std::nullopt;
  auto s = str(name);
  if (!error_.empty()) return std::nullopt;
  return s;
}

std::optional<std::int64_t> tool_args::opt_int(const char* name, std::int64_t lo, std::int64_t hi) {
  const auto* v = find(name);
  if (v == nullptr) return std::nullopt;
  const bool integral_float =
      v->is_number_float() && v->get<double>() == static_cast<double>(static_cast<std::int64_t>(v->get<double>()));
  if (!v->is_number_integer() && !integral_float) {
    fail(fmt::format("argument '{}' must be an integer, got {}", name, type_name(*v)));
    return std::nullopt;
  }
  const auto x = v->is_number_integer() ? v->get<std::int64_t>() : static_cast<std::int64_t>(v->get<double>());
  if (x < lo || x > hi) {
    fail(fmt::format("argument '{}' must be between {} and {}, got {}", name, lo, hi, x));
    return std::nullopt;
  }
  return x;
}

std::optional<double> tool_args::opt_number(const char* name, double lo, double hi) {
  const auto* v = find(name);
  if (v == nullptr) return std::nullopt;
  if (!v->is_number()) {
    fail(fmt::format("argument '{}' must be a number, got {}", name, type_name(*v)));
    return std::nullopt;
  }
  const double x = v->get<double>();
  if (!(x >= lo && x <= hi)) {
    fail(fmt::format("argument '{}' must be between {} and {}, got {}", name, lo, hi, x));
    return std::nullopt;
  }
  return x;
}

std::optional<bool> tool_args::opt_bool(const char* name) {
  const auto* v = find(name);
  if (v == nullptr) return std::nullopt;
  if (!v->is_boolean()) {
    fail(fmt::format("argument '{}' must be a boolean, got {}", name, type_name(*v)));
    return std::nullopt;
  }
  return v->get<bool>();
}

const nlohmann::json& tool_args::array(const char* name) {
  const auto* v = find(name);
  if (v == nullptr) {
    fail(fmt::format("missing required argument '{}' (array)", name));
    return kEmptyArray;
  }
  if (!v->is_array()) {
    fail(fmt::format("argument '{}' must be an array, got {}", name, type_name(*v)));
    return kEmptyArray;
  }
  return *v;
}

void tool_args::reject_unknown(std::initializer_list<const char*> known) {
  if (!args_.is_object()) return;
  for (const auto& [key, value] : args_.items()) {
    bool found = false;
    for (const char* k : known) found = found || key == k;
    if (!found) {
      std::string list;
      for (const char* k : known) list += (list.empty() ? "" : ", ") + std::string(k);
      fail(fmt::format("unknown argument '{}' (expected: {})", key, list));
      return;
    }
  }
}

}  // namespace caf_agent::sandbox
