// Escape and abuse attempts: each must be contained and produce a clear observation.
#include "proc_scan.hpp"
#include "sandbox_test_util.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <thread>

namespace caf_agent::sandbox::test {
namespace {

/// Tighter limits so abuse is contained quickly on a 2-core CI machine.
class escape_test : public sandbox_fixture {
 protected:
  void customize(sandbox_config& c) override {
    c.limits.max_processes = 64;
    c.limits.address_space_bytes = 1ULL << 30;
    c.limits.file_size_bytes = 16ULL << 20;
    c.limits.cpu_seconds = 20;
  }
  /// True while this test process still answers (the host is unaffected).
  static bool host_alive() { return ::kill(::getpid(), 0) == 0; }
};

TEST_F(escape_test, host_loopback_listener_is_unreachable) {
  const int srv = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(srv, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  socklen_t len = sizeof(addr);
  ::getsockname(srv, reinterpret_cast<sockaddr*>(&addr), &len);
  ASSERT_EQ(::listen(srv, 4), 0);
  const int port = ntohs(addr.sin_port);
  auto r = bash("echo hello > /dev/tcp/127.0.0.1/" + std::to_string(port) + " && echo CONNECTED");
  EXPECT_EQ(r.output.find("CONNECTED"), std::string::npos) << r.output;
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("Connection refused"), std::string::npos) << r.output;
  pollfd p{srv, POLLIN, 0};
  EXPECT_EQ(::poll(&p, 1, 100), 0) << "the listener saw a connection";
  ::close(srv);
}

TEST_F(escape_test, outside_network_is_unreachable) {
  auto r = bash(
      "timeout 5 bash -c 'echo > /dev/tcp/1.1.1.1/80' && echo CONNECTED; ip -o link 2>/dev/null | wc -l; cat "
      "/proc/net/dev | tail -n +3 | cut -d: -f1");
  EXPECT_EQ(r.output.find("CONNECTED"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("unreachable"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("eth"), std::string::npos) << "only loopback exists: " << r.output;
}

TEST_F(escape_test, protected_files_cannot_be_changed_from_the_shell) {
  auto r =
      bash("echo x > model.py; rm -f model.py; mv model.py m2.py; chmod 777 model.py; touch harness/new; cat model.py");
  EXPECT_NE(r.output.find("Read-only file system"), std::string::npos) << r.output;
  EXPECT_EQ(slurp(ws_ / "model.py"), "class Model:\n    pass\n");
  EXPECT_FALSE(std::filesystem::exists(ws_ / "harness/new"));
  EXPECT_FALSE(std::filesystem::exists(ws_ / "m2.py"));
}

TEST_F(escape_test, writes_outside_the_workspace_fail) {
  auto r = bash("touch /usr/x; touch /work_x; touch $HOME/../x; touch /etc/x; echo done");
  EXPECT_NE(r.output.find("Read-only file system"), std::string::npos) << r.output;
  EXPECT_FALSE(std::filesystem::exists("/usr/x"));
  EXPECT_FALSE(std::filesystem::exists(root_ / "x"));
  EXPECT_FALSE(std::filesystem::exists("/work_x"));
}

TEST_F(escape_test, host_secrets_are_not_visible) {
  auto r = bash("cat /etc/shadow; ls /root; ls /home; cat /proc/1/root/etc/shadow; ls / | tr '\\n' ' '");
  EXPECT_NE(r.output.find("No such file or directory"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("root:"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find(" work "), std::string::npos) << "host /work must not be mounted: " << r.output;
}

TEST_F(escape_test, host_processes_are_invisible_and_unkillable) {
  auto r = bash("ls /proc | grep -c '^[0-9]'; kill -9 " + std::to_string(::getpid()) + " && echo KILLED");
  EXPECT_EQ(r.output.find("KILLED"), std::string::npos) << r.output;
  EXPECT_LT(std::stoi(r.output), 10) << "pid namespace shows only the sandbox: " << r.output;
  auto r2 = bash("kill -9 $PPID; kill -9 -1; echo after");
  EXPECT_TRUE(host_alive());
  EXPECT_EQ(bash("echo still works").output, "still works\n");
}

TEST_F(escape_test, nested_user_namespaces_and_privilege_are_denied) {
  auto r = bash("unshare -U true && echo NESTED; id -u; mount -t tmpfs none /usr 2>&1 && echo MOUNTED");
  EXPECT_EQ(r.output.find("NESTED"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("MOUNTED"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("1000"), std::string::npos);
}

TEST_F(escape_test, fork_bomb_is_contained_by_the_process_limit_and_timeout) {
  const auto t0 = std::chrono::steady_clock::now();
  auto r = bash(":(){ :|:& };:", 3000);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_TRUE(r.status == tool_status::timeout || r.status == tool_status::ok) << to_string(r.status);
  EXPECT_LT(secs, 10.0);
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  if (sb_->host_uid() >= 0) EXPECT_LE(pids_of_uid(sb_->host_uid()).size(), 0u) << "fork bomb survived the command";
  EXPECT_EQ(bash("echo alive").output, "alive\n");
}

TEST_F(escape_test, endless_loops_are_killed_by_the_timeout) {
  auto r = bash("while true; do :; done", 700);
  EXPECT_EQ(r.status, tool_status::timeout);
  EXPECT_NE(r.output.find("timed out"), std::string::npos);
}

TEST_F(escape_test, gigantic_and_binary_output_are_capped) {
  const auto t0 = std::chrono::steady_clock::now();
  auto big = bash("yes | head -c 100M", 30000);
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 15.0);
  EXPECT_LE(big.output.size(), cfg_.output_cap_bytes + 200);
  EXPECT_NE(big.output.find("[... output truncated: 104827600 bytes omitted ...]"), std::string::npos)
      << big.output.substr(0, 100) << " ... "
      << big.output.substr(big.output.size() > 200 ? big.output.size() - 200 : 0)
      << " status=" << to_string(big.status);
  auto bin = bash("head -c 100000 /dev/urandom");
  EXPECT_NE(bin.output.find("[binary output: 100000 bytes"), std::string::npos) << bin.output.substr(0, 200);
}

TEST_F(escape_test, memory_hog_hits_the_address_space_limit) {
  auto r = bash("x=$(head -c 3000000000 /dev/zero | tr '\\0' a); echo survived ${#x}", 20000);
  EXPECT_EQ(r.output.find("survived 3000000000"), std::string::npos) << r.output.substr(0, 300);
  EXPECT_NE(r.exit_code, 0) << r.output.substr(0, 300);
  EXPECT_TRUE(host_alive());
}

TEST_F(escape_test, huge_file_write_hits_the_file_size_limit) {
  auto r = bash("head -c 100M /dev/zero > big.bin", 20000);
  EXPECT_EQ(r.status, tool_status::killed) << r.output;
  EXPECT_NE(r.output.find("file size limit"), std::string::npos) << r.output;
  EXPECT_LE(std::filesystem::file_size(ws_ / "big.bin"), cfg_.limits.file_size_bytes);
}

TEST_F(escape_test, shell_symlinks_do_not_let_file_tools_escape) {
  bash("ln -s /etc/hostname h; ln -s / rootlink; ln -s /proc/self/root pr");
  for (const char* p : {"h", "rootlink/etc/passwd", "pr/etc/passwd"}) {
    auto r = run("Read", {{"file_path", p}});
    EXPECT_EQ(r.status, tool_status::error) << p;
    EXPECT_NE(r.output.find("outside the workspace"), std::string::npos) << p << ": " << r.output;
  }
  auto w = run("Write", {{"file_path", "rootlink/tmp/pwned"}, {"content", "x"}});
  EXPECT_EQ(w.status, tool_status::error);
  EXPECT_FALSE(std::filesystem::exists("/tmp/pwned"));
  auto fifo = bash("mkfifo pipe");
  EXPECT_NE(run("Read", {{"file_path", "pipe"}}).output.find("not a regular file"), std::string::npos);
}

TEST_F(escape_test, processes_meant_to_survive_are_gone_after_close) {
  const std::string marker = "sleep 1001." + std::to_string(::getpid());
  bash("nohup " + marker + " >/dev/null 2>&1 &");
  bash("setsid " + marker + " >/dev/null 2>&1 &");
  bash("( (" + marker + " &) & )");
  run("Bash", {{"command", "setsid " + marker + " & (" + marker + " &) ; " + marker}, {"run_in_background", true}});
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_FALSE(pids_with_cmdline(marker).empty()) << "the background shell should be running";
  const int uid = sb_->host_uid();
  if (uid >= 0) EXPECT_FALSE(pids_of_uid(uid).empty());
  sb_->close();
  EXPECT_TRUE(pids_with_cmdline(marker).empty());
  if (uid >= 0) EXPECT_TRUE(pids_of_uid(uid).empty());
  EXPECT_FALSE(std::filesystem::exists(ws_)) << "workspace removed on close";
  EXPECT_EQ(run("Bash", {{"command", "true"}}).status, tool_status::internal);
}

TEST_F(escape_test, sandbox_runs_as_unprivileged_host_uid) {
  run("Bash", {{"command", "exec sleep 1003.5"}, {"run_in_background", true}});
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  auto pids = pids_with_cmdline("sleep 1003.5");
  ASSERT_FALSE(pids.empty());
  if (::geteuid() == 0) {
    ASSERT_GE(sb_->host_uid(), static_cast<int>(cfg_.host_uid_base));
    EXPECT_FALSE(pids_of_uid(sb_->host_uid()).empty());
    for (int pid : pids_of_uid(0)) EXPECT_NE(pid, pids.front()) << "sandboxed process runs as host root";
  }
}

}  // namespace
}  // namespace caf_agent::sandbox::test
