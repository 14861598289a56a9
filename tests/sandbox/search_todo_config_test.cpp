// Glob, Grep, TodoWrite, config validation, metrics, schemas and output shaping.
#include "sandbox/glob_match.hpp"
#include "sandbox/output_format.hpp"
#include "sandbox_test_util.hpp"

#include <sys/stat.h>

namespace caf_agent::sandbox::test {
namespace {

using search_test = sandbox_fixture;

TEST(glob_match_test, segments_double_star_and_braces) {
  EXPECT_TRUE(glob_match("*.py", "a/b/c.py"));
  EXPECT_TRUE(glob_match("src/**/*.cu", "src/k.cu"));
  EXPECT_TRUE(glob_match("src/**/*.cu", "src/x/y/k.cu"));
  EXPECT_FALSE(glob_match("src/*.cu", "src/x/k.cu"));
  EXPECT_FALSE(glob_match("src/**/*.cu", "other/k.cu"));
  EXPECT_EQ(expand_braces("*.{cu,cpp}"), (std::vector<std::string>{"*.cu", "*.cpp"}));
  EXPECT_LE(expand_braces("{a,b}{a,b}{a,b}{a,b}{a,b}{a,b}{a,b}{a,b}").size(), 64u);
  // Many ** segments stay fast (dynamic programme, no backtracking blow-up).
  EXPECT_FALSE(glob_match("**/a/**/a/**/a/**/a/**/a/**/a/**/b", "a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/c"));
}

TEST_F(search_test, glob_sorts_newest_first_and_limits_to_path) {
  put_file(ws_ / "src/old.cu", "x");
  put_file(ws_ / "src/new.cu", "x");
  put_file(ws_ / "src/sub/deep.cu", "x");
  put_file(ws_ / "other.cpp", "x");
  struct timespec old_ts[2] = {{1000, 0}, {1000, 0}};
  ::utimensat(AT_FDCWD, (ws_ / "src/old.cu").c_str(), old_ts, 0);
  auto r = run("Glob", {{"pattern", "**/*.cu"}});
  ASSERT_EQ(r.status, tool_status::ok);
  EXPECT_NE(r.output.find("/workspace/src/sub/deep.cu"), std::string::npos);
  EXPECT_LT(r.output.find("new.cu"), r.output.find("old.cu"));
  EXPECT_EQ(r.output.find("other.cpp"), std::string::npos);
  auto scoped = run("Glob", {{"pattern", "*.cu"}, {"path", "src/sub"}});
  EXPECT_EQ(scoped.output, "/workspace/src/sub/deep.cu\n");
  EXPECT_EQ(run("Glob", {{"pattern", "*.xyz"}}).output, "No files found");
  EXPECT_EQ(run("Glob", {{"pattern", "*"}, {"path", "/etc"}}).status, tool_status::error);
}

TEST_F(search_test, grep_modes_context_case_and_filters) {
  put_file(ws_ / "a.py", "import torch\nx = 1\ny = torch.zeros(3)\nz = 2\n");
  put_file(ws_ / "b.cu", "// TORCH in a comment\n");
  auto files = run("Grep", {{"pattern", "torch"}});
  EXPECT_EQ(files.output, "/workspace/a.py\n");
  auto icase = run("Grep", {{"pattern", "torch"}, {"-i", true}, {"output_mode", "count"}});
  EXPECT_NE(icase.output.find("/workspace/b.cu:1"), std::string::npos) << icase.output;
  EXPECT_NE(icase.output.find("/workspace/a.py:2"), std::string::npos);
  auto content =
      run("Grep", {{"pattern", "zeros"}, {"output_mode", "content"}, {"-n", true}, {"-B", 1}, {"path", "a.py"}});
  EXPECT_EQ(content.output, "2-x = 1\n3:y = torch.zeros(3)\n") << content.output;
  auto ctx = run("Grep", {{"pattern", "^(x|z) ="}, {"output_mode", "content"}, {"-C", 0}, {"glob", "*.py"}});
  EXPECT_EQ(ctx.output, "/workspace/a.py:x = 1\n/workspace/a.py:z = 2\n");
  auto digits = run("Grep", {{"pattern", "zeros\\(\\d\\)"}, {"type", "py"}});
  EXPECT_EQ(digits.output, "/workspace/a.py\n");
  EXPECT_EQ(run("Grep", {{"pattern", "nothing_here"}}).output, "No matches found");
  auto bad = run("Grep", {{"pattern", "(unclosed"}});
  EXPECT_EQ(bad.status, tool_status::error);
  EXPECT_NE(bad.output.find("invalid regex"), std::string::npos);
  EXPECT_NE(run("Grep", {{"pattern", "x"}, {"output_mode", "lines"}}).output.find("output_mode"), std::string::npos);
  // A huge single line does not crash the matcher.
  put_file(ws_ / "huge.txt", std::string(3 << 20, 'a') + "b\n");
  EXPECT_EQ(run("Grep", {{"pattern", "(a|a)*b"}, {"path", "huge.txt"}, {"output_mode", "count"}}).status,
            tool_status::ok);
}

TEST_F(search_test, todo_write_validates_and_replaces_the_list) {
  nlohmann::json todos = {{{"content", "write kernel"}, {"status", "in_progress"}, {"id", "1"}},
                          {{"content", "profile"}, {"status", "pending"}, {"id", "2"}}};
  auto ok = run("TodoWrite", {{"todos", todos}});
  ASSERT_EQ(ok.status, tool_status::ok) << ok.output;
  EXPECT_NE(ok.output.find("[~] write kernel"), std::string::npos);
  EXPECT_EQ(sb_->todos().size(), 2u);
  auto bad_status = run("TodoWrite", {{"todos", {{{"content", "x"}, {"status", "done"}, {"id", "1"}}}}});
  EXPECT_NE(bad_status.output.find("status must be pending, in_progress or completed"), std::string::npos);
  auto dup = run("TodoWrite", {{"todos",
                                {{{"content", "x"}, {"status", "pending"}, {"id", "1"}},
                                 {{"content", "y"}, {"status", "pending"}, {"id", "1"}}}}});
  EXPECT_NE(dup.output.find("not unique"), std::string::npos);
  EXPECT_EQ(sb_->todos().size(), 2u);  // failed writes keep the old list
}

TEST(config_test, validate_names_the_bad_field) {
  sandbox_config c;
  EXPECT_NE(c.validate().find("workspace"), std::string::npos);
  c.workspace = std::filesystem::temp_directory_path();
  EXPECT_EQ(c.validate(), "");
  auto bad = [&](auto mutate, const char* field) {
    sandbox_config x = c;
    mutate(x);
    EXPECT_NE(x.validate().find(field), std::string::npos) << field << ": " << x.validate();
  };
  bad([](auto& x) { x.default_timeout_s = 0; }, "default_timeout_s");
  bad([](auto& x) { x.max_timeout_s = 1; }, "max_timeout_s");
  bad([](auto& x) { x.output_cap_bytes = 10; }, "output_cap_bytes");
  bad([](auto& x) { x.limits.max_processes = 1; }, "limits.max_processes");
  bad([](auto& x) { x.limits.address_space_bytes = 1; }, "limits.address_space_bytes");
  bad([](auto& x) { x.protected_paths = {"../x"}; }, "protected_paths");
  bad([](auto& x) { x.extra_ro_binds = {{"/definitely/not/here", ""}}; }, "extra_ro_binds");
  bad([](auto& x) { x.mount_point = "/"; }, "mount_point");
  sandbox_config from;
  EXPECT_NE(config_from_json({{"keep_workspce", true}}, from).find("unknown config key 'keep_workspce'"),
            std::string::npos);
  EXPECT_NE(config_from_json({{"limits", {{"open_files", -1}}}}, from).find("limits.open_files"), std::string::npos);
  EXPECT_NE(config_from_json({{"keep_workspace", "yes"}}, from).find("keep_workspace"), std::string::npos);
  EXPECT_EQ(config_from_json({{"keep_workspace", true}, {"limits", {{"max_processes", 64}}}}, from), "");
  EXPECT_TRUE(from.keep_workspace);
  EXPECT_EQ(from.limits.max_processes, 64u);
  // isolation is an enum read by the names it had as a string; another name is refused naming both.
  EXPECT_EQ(config_from_json({{"isolation", "none"}}, from), "");
  EXPECT_EQ(from.isolation, isolation_kind::none);
  EXPECT_EQ(to_string(from.isolation), "none");
  EXPECT_EQ(config_from_json({{"isolation", "bwrap"}}, from), "");
  EXPECT_EQ(from.isolation, isolation_kind::bwrap);
  EXPECT_NE(config_from_json({{"isolation", "docker"}}, from).find("'docker' is not one of: bwrap, none"),
            std::string::npos)
      << config_from_json({{"isolation", "docker"}}, from);
  EXPECT_NE(config_from_json({{"isolation", 1}}, from).find("isolation"), std::string::npos);
  // So is cgroup ("auto" is the enumerator `automatic`: files hold the name).
  EXPECT_EQ(config_from_json({{"cgroup", "off"}}, from), "");
  EXPECT_EQ(from.cgroup, cgroup_policy::off);
  EXPECT_EQ(config_from_json({{"cgroup", "auto"}}, from), "");
  EXPECT_EQ(from.cgroup, cgroup_policy::automatic);
  EXPECT_NE(config_from_json({{"cgroup", "maybe"}}, from).find("'maybe' is not one of: auto, required, off"),
            std::string::npos);
}

TEST(sandbox_create_test, bad_config_and_missing_bwrap_fail_with_the_cause) {
  sandbox_config c;
  auto r = episode_sandbox::create(c);
  EXPECT_FALSE(r.sandbox);
  EXPECT_NE(r.error.find("workspace"), std::string::npos);
  auto root = make_temp_root();
  std::filesystem::create_directories(root / "ws");
  c.workspace = root / "ws";
  c.bwrap_path = "/nonexistent/bwrap";
  r = episode_sandbox::create(c);
  EXPECT_FALSE(r.sandbox);
  EXPECT_NE(r.error.find("bubblewrap is not usable"), std::string::npos) << r.error;
  std::filesystem::remove_all(root);
}

TEST(output_format_test, truncation_marker_binary_and_utf8) {
  capped_buffer b(100);
  b.append(std::string(1000, 'x'));
  b.append("END");
  const auto s = b.take();
  EXPECT_NE(s.find("[... output truncated: 903 bytes omitted ...]"), std::string::npos) << s;
  EXPECT_EQ(s.substr(s.size() - 3), "END");
  EXPECT_NE(to_observation(std::string("\x01\x02\x00zz", 5), 100, 12345).find("binary output: 12345 bytes"),
            std::string::npos);
  EXPECT_EQ(sanitize_utf8("a\xff"
                          "b"),
            "a\xEF\xBF\xBD"
            "b");
}

TEST_F(search_test, metrics_and_schemas) {
  run("Read", {{"file_path", "model.py"}});
  run("Read", {{"file_path", "nope.py"}});
  run("NoSuchTool", {});
  const auto c = sb_->metrics().get("Read");
  EXPECT_EQ(c.calls, 2u);
  EXPECT_EQ(c.errors, 1u);
  const auto j = sb_->metrics().to_json();
  EXPECT_EQ(j["<unknown>"]["errors"], 1);
  EXPECT_GT(j["Read"]["p50_ms"].get<double>(), 0.0);
  const auto schemas = episode_sandbox::tool_schemas();
  std::set<std::string> names;
  for (const auto& t : schemas) {
    EXPECT_EQ(t["type"], "function");
    EXPECT_EQ(t["function"]["parameters"]["type"], "object");
    names.insert(t["function"]["name"].get<std::string>());
  }
  EXPECT_EQ(names, (std::set<std::string>{"Bash", "BashOutput", "KillBash", "Read", "Write", "Edit", "MultiEdit",
                                          "Glob", "Grep", "TodoWrite"}));
}

}  // namespace
}  // namespace caf_agent::sandbox::test
