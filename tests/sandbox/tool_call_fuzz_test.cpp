// Tool calls with arguments an attacker (or a confused model) writes: every file, search and
// todo tool, each argument set to values of the wrong type, out of range, empty, huge, with NUL
// bytes or invalid UTF-8, paths that leave the workspace. Each call must end in an ok or error
// observation, never the sandbox's "internal failure" (an exception a tool let escape).
#include "sandbox_test_util.hpp"

#include <random>

#include <sys/stat.h>

namespace caf_agent::sandbox::test {
namespace {

using tool_call_fuzz_test = sandbox_fixture;

nlohmann::json bad_value(std::mt19937_64& rng) {
  static const std::vector<nlohmann::json> values = [] {
    std::vector<nlohmann::json> v = {
        nullptr,
        true,
        false,
        0,
        -1,
        1,
        3,
        INT64_MAX,
        INT64_MIN,
        UINT64_MAX,
        1e308,
        -1e308,
        0.5,
        "",
        "a.txt",
        "model.py",
        "/workspace/a.txt",
        "../../../etc/passwd",
        "/etc/passwd",
        "/proc/self/environ",
        "link",
        "link/new.txt",
        "dir/../../escape.txt",
        "dir",
        "dir/",
        ".",
        "..",
        "//",
        "a.txt/x",
        std::string(5000, 'x'),
        std::string("nul\0byte", 8),
        "\xff\xfe invalid utf-8",
        "*",
        "**/*",
        "{a,b}{c,d}{e,f}{g,h}{i,j}{k,l}{m,n}",
        "[",
        "(",
        "(a*)*b",
        "\\",
        "content",
        "files_with_matches",
        "count",
        "pending",
        "high",
        nlohmann::json::array(),
        nlohmann::json::array({1, "x", nullptr}),
        nlohmann::json::object(),
        nlohmann::json{{"a", 1}},
        nlohmann::json::array({nlohmann::json{{"old_string", "a"}, {"new_string", "b"}}}),
        nlohmann::json::array({nlohmann::json{{"content", "t"}, {"status", "pending"}, {"id", "1"}}}),
        nlohmann::json::array({nlohmann::json{{"old_string", 1}}, "x"})};
    return v;
  }();
  return values[rng() % values.size()];
}

TEST_F(tool_call_fuzz_test, bad_arguments_give_observations_not_internal_failures) {
  put_file(ws_ / "a.txt", "alpha\nbeta\n");
  std::filesystem::create_directories(ws_ / "dir");
  std::filesystem::create_symlink("/etc", ws_ / "link");
  // Each call starts from a valid one and has one to three of its tool's arguments replaced.
  struct tool_case {
    std::string tool;
    nlohmann::json valid;
    std::vector<std::string> keys;  // the tool's arguments, optional ones too
  };
  const std::vector<tool_case> cases = {
      {"Read", {{"file_path", "a.txt"}}, {"file_path", "offset", "limit"}},
      {"Write", {{"file_path", "new.txt"}, {"content", "x\n"}}, {"file_path", "content"}},
      {"Edit",
       {{"file_path", "a.txt"}, {"old_string", "alpha"}, {"new_string", "gamma"}},
       {"file_path", "old_string", "new_string", "replace_all"}},
      {"MultiEdit",
       {{"file_path", "a.txt"}, {"edits", nlohmann::json::array({{{"old_string", "beta"}, {"new_string", "b"}}})}},
       {"file_path", "edits"}},
      {"Glob", {{"pattern", "*.txt"}}, {"pattern", "path"}},
      {"Grep",
       {{"pattern", "alpha"}},
       {"pattern", "path", "glob", "output_mode", "-i", "-n", "-A", "-B", "-C", "head_limit", "type"}},
      {"TodoWrite",
       {{"todos", nlohmann::json::array({{{"content", "t"}, {"status", "pending"}, {"id", "1"}}})}},
       {"todos"}},
      {"BashOutput", {{"bash_id", "1"}}, {"bash_id", "filter"}},
      {"KillBash", {{"shell_id", "1"}}, {"shell_id"}},
  };
  std::mt19937_64 rng(20261202);
  int calls = 0, errors = 0;
  for (int i = 0; i < 4000; ++i) {
    const auto& c = cases[rng() % cases.size()];
    if (c.tool == "Read" || c.tool == "Edit" || c.tool == "MultiEdit") run("Read", {{"file_path", "a.txt"}});
    nlohmann::json args = c.valid;
    const int n = 1 + static_cast<int>(rng() % 3);
    for (int j = 0; j < n; ++j) args[c.keys[rng() % c.keys.size()]] = bad_value(rng);
    if (rng() % 20 == 0) args["unknown_key"] = 1;
    if (rng() % 40 == 0) args = bad_value(rng);  // not even an object
    auto r = run(c.tool, args);
    ++calls;
    if (r.status == tool_status::error) ++errors;
    ASSERT_NE(r.status, tool_status::internal) << c.tool << " " << args.dump() << ": " << r.output;
    if (i % 500 == 0) put_file(ws_ / "a.txt", "alpha\nbeta\n");  // the edits change it
  }
  EXPECT_GT(errors, calls / 2);           // most of these calls are wrong, and say so
  EXPECT_GT(calls - errors, calls / 50);  // and the valid paths ran too
  // Nothing was written outside the workspace, through the link to /etc or past its root.
  EXPECT_FALSE(std::filesystem::exists("/etc/new.txt"));
  EXPECT_FALSE(std::filesystem::exists(ws_.parent_path() / "escape.txt"));
  EXPECT_TRUE(std::filesystem::is_directory(ws_));
}

}  // namespace
}  // namespace caf_agent::sandbox::test
