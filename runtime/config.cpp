// runtime/config.cpp: see config.hpp.
#include "runtime/config.hpp"

#include <filesystem>
#include <fstream>
#include <functional>
#include <set>
#include <sstream>

#include "runtime/config_reader.hpp"
#include "runtime/embedded_config.hpp"

namespace caf_agent::runtime {

namespace {

/// Reads the top-level sections of app_config's field list from `root`; each section strict and
/// validated when it was read cleanly.
struct root_reader {
  const toml::table& root;
  std::vector<std::string>& errors;
  std::set<std::string, std::less<>> known;
  template <class Section>
  void section(std::string_view name, Section& s, std::string_view) {
    known.emplace(name);
    const toml::table* table = nullptr;
    if (auto* node = root.get(name)) {
      table = node->as_table();
      if (!table) {
        errors.push_back("config key '" + std::string{name} + "' must be a table");
        return;
      }
    }
    section_reader r{table, std::string{name}, errors};
    const auto before = errors.size();
    r.read_fields(s);
    r.finish();
    if (errors.size() == before) base::validate_fields(s, r);  // validate only what was read cleanly
  }
};

/// Prints a field list as TOML: a section's keys (each after its comment), then its nested tables.
struct printer {
  std::string prefix;  ///< the table's dotted name
  std::string& out;
  std::vector<std::function<void()>> nested;  ///< printed after this table's own keys

  template <class T, class... Checks>
  void operator()(std::string_view key, const T& value, std::string_view comment, const Checks&...) {
    auto line = std::string{key} + " = " + base::toml_value(value);
    // Rationale: a comment beside a short line reads like the hand-written examples; a long
    // one goes above its key so no line passes ~110 columns.
    constexpr size_t column = 31, width = 110;
    const size_t pad = std::max(column, line.size() + 1);
    if (pad + 2 + comment.size() <= width) {
      line.resize(pad, ' ');
      out += line + "# " + std::string{comment} + "\n";
    } else {
      comment_lines(comment);
      out += line + "\n";
    }
  }
  template <class Section>
  void section(std::string_view key, const Section& s, std::string_view comment) {
    auto name = prefix.empty() ? std::string{key} : prefix + "." + std::string{key};
    nested.push_back([this, name, &s, comment] {
      out += "\n";
      comment_lines(comment);
      out += "[" + name + "]\n";
      printer p{name, out, {}};
      Section::fields(p, s);
      for (auto& n : p.nested) n();
    });
  }
  /// `text` as "# " lines of at most ~100 columns, broken at spaces.
  void comment_lines(std::string_view text) {
    while (!text.empty()) {
      auto cut = text.size() <= 98 ? text.size() : text.rfind(' ', 98);
      if (cut == std::string_view::npos || cut == 0) cut = std::min<size_t>(text.size(), 98);
      out += "# " + std::string{text.substr(0, cut)} + "\n";
      text.remove_prefix(cut);
      while (!text.empty() && text.front() == ' ') text.remove_prefix(1);
    }
  }
};

}  // namespace

config_result parse_config(std::string_view toml_text, std::string_view origin) {
  config_result out;
  toml::table root;
  try {
    root = toml::parse(toml_text, origin);
  } catch (const toml::parse_error& e) {
    std::ostringstream msg;
    msg << origin << ":" << e.source().begin.line << ":" << e.source().begin.column
        << ": malformed TOML: " << e.description();
    out.errors.push_back(msg.str());
    return out;
  }
  root_reader reader{root, out.errors, {}};
  app_config::fields(reader, out.config);
  std::vector<std::string> unknown;
  for (auto& [k, v] : root)
    if (!reader.known.contains(k.str()))
      unknown.push_back("unknown config section or key '" + std::string{k.str()} + "'");
  out.errors.insert(out.errors.begin(), unknown.begin(), unknown.end());
  for (auto& e : out.errors)
    if (e.rfind(std::string{origin}, 0) != 0) e = std::string{origin} + ": " + e;
  return out;
}

std::string print_config(const app_config& cfg) {
  std::string out =
      "# The keys of every section with their comments (printed by caf-agent-config;\n"
      "# config/defaults.toml is its output for the defaults: regenerate it so). Unknown keys are errors.\n";
  printer p{"", out, {}};
  app_config::fields(p, cfg);
  for (auto& n : p.nested) n();
  return out;
}

config_result load_config_file(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    config_result out;
    out.errors.push_back("config file '" + path + "' is a directory, not a TOML file");
    return out;
  }
  std::ifstream in{path};
  if (!in) {
    config_result out;
    out.errors.push_back("cannot read config file '" + path + "'");
    return out;
  }
  std::stringstream text;
  text << in.rdbuf();
  return parse_config(text.str(), path);
}

