// The node reaper: a "node" (a forked test process) starts the reaper and a child whose own
// child escapes the parent-death signal; the node is SIGKILLed and nothing of it may survive.
#include "sandbox/node_reaper.hpp"
#include "sandbox/process_runner.hpp"

#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <fstream>
#include <string>
#include <thread>

namespace caf_agent::sandbox {
namespace {

using namespace std::chrono_literals;

/// True while `pid` exists and is not a zombie.
bool alive(int pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string text;
  if (!std::getline(in, text)) return false;
  const auto close = text.rfind(')');
  return close != std::string::npos && close + 2 < text.size() && text[close + 2] != 'Z';
}

/// Reads whitespace-separated pids the node's processes wrote to `path`, waiting for `n`.
std::vector<int> wait_pids(const std::string& path, size_t n) {
  for (int i = 0; i < 400; ++i) {
    std::ifstream in(path);
    std::vector<int> pids;
    for (int p; in >> p;) pids.push_back(p);
    if (pids.size() >= n) return pids;
    std::this_thread::sleep_for(10ms);
  }
  return {};
}

/// SIGKILLs `node`, then waits up to 2 s for every one of `pids` to be gone.
std::vector<int> survivors_after_kill(pid_t node, const std::vector<int>& pids) {
  ::kill(node, SIGKILL);
  ::waitpid(node, nullptr, 0);
  // Rationale: the bound: a node's children are gone within 2 s of its SIGKILL.
  const auto until = std::chrono::steady_clock::now() + 2s;
  std::vector<int> left;
  do {
    left.clear();
    for (int p : pids)
      if (alive(p)) left.push_back(p);
    if (left.empty()) break;
    std::this_thread::sleep_for(20ms);
  } while (std::chrono::steady_clock::now() < until);
  for (int p : left) ::kill(p, SIGKILL);  // do not leave them to the next test
  return left;
}

std::string temp_file(const char* tag) {
  return "/tmp/caf-agent-reaper-" + std::to_string(::getpid()) + "-" + tag;
}

TEST(node_reaper, process_group_member_without_parent_death_signal_dies_with_the_node) {
  const auto pids_file = temp_file("group");
  std::remove(pids_file.c_str());
  const pid_t node = ::fork();
  ASSERT_GE(node, 0);
  if (node == 0) {
    if (!start_node_reaper().empty()) ::_exit(3);
    // sh gets the parent-death signal; its `sleep` does not (the signal is not inherited),
    // so only the reaper's process-group kill ends it.
    spawn_spec spec;
    spec.argv = {"/bin/sh", "-c", "sleep 300 & echo $! > " + pids_file + "; wait"};
    spec.env = {"PATH=/usr/bin:/bin"};
    std::string error;
    auto tree = process_tree::start(spec, error);
    if (!tree) ::_exit(4);
    for (;;) ::pause();
  }
  const auto pids = wait_pids(pids_file, 1);
  ASSERT_EQ(pids.size(), 1u) << "the node's grandchild never started";
  ASSERT_TRUE(alive(pids[0]));
  EXPECT_TRUE(survivors_after_kill(node, pids).empty()) << "the grandchild outlived its SIGKILLed node";
  std::remove(pids_file.c_str());
}

TEST(node_reaper, grandchild_in_a_new_session_dies_with_the_node_through_its_cgroup) {
  if (probe_cgroups().mode == cgroup_mode::none) GTEST_SKIP() << "no cgroup on this host: " << probe_cgroups().detail;
  const auto pids_file = temp_file("cgroup");
  std::remove(pids_file.c_str());
  const pid_t node = ::fork();
  ASSERT_GE(node, 0);
  if (node == 0) {
    if (!start_node_reaper().empty()) ::_exit(3);
    node_child_guard guard("caf-agent-reaper-test-" + std::to_string(::getpid()));
    if (!guard.has_cgroup()) ::_exit(5);
    // The grandchild leaves the group and the session (as the eval worker's compilers do):
    // neither the parent-death signal nor a process-group kill reaches it.
    const std::string script =
        "setsid sh -c 'echo $$ >> " + pids_file + "; exec sleep 300' & echo $$ >> " + pids_file + "; exec sleep 300";
    const pid_t child = ::fork();
    if (child == 0) {
      guard.in_child();
      ::execl("/bin/sh", "sh", "-c", script.c_str(), static_cast<char*>(nullptr));
      ::_exit(127);
    }
    guard.started(child);
    for (;;) ::pause();
  }
  const auto pids = wait_pids(pids_file, 2);
  ASSERT_EQ(pids.size(), 2u) << "the node's processes never started";
  for (int p : pids) ASSERT_TRUE(alive(p)) << p;
  EXPECT_TRUE(survivors_after_kill(node, pids).empty()) << "a process outlived its SIGKILLed node";
  std::remove(pids_file.c_str());
}

TEST(node_reaper, a_live_node_keeps_its_children) {
  const auto pids_file = temp_file("live");
  std::remove(pids_file.c_str());
  const pid_t node = ::fork();
  ASSERT_GE(node, 0);
  if (node == 0) {
    if (!start_node_reaper().empty()) ::_exit(3);
    spawn_spec spec;
    spec.argv = {"/bin/sh", "-c", "echo $$ > " + pids_file + "; exec sleep 300"};
    spec.env = {"PATH=/usr/bin:/bin"};
    std::string error;
    auto tree = process_tree::start(spec, error);
    if (!tree) ::_exit(4);
    for (;;) ::pause();
  }
  const auto pids = wait_pids(pids_file, 1);
  ASSERT_EQ(pids.size(), 1u);
  std::this_thread::sleep_for(300ms);
  EXPECT_TRUE(alive(pids[0])) << "the reaper killed a child of a live node";
  EXPECT_TRUE(survivors_after_kill(node, pids).empty());
  std::remove(pids_file.c_str());
}

}  // namespace
}  // namespace caf_agent::sandbox
