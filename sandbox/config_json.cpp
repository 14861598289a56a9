// Reading sandbox_config from JSON: every key known, every type checked.
#include "sandbox/config.hpp"

#include <fmt/format.h>

#include <functional>
#include <map>

namespace caf_agent::sandbox {
namespace {

using json = nlohmann::json;
using setter = std::function<std::string(const json&, sandbox_config&)>;

template <class T>
setter field(T sandbox_config::*member) {
  return [member](const json& v, sandbox_config& c) -> std::string {
    try {
      c.*member = v.get<T>();
      return {};
    } catch (const json::exception&) {
      return "has the wrong type";
    }
  };
}

/// A named enum from its name: another string is "'x' is not one of: <the names>".
template <base::named_enum E>
setter named(E sandbox_config::*member) {
  return [member](const json& v, sandbox_config& c) -> std::string {
    if (!v.is_string()) return "must be a string";
    const auto name = v.get<std::string>();
    auto e = base::parse_name<E>(name);
    if (!e) return "'" + name + "' is not one of: " + base::names_list<E>();
    c.*member = *e;
    return {};
  };
}

template <class T>
setter limit(T resource_limits::*member) {
  return [member](const json& v, sandbox_config& c) -> std::string {
    if (!v.is_number_integer() || v.get<std::int64_t>() < 0) return "must be a non-negative integer";
    c.limits.*member = v.get<T>();
    return {};
  };
}

template <class T>
setter episode_limit(T cgroup_limits::*member) {
  return [member](const json& v, sandbox_config& c) -> std::string {
    if (!v.is_number() || v.get<double>() < 0) return "must be a non-negative number";
    c.episode_limits.*member = v.get<T>();
    return {};
  };
}

std::string read_binds(const json& v, sandbox_config& c) {
  if (!v.is_array()) return "must be an array of {source, dest}";
  c.extra_ro_binds.clear();
  for (const auto& b : v) {
    if (!b.is_object() || !b.contains("source") || !b["source"].is_string()) return "entries need a string 'source'";
    bind_mount m{b["source"].get<std::string>(), ""};
    if (b.contains("dest")) {
      if (!b["dest"].is_string()) return "entry 'dest' must be a string";
      m.dest = b["dest"].get<std::string>();
    }
    c.extra_ro_binds.push_back(std::move(m));
  }
  return {};
}

const std::map<std::string, setter>& setters() {
  static const std::map<std::string, setter> table = {
      {"isolation", named(&sandbox_config::isolation)},
      {"workspace",
       [](const json& v, sandbox_config& c) -> std::string {
         if (!v.is_string()) return "must be a string";
         c.workspace = v.get<std::string>();
         return {};
       }},
      {"mount_point", field(&sandbox_config::mount_point)},
      {"protected_paths", field(&sandbox_config::protected_paths)},
      {"system_ro_binds", field(&sandbox_config::system_ro_binds)},
      {"extra_ro_binds", read_binds},
      {"default_timeout_s", field(&sandbox_config::default_timeout_s)},
      {"max_timeout_s", field(&sandbox_config::max_timeout_s)},
      {"output_cap_bytes", field(&sandbox_config::output_cap_bytes)},
      {"read_max_file_bytes", field(&sandbox_config::read_max_file_bytes)},
      {"read_default_lines", field(&sandbox_config::read_default_lines)},
      {"read_max_line_chars", field(&sandbox_config::read_max_line_chars)},
      {"grep_max_file_bytes", field(&sandbox_config::grep_max_file_bytes)},
      {"regex_max_program_bytes", field(&sandbox_config::regex_max_program_bytes)},
      {"max_background_shells", field(&sandbox_config::max_background_shells)},
      {"background_buffer_bytes", field(&sandbox_config::background_buffer_bytes)},
      {"tmpfs_bytes", field(&sandbox_config::tmpfs_bytes)},
      {"shm_bytes", field(&sandbox_config::shm_bytes)},
      {"require_read_before_edit", field(&sandbox_config::require_read_before_edit)},
      {"keep_workspace", field(&sandbox_config::keep_workspace)},
      {"host_uid_base", field(&sandbox_config::host_uid_base)},
      {"host_uid_count", field(&sandbox_config::host_uid_count)},
      {"uid_lock_dir", field(&sandbox_config::uid_lock_dir)},
      {"sandbox_uid", field(&sandbox_config::sandbox_uid)},
      {"sandbox_gid", field(&sandbox_config::sandbox_gid)},
      {"bwrap_path", field(&sandbox_config::bwrap_path)},
      {"bash_path", field(&sandbox_config::bash_path)},
      {"path_env", field(&sandbox_config::path_env)},
      {"limits.cpu_seconds", limit(&resource_limits::cpu_seconds)},
      {"limits.address_space_bytes", limit(&resource_limits::address_space_bytes)},
      {"limits.max_processes", limit(&resource_limits::max_processes)},
      {"limits.file_size_bytes", limit(&resource_limits::file_size_bytes)},
      {"limits.open_files", limit(&resource_limits::open_files)},
      {"cgroup", named(&sandbox_config::cgroup)},
      {"workspace_bytes", field(&sandbox_config::workspace_bytes)},
      {"episode_limits.memory_bytes", episode_limit(&cgroup_limits::memory_bytes)},
      {"episode_limits.max_pids", episode_limit(&cgroup_limits::max_pids)},
      {"episode_limits.cpus", episode_limit(&cgroup_limits::cpus)},
  };
  return table;
}

std::string apply(const json& j, const std::string& prefix, sandbox_config& out) {
  for (const auto& [key, value] : j.items()) {
    const std::string name = prefix + key;
    if (name == "limits" || name == "episode_limits") {
      if (!value.is_object()) return fmt::format("config key '{}' must be an object", name);
      if (auto e = apply(value, name + ".", out); !e.empty()) return e;
      continue;
    }
    auto it = setters().find(name);
    if (it == setters().end()) return fmt::format("unknown config key '{}'", name);
    if (auto e = it->second(value, out); !e.empty()) return fmt::format("config key '{}' {}", name, e);
  }
  return {};
}

}  // namespace

std::string config_from_json(const nlohmann::json& j, sandbox_config& out) {
  if (!j.is_object()) return "sandbox config must be a JSON object";
  sandbox_config tmp = out;
  if (auto e = apply(j, "", tmp); !e.empty()) return e;
  out = std::move(tmp);
  return {};
}

}  // namespace caf_agent::sandbox
