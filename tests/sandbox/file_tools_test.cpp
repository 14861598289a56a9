// Read / Write / Edit / MultiEdit semantics and workspace confinement of the file tools.
#include "sandbox_test_util.hpp"

#include <sys/stat.h>
#include <unistd.h>

namespace caf_agent::sandbox::test {
namespace {

using file_tools_test = sandbox_fixture;

TEST_F(file_tools_test, read_numbers_lines_and_pages_with_offset_limit) {
  std::string text;
  for (int i = 1; i <= 10; ++i) text += "line " + std::to_string(i) + "\n";
  put_file(ws_ / "a.txt", text);
  auto r = run("Read", {{"file_path", "a.txt"}, {"offset", 3}, {"limit", 2}});
  ASSERT_EQ(r.status, tool_status::ok) << r.output;
  EXPECT_EQ(r.output.substr(0, 28), "     3\tline 3\n     4\tline 4\n");
  EXPECT_NE(r.output.find("offset=5"), std::string::npos) << r.output;
  auto abs = run("Read", {{"file_path", "/workspace/a.txt"}});
  EXPECT_NE(abs.output.find("    10\tline 10"), std::string::npos);
  EXPECT_EQ(abs.output.find("more lines"), std::string::npos);
}

TEST_F(file_tools_test, read_truncates_long_lines_and_refuses_large_files_and_dirs) {
  put_file(ws_ / "long.txt", std::string(5000, 'x') + "\n");
  auto r = run("Read", {{"file_path", "long.txt"}});
  EXPECT_NE(r.output.find("line truncated: 3000 more characters"), std::string::npos);
  put_file(ws_ / "big.bin", std::string(cfg_.read_max_file_bytes + 1, 'a'));
  auto big = run("Read", {{"file_path", "big.bin"}});
  EXPECT_EQ(big.status, tool_status::error);
  EXPECT_NE(big.output.find("byte limit"), std::string::npos);
  auto dir = run("Read", {{"file_path", "harness"}});
  EXPECT_NE(dir.output.find("is a directory"), std::string::npos);
  put_file(ws_ / "bin.dat", std::string("\x7f"
                                        "ELF\0\0\0\x01",
                                        8));
  EXPECT_NE(run("Read", {{"file_path", "bin.dat"}}).output.find("binary file"), std::string::npos);
}

TEST_F(file_tools_test, write_creates_parents_and_requires_read_before_overwrite) {
  auto w = run("Write", {{"file_path", "kernels/k.cu"}, {"content", "__global__ void k(){}\n"}});
  ASSERT_EQ(w.status, tool_status::ok) << w.output;
  EXPECT_EQ(slurp(ws_ / "kernels/k.cu"), "__global__ void k(){}\n");
  put_file(ws_ / "notes.txt", "old\n");
  auto blind = run("Write", {{"file_path", "notes.txt"}, {"content", "new\n"}});
  EXPECT_EQ(blind.status, tool_status::error);
  EXPECT_NE(blind.output.find("has not been read"), std::string::npos);
  run("Read", {{"file_path", "notes.txt"}});
  EXPECT_EQ(run("Write", {{"file_path", "notes.txt"}, {"content", "new\n"}}).status, tool_status::ok);
  EXPECT_EQ(slurp(ws_ / "notes.txt"), "new\n");
  // A file written by the agent counts as seen; a change behind its back does not.
  ::sleep(0);
  put_file(ws_ / "notes.txt", "changed by shell\n");
  struct timespec ts[2] = {{0, UTIME_NOW}, {1, 0}};
  ::utimensat(AT_FDCWD, (ws_ / "notes.txt").c_str(), ts, 0);
  auto stale = run("Write", {{"file_path", "notes.txt"}, {"content", "x"}});
  EXPECT_NE(stale.output.find("modified since"), std::string::npos) << stale.output;
}

TEST_F(file_tools_test, edit_requires_unique_match_or_replace_all) {
  put_file(ws_ / "m.py", "a = 1\nb = 1\nc = 2\n");
  run("Read", {{"file_path", "m.py"}});
  auto missing = run("Edit", {{"file_path", "m.py"}, {"old_string", "zzz"}, {"new_string", "y"}});
  EXPECT_EQ(missing.status, tool_status::error);
  EXPECT_NE(missing.output.find("not found"), std::string::npos);
  auto multi = run("Edit", {{"file_path", "m.py"}, {"old_string", "= 1"}, {"new_string", "= 3"}});
  EXPECT_NE(multi.output.find("found 2 matches"), std::string::npos);
  auto same = run("Edit", {{"file_path", "m.py"}, {"old_string", "c"}, {"new_string", "c"}});
  EXPECT_NE(same.output.find("no changes"), std::string::npos);
  auto ok = run("Edit", {{"file_path", "m.py"}, {"old_string", "c = 2"}, {"new_string", "c = 5"}});
  ASSERT_EQ(ok.status, tool_status::ok) << ok.output;
  EXPECT_NE(ok.output.find("     3\tc = 5"), std::string::npos) << ok.output;
  auto all = run("Edit", {{"file_path", "m.py"}, {"old_string", "= 1"}, {"new_string", "= 9"}, {"replace_all", true}});
  ASSERT_EQ(all.status, tool_status::ok) << all.output;
  EXPECT_EQ(slurp(ws_ / "m.py"), "a = 9\nb = 9\nc = 5\n");
}

TEST_F(file_tools_test, multi_edit_is_all_or_nothing) {
  put_file(ws_ / "k.cu", "int x = 1;\nint y = 2;\n");
  run("Read", {{"file_path", "k.cu"}});
  nlohmann::json bad = {
      {"file_path", "k.cu"},
      {"edits", {{{"old_string", "x = 1"}, {"new_string", "x = 3"}}, {{"old_string", "nope"}, {"new_string", "z"}}}}};
  auto r = run("MultiEdit", bad);
  EXPECT_EQ(r.status, tool_status::error);
  EXPECT_NE(r.output.find("edit 2 of 2 failed"), std::string::npos);
  EXPECT_EQ(slurp(ws_ / "k.cu"), "int x = 1;\nint y = 2;\n");
  nlohmann::json good = {{"file_path", "k.cu"},
                         {"edits",
                          {{{"old_string", "x = 1"}, {"new_string", "x = 3"}},
                           {{"old_string", "x = 3;\nint y"}, {"new_string", "x = 4;\nint w"}}}}};
  ASSERT_EQ(run("MultiEdit", good).status, tool_status::ok);
  EXPECT_EQ(slurp(ws_ / "k.cu"), "int x = 4;\nint w = 2;\n");
  EXPECT_NE(
      run("MultiEdit", {{"file_path", "k.cu"}, {"edits", {{{"old_string", 1}}}}}).output.find("edits[0].old_string"),
      std::string::npos);
}

TEST_F(file_tools_test, protected_files_are_refused_for_write_edit_multiedit) {
  run("Read", {{"file_path", "model.py"}});
  for (const auto& r :
       {run("Write", {{"file_path", "model.py"}, {"content", "x"}}),
        run("Edit", {{"file_path", "/workspace/model.py"}, {"old_string", "pass"}, {"new_string", "x"}}),
        run("Write", {{"file_path", "harness/new.py"}, {"content", "x"}}),
        run("MultiEdit",
            {{"file_path", "./sub/../model.py"}, {"edits", {{{"old_string", "pass"}, {"new_string", "x"}}}}})}) {
    EXPECT_EQ(r.status, tool_status::error);
    EXPECT_NE(r.output.find("protected infrastructure file"), std::string::npos) << r.output;
  }
  EXPECT_EQ(slurp(ws_ / "model.py"), "class Model:\n    pass\n");
  // A symlink to a protected file does not help.
  std::filesystem::create_symlink("model.py", ws_ / "alias.py");
  EXPECT_NE(run("Write", {{"file_path", "alias.py"}, {"content", "x"}}).output.find("protected"), std::string::npos);
}

TEST_F(file_tools_test, paths_outside_the_workspace_are_refused) {
  std::filesystem::create_symlink("/etc", ws_ / "etc_link");
  std::filesystem::create_symlink("/etc/hostname", ws_ / "host_link");
  std::filesystem::create_symlink("../../", ws_ / "up");
  const nlohmann::json attempts[] = {{{"file_path", "../outside.txt"}},
                                     {{"file_path", "/etc/passwd"}},
                                     {{"file_path", "/proc/self/root/etc/passwd"}},
                                     {{"file_path", "etc_link/passwd"}},
                                     {{"file_path", "host_link"}},
                                     {{"file_path", "up/ws/model.py"}},
                                     {{"file_path", "/workspace/../etc/passwd"}}};
  for (const auto& a : attempts) {
    auto r = run("Read", a);
    EXPECT_EQ(r.status, tool_status::error) << a.dump();
    EXPECT_TRUE(r.output.find("outside the workspace") != std::string::npos) << a.dump() << " -> " << r.output;
  }
  auto w = run("Write", {{"file_path", "host_link"}, {"content", "pwned"}});
  EXPECT_NE(w.output.find("points outside the workspace"), std::string::npos) << w.output;
  auto w2 = run("Write", {{"file_path", "etc_link/evil"}, {"content", "pwned"}});
  EXPECT_EQ(w2.status, tool_status::error);
  EXPECT_FALSE(std::filesystem::exists("/etc/evil"));
  EXPECT_FALSE(std::filesystem::exists(root_ / "outside.txt"));
}

TEST_F(file_tools_test, malformed_arguments_and_unknown_tools_give_clear_errors) {
  auto r1 = run("Read", {{"path", "a"}});
  EXPECT_EQ(r1.status, tool_status::error);
  EXPECT_NE(r1.output.find("unknown argument 'path'"), std::string::npos) << r1.output;
  auto r2 = run("Read", {{"file_path", 42}});
  EXPECT_NE(r2.output.find("'file_path' must be a string, got integer"), std::string::npos) << r2.output;
  auto r3 = run("Edit", {{"file_path", "a"}, {"old_string", "x"}});
  EXPECT_NE(r3.output.find("missing required argument 'new_string'"), std::string::npos);
  auto r4 = run("Read", nlohmann::json::array({1, 2}));
  EXPECT_NE(r4.output.find("must be a JSON object"), std::string::npos);
  auto r5 = run("Teleport", {{"x", 1}});
  EXPECT_EQ(r5.status, tool_status::error);
  EXPECT_NE(r5.output.find("unknown tool 'Teleport'"), std::string::npos);
  auto r6 = run("Read", {{"file_path", "a"}, {"offset", -3}});
  EXPECT_NE(r6.output.find("'offset' must be between"), std::string::npos);
  auto r7 = run("Bash", {{"command", "true"}, {"timeout", "soon"}});
  EXPECT_NE(r7.output.find("'timeout' must be a number"), std::string::npos);
  EXPECT_EQ(r5.call_id, "call-1");
  // Results always serialise as JSON, even with invalid UTF-8 in the output.
  put_file(ws_ / "latin1.txt", "caf\xe9\n");
  EXPECT_NO_THROW((void)to_json(run("Read", {{"file_path", "latin1.txt"}})).dump());
}

}  // namespace
}  // namespace caf_agent::sandbox::test