std::string_view embedded_default_config() {
  return embedded_local_toml;
}

std::string train_run_dir(const app_config& cfg) {
  return cfg.train.run_dir.empty() ? cfg.runtime.run_dir + "/train" : cfg.train.run_dir;
}

std::string use_checkpoint(const std::string& dir, bool eval, bool keep_episodes, app_config& cfg) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path p{dir};
  const fs::path actor = fs::is_regular_file(p / "actor" / "config.json", ec) ? p / "actor" : p;
  if (!fs::is_regular_file(actor / "config.json", ec))
    return "--checkpoint " + dir +
           ": neither actor/config.json nor config.json is there (give a trainer step's "
           "directory, e.g. runs/local/train/checkpoints/step-00000003, or a model directory)";
  for (const char* name : {"tokenizer.json", "tokenizer_config.json"})
    if (!fs::is_regular_file(actor / name, ec))
      return "--checkpoint " + dir + ": " + (actor / name).string() +
             " is missing (copy it from the base model; the trainer copies it into every checkpoint it writes)";
  cfg.policy.backend = policy::backend_kind::libtorch;
  cfg.policy.model_dir = actor.string();
  if (eval) {
    if (!keep_episodes && cfg.train.eval.episodes > 0) cfg.rollout.episodes = cfg.train.eval.episodes;
    cfg.policy.temperature = cfg.train.eval.temperature;
    if (cfg.train.eval.max_turns > 0) cfg.rollout.max_turns_eval = cfg.train.eval.max_turns;
  }
  return {};
}

std::vector<std::string> check_paths(const app_config& cfg, messages::node_role role, bool drives_run) {
  using messages::node_role;
  namespace fs = std::filesystem;
  std::vector<std::string> errors;
  std::error_code ec;
  auto need = [&](const std::string& key, const fs::path& p, bool dir, const std::string& what) {
    bool ok = dir ? fs::is_directory(p, ec) : fs::is_regular_file(p, ec);
    if (!ok)
      errors.push_back(key + ": '" + p.string() + "' " + (fs::exists(p, ec) ? "is not " : "does not exist; need ") +
                       what);
  };
  bool rollout = role == node_role::rollout || role == node_role::local;
  bool pool = role == node_role::gpu_pool || role == node_role::local;
  auto& r = cfg.rollout;
  if (rollout || (pool && cfg.gpu_pool.backend == gpu_pool::pool_backend::worker))
    need("rollout.skills_dir", r.skills_dir, true, "a directory");
  bool skills_ok = errors.empty();  // what lives under it is checked only when it exists
  if (rollout && skills_ok)
    need("rollout.skills_dir", fs::path{r.skills_dir} / "workspace" / "SKILL.md", false, "the workspace's SKILL.md");
  if (rollout && !r.skill_file.empty()) need("rollout.skill_file", r.skill_file, false, "a file (the system prompt)");
  if (pool && skills_ok && cfg.gpu_pool.backend == gpu_pool::pool_backend::worker)
    need("rollout.skills_dir", fs::path{r.skills_dir} / "eval_worker", true, "the eval worker's directory");
  if (drives_run && (role == node_role::coordinator || role == node_role::local))
    need("rollout.tasks_dir", r.tasks_dir, true, "a directory of tasks");
  if (rollout && cfg.policy.backend == policy::backend_kind::replay)
    need("policy.replay_path", cfg.policy.replay_path, false, "a file");
  if (rollout && cfg.policy.backend == policy::backend_kind::libtorch && !cfg.policy.script.empty())
    need("policy.script", cfg.policy.script, false, "a file of recorded episodes (JSON lines)");
  if (rollout && cfg.train.plays_demonstrations())
    need("train.rft.demonstrations", cfg.train.rft.demonstrations, false, "a file of recorded episodes (JSON lines)");
  if (role == node_role::learner || (role == node_role::local && cfg.train.enabled)) {
    auto model = cfg.learner.model_dir.empty() ? cfg.policy.model_dir : cfg.learner.model_dir;
    if (!model.empty())
      need(cfg.learner.model_dir.empty() ? "policy.model_dir" : "learner.model_dir", fs::path{model} / "config.json",
           false, "the checkpoint's config.json");
    else if (role == node_role::local)
      errors.push_back("learner.model_dir: no model to train (set it or policy.model_dir)");
  }
  if ((rollout || role == node_role::inference) && cfg.policy.backend == policy::backend_kind::libtorch)
    need("policy.model_dir", fs::path{cfg.policy.model_dir} / "tokenizer.json", false,
         "the checkpoint's tokenizer.json");
  return errors;
}

}  // namespace caf_agent::runtime
