// tests/runtime/config_fields_test.cpp: the field lists (base/config_fields.hpp) behind the config:
// the printed example (config/defaults.toml) is what the lists print, every checked-in example
// reads back to the same values through its printed form, every key is commented, and a
// library's struct validates without TOML.
#include <cstdlib>
#include <fstream>
#include <set>
#include <sstream>
#include <string>

#include <gtest/gtest.h>

#include "runtime/config.hpp"

using namespace caf_agent;
using namespace caf_agent::runtime;

namespace {

std::string source_dir() {
  auto* dir = std::getenv("CAF_AGENT_SOURCE_DIR");
  return dir ? dir : ".";
}

std::string read_file(const std::string& path) {
  std::ifstream in{path};
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

/// Every key of a field list, with its comment, checked for presence and uniqueness.
struct comment_checker {
  std::string prefix;
  std::set<std::string> keys;
  std::vector<std::string> problems;
  template <class T, class... Checks>
  void operator()(std::string_view key, const T&, std::string_view comment, const Checks&...) {
    note(key, comment);
  }
  template <class S>
  void section(std::string_view key, const S& s, std::string_view comment) {
    note(key, comment);
    comment_checker nested{prefix + std::string{key} + ".", {}, {}};
    S::fields(nested, s);
    problems.insert(problems.end(), nested.problems.begin(), nested.problems.end());
  }
  void note(std::string_view key, std::string_view comment) {
    auto name = prefix + std::string{key};
    if (comment.empty()) problems.push_back(name + " has no comment");
    if (!keys.insert(std::string{key}).second) problems.push_back(name + " is listed twice");
  }
};

}  // namespace

TEST(config_fields, defaults_file_is_what_the_field_lists_print) {
  const auto file = read_file(source_dir() + "/config/defaults.toml");
  EXPECT_EQ(file, print_config(app_config{}))
      << "config/defaults.toml is out of date: regenerate it with build/caf-agent-config > config/defaults.toml";
  auto r = parse_config(file, "config/defaults.toml");
  ASSERT_TRUE(r.ok()) << r.errors.front();
  EXPECT_TRUE(base::differing_fields(r.config, app_config{}).empty());
}

TEST(config_fields, every_example_reads_back_to_its_values_through_the_printed_form) {
  for (auto name : {"local", "cluster", "replay", "defaults"}) {
    auto file = load_config_file(source_dir() + "/config/" + name + ".toml");
    ASSERT_TRUE(file.ok()) << name << ": " << file.errors.front();
    auto printed = print_config(file.config);
    auto again = parse_config(printed, "printed");
    ASSERT_TRUE(again.ok()) << name << ": " << again.errors.front() << "\n" << printed;
    auto diff = base::differing_fields(file.config, again.config);
    EXPECT_TRUE(diff.empty()) << name << ": " << diff.front();
    EXPECT_EQ(print_config(again.config), printed) << name;
  }
}

TEST(config_fields, printed_values_keep_odd_strings_and_exact_doubles) {
  app_config c;
  c.rollout.skill_file = "a \"quoted\" \\ path\nwith\ta tab and \x01";
  c.learner.actor_lr = 3e-6;
  c.learner.critic_lr = 0.1 + 0.2;  // not 0.3: the shortest form must still read back exactly
  c.policy.temperature = 7;         // a whole double stays a float ("7.0")
  c.train.rft.lr_schedule = learner::lr_schedule_kind::phases;
  c.train.rft.iterations = 5;
  c.train.rft.lr_phases = {{3, 1e-2}, {2, 5}};
  auto r = parse_config(print_config(c), "printed");
  ASSERT_TRUE(r.ok()) << r.errors.front();
  EXPECT_EQ(r.config.rollout.skill_file, c.rollout.skill_file);
  EXPECT_EQ(r.config.learner.actor_lr, 3e-6);
  EXPECT_EQ(r.config.learner.critic_lr, 0.1 + 0.2);
  EXPECT_EQ(r.config.policy.temperature, 7.0);
  EXPECT_EQ(r.config.train.rft.lr_phases, c.train.rft.lr_phases);
  EXPECT_NE(print_config(c).find("temperature = 7.0"), std::string::npos);
}

TEST(config_fields, every_key_is_commented_once) {
  comment_checker check;
  const app_config defaults;
  app_config::fields(check, defaults);
  for (auto& p : check.problems) ADD_FAILURE() << p;
  // Stage tables list only their stage's keys: rft's are not in agentic_ppo's.
  EXPECT_NE(print_config(app_config{}).find("[train.rft]\n"), std::string::npos);
  auto agentic = print_config(app_config{});
  agentic = agentic.substr(agentic.find("[train.agentic_ppo]"));
  agentic = agentic.substr(0, agentic.find("\n[", 1));
  EXPECT_EQ(agentic.find("demonstrations"), std::string::npos);
  EXPECT_NE(agentic.find("temperature"), std::string::npos);
}

TEST(config_fields, a_library_struct_validates_without_toml) {
  sandbox::sandbox_settings s;
  s.bash_timeout_s = 0;
  s.max_output_bytes = 0;
  base::error_list errors;
  base::validate_config(s, errors);
  ASSERT_EQ(errors.lines.size(), 2U);
  EXPECT_EQ(errors.lines[0], "bash_timeout_s: must be > 0, got 0");
  EXPECT_EQ(errors.lines[1], "max_output_bytes: must be > 0, got 0");

  policy::policy_config p;  // a rule between fields, from validate()
  p.kv_layout = policy::kv_layout_kind::slots;
  p.kv_cache_tokens = 4096;
  base::error_list policy_errors;
  base::validate_config(p, policy_errors);
  ASSERT_EQ(policy_errors.lines.size(), 1U);
  EXPECT_EQ(policy_errors.lines[0],
            "kv_cache_tokens: applies to kv_layout = \"paged\" only (slots hold max_batch x max_context)");
  p = {};  // an e4m3 KV cache rounds the model's bf16 or fp16 keys
  p.kv_cache_dtype = policy::kv_cache_dtype_kind::fp8_e4m3;
  p.dtype = policy::model_dtype::float32;
  base::error_list fp8_errors;
  base::validate_config(p, fp8_errors);
  ASSERT_EQ(fp8_errors.lines.size(), 1U);
  EXPECT_EQ(fp8_errors.lines[0], "kv_cache_dtype: fp8_e4m3 needs dtype = \"bfloat16\" or \"float16\"");

  rollout::train_config t;  // nested sections are checked too, their keys prefixed
  t.rft.max_repeats = 0;
  t.eval.temperature = -1;
  base::error_list train_errors;
  base::validate_config(t, train_errors);
  ASSERT_EQ(train_errors.lines.size(), 2U);
  EXPECT_EQ(train_errors.lines[0], "rft.max_repeats: must be >= 1");
  EXPECT_EQ(train_errors.lines[1], "eval.temperature: must be >= 0 (0: greedy)");

  base::error_list none;
  base::validate_config(app_config{}, none);
  EXPECT_TRUE(none.lines.empty()) << none.lines.front();
}

TEST(config_fields, checks_name_the_value) {
  EXPECT_EQ(base::check_message(base::positive(), int64_t{-3}), "must be > 0, got -3");
  EXPECT_EQ(base::check_message(base::range(1, 4), 5.0), "must be in [1.000000, 4.000000], got 5.000000");
  EXPECT_EQ(base::check_message(base::above(1, "must be > 1"), 1.0), "must be > 1");
  EXPECT_EQ(base::check_message(base::above(1, "must be > 1"), 1.5), "");
  EXPECT_EQ(base::check_message(base::above_within(0, 1, "in (0, 1]"), 1.0), "");
  EXPECT_EQ(base::check_message(base::above_within(0, 1, "in (0, 1]"), 0.0), "in (0, 1]");
  EXPECT_EQ(base::check_message(base::at_least(0, "must be >= 0"), std::numeric_limits<double>::quiet_NaN()),
            "must be >= 0");
  EXPECT_EQ(base::check_message(base::not_empty(), std::string{}), "must not be empty");
}
