// Bash, BashOutput and KillBash semantics inside the bubblewrap sandbox.
#include "proc_scan.hpp"
#include "sandbox_test_util.hpp"

#include <chrono>
#include <thread>

namespace caf_agent::sandbox::test {
namespace {

using bash_test = sandbox_fixture;

TEST_F(bash_test, runs_in_workspace_with_clean_env_and_reports_exit_codes) {
  ::setenv("CAF_TEST_SECRET", "hunter2", 1);
  auto r = bash("pwd; echo $HOME; id -u; env | sort | cut -d= -f1 | tr '\\n' ' '");
  ASSERT_EQ(r.status, tool_status::ok) << r.output;
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_NE(r.output.find("/workspace\n/workspace\n1000\n"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("CAF_TEST_SECRET"), std::string::npos);
  auto fail = bash("echo out; echo err >&2; exit 3");
  EXPECT_EQ(fail.status, tool_status::ok);
  EXPECT_EQ(fail.exit_code, 3);
  EXPECT_NE(fail.output.find("out\nerr\nexit code 3"), std::string::npos) << fail.output;
  EXPECT_EQ(bash("true").output, "(no output)");
}

TEST_F(bash_test, files_persist_between_calls_and_tmp_is_private) {
  EXPECT_EQ(bash("echo hi > note.txt && mkdir -p d && echo x > /tmp/scratch").exit_code, 0);
  EXPECT_EQ(slurp(ws_ / "note.txt"), "hi\n");
  EXPECT_NE(bash("cat note.txt; ls /tmp").output.find("hi"), std::string::npos);
  EXPECT_EQ(bash("ls /tmp").output, "(no output)");  // fresh tmpfs per command
  // A file created by the shell can be edited by the file tools (same owner model).
  run("Read", {{"file_path", "note.txt"}});
  EXPECT_EQ(run("Edit", {{"file_path", "note.txt"}, {"old_string", "hi"}, {"new_string", "ho"}}).status,
            tool_status::ok);
  EXPECT_EQ(bash("cat note.txt").output, "ho\n");
}

TEST_F(bash_test, compiler_works_inside) {
  put_file(ws_ / "main.cpp", "#include <cstdio>\nint main(){std::puts(\"compiled\");}\n");
  auto r = bash("g++ -O1 -o main main.cpp && ./main", 60000);
  EXPECT_EQ(r.status, tool_status::ok) << r.output;
  EXPECT_NE(r.output.find("compiled"), std::string::npos) << r.output;
}

TEST_F(bash_test, timeout_kills_and_is_reported) {
  const auto t0 = std::chrono::steady_clock::now();
  auto r = bash("echo started; sleep 1000", 500);
  const auto secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_EQ(r.status, tool_status::timeout);
  EXPECT_NE(r.output.find("started"), std::string::npos);
  EXPECT_NE(r.output.find("timed out after 0.5 s"), std::string::npos) << r.output;
  EXPECT_LT(secs, 3.0);
}

TEST_F(bash_test, output_is_truncated_with_a_marker) {
  auto r = bash("seq 1 100000");
  EXPECT_LE(r.output.size(), cfg_.output_cap_bytes + 200);
  EXPECT_NE(r.output.find("[... output truncated:"), std::string::npos);
  EXPECT_EQ(r.output.rfind("100000\n"), r.output.size() - 7) << "tail kept";
  EXPECT_EQ(r.output.find("1\n2\n3\n"), 0u) << "head kept";
}

TEST_F(bash_test, background_shell_output_filter_and_kill) {
  auto start = run("Bash", {{"command", "for i in 1 2 3; do echo tick $i; echo tock; done; sleep 1000"},
                            {"run_in_background", true}});
  ASSERT_EQ(start.status, tool_status::ok) << start.output;
  ASSERT_NE(start.output.find("bash_1"), std::string::npos);
  std::this_thread::sleep_for(std::chrono::milliseconds(400));
  auto out = run("BashOutput", {{"bash_id", "bash_1"}, {"filter", "^tick"}});
  EXPECT_NE(out.output.find("status: running"), std::string::npos) << out.output;
  EXPECT_NE(out.output.find("tick 3"), std::string::npos);
  EXPECT_EQ(out.output.find("tock"), std::string::npos);
  EXPECT_NE(run("BashOutput", {{"bash_id", "bash_1"}}).output.find("(no new output)"), std::string::npos);
  auto killed = run("KillBash", {{"bash_id", "bash_1"}});
  EXPECT_NE(killed.output.find("killed"), std::string::npos);
  EXPECT_NE(run("BashOutput", {{"bash_id", "bash_1"}}).output.find("status: killed"), std::string::npos);
  EXPECT_EQ(run("BashOutput", {{"bash_id", "bash_9"}}).status, tool_status::error);
}

TEST_F(bash_test, background_shell_exit_code_and_limit) {
  run("Bash", {{"command", "echo done; exit 4"}, {"run_in_background", true}});
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  auto out = run("BashOutput", {{"bash_id", "bash_1"}});
  EXPECT_NE(out.output.find("status: exited with code 4"), std::string::npos) << out.output;
  EXPECT_NE(out.output.find("done"), std::string::npos);
  for (std::size_t i = 0; i < cfg_.max_background_shells; ++i)
    EXPECT_EQ(run("Bash", {{"command", "sleep 1000"}, {"run_in_background", true}}).status, tool_status::ok);
  auto over = run("Bash", {{"command", "sleep 1000"}, {"run_in_background", true}});
  EXPECT_EQ(over.status, tool_status::error);
  EXPECT_NE(over.output.find("too many background shells"), std::string::npos);
}

TEST(bash_python_test, venv_python_runs_inside_when_available) {
  const char* src = std::getenv("CAF_AGENT_SOURCE_DIR");
  if (src == nullptr || !std::filesystem::exists(std::string(src) + "/.venv/bin/python"))
    GTEST_SKIP() << "no .venv in CAF_AGENT_SOURCE_DIR";
  const auto venv = std::filesystem::path(src) / ".venv";
  const auto real_python = std::filesystem::canonical(venv / "bin/python");
  const auto home = real_python.parent_path().parent_path();
  struct stat st {};
  for (auto p = home; p != p.root_path(); p = p.parent_path())
    if (::stat(p.c_str(), &st) == 0 && (st.st_mode & S_IXOTH) == 0)
      GTEST_SKIP() << "the venv's interpreter lives under " << p << " which the sandbox uid cannot traverse";
  auto root = make_temp_root();
  std::filesystem::create_directories(root / "ws");
  sandbox_config c;
  c.workspace = root / "ws";
  c.extra_ro_binds = {{venv.string(), ""}, {home.string(), ""}};
  auto r = episode_sandbox::create(c);
  ASSERT_TRUE(r.sandbox) << r.error;
  auto out = r.sandbox->execute(
      {"1", "Bash", {{"command", venv.string() + "/bin/python -c 'import sys; print(sys.version_info[0])'"}}});
  EXPECT_EQ(out.output, "3\n");
  r.sandbox.reset();
  std::filesystem::remove_all(root);
}

}  // namespace
}  // namespace caf_agent::sandbox::test
